package daemon

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Service is the process-level part of a running service: its lifetime lock,
// its socket and the server on it, its workers, and the shutdown that stops
// them in order. The program opens it, opens its own data, listens, then runs
// it; its handlers and workers are its own.
type Service struct {
	paths paths.Paths
	log   *slog.Logger
	lock  *lockfile.Lock
	ln    *unixrpc.Listener
	srv   *unixrpc.Server

	// changes counts what the program says changed (OpChanges).
	changes *Changes

	closeOnce sync.Once
	onClose   []func()
	stopOnce  sync.Once
	stopped   chan struct{}
}

// Open makes the checks a start must pass before the program touches its data
// (so a failed start leaves the data as it was) and takes the lifetime lock:
// the state directory is the user's (0700), the socket's private directory
// (without XDG_RUNTIME_DIR) is made and checked as tmux checks its own, the
// socket path is free or stale, and no other service of the program runs.
func Open(p paths.Paths, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := paths.EnsurePrivateDir(p.StateDir); err != nil {
		return nil, err
	}
	if p.SocketDirPrivate(p.Socket) {
		// In a shared /tmp only a directory of our own keeps others from the
		// socket's path.
		if err := unixrpc.CheckPrivateDir(p.PrivateDir, true); err != nil {
			return nil, err
		}
	}
	if err := unixrpc.CheckSocketPath(p.Socket, Names(p)); err != nil {
		return nil, err
	}
	lock, err := lockfile.TryLock(p.LockFile)
	if errors.Is(err, lockfile.ErrHeld) {
		pid, what := lockfile.Holder(p.LockFile)
		if what != "" {
			// Not a service: a command that writes the database while no
			// service runs (tamq purge) holds the lock for its run.
			return nil, errs.New(errs.Conflict, "cannot start: %s %s (pid %d) is writing to the database in %s", p.Program, textsafe.Escape(what), pid, p.StateDir).
				WithHint("start the service again once it has finished")
		}
		return nil, errs.New(errs.AlreadyRunning, "another %s service (pid %d) already uses %s", p.Program, pid, p.StateDir).
			WithHint("see `%s status`; stop it with `%s stop`", p.Program, p.Program)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot start: state dir %s", p.StateDir)
	}
	stopped := make(chan struct{})
	return &Service{paths: p, log: log, lock: lock, stopped: stopped, changes: newChanges(stopped)}, nil
}

// OnClose adds what Close releases besides the lock and the socket (the
// program's database), run in reverse order.
func (s *Service) OnClose(f func()) { s.onClose = append(s.onClose, f) }

// Database hands the program's open database to the service: closed when
// the service is, and the backup its migration made (if it made one) said
// in the log.
func (s *Service) Database(db *sqlitedb.DB) {
	s.OnClose(func() { db.Close() })
	if db.BackupPath != "" {
		s.log.Info("database migrated", "backup", db.BackupPath)
	}
}

// Listen binds the socket, last of a start, so nobody reaches a half-started
// service; srv serves it once Run starts. The server is given the program's
// names.
func (s *Service) Listen(srv *unixrpc.Server) error {
	ln, err := unixrpc.Listen(s.paths.Socket, Names(s.paths))
	if err != nil {
		return err
	}
	srv.Names = Names(s.paths)
	s.ln, s.srv = ln, srv
	return nil
}

// Close releases everything Open and Listen took, and what OnClose added. A
// start that fails before Run calls it; Run calls it at the end.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		if s.ln != nil {
			s.ln.Close()
			s.ln.Remove()
		}
		for i := len(s.onClose) - 1; i >= 0; i-- {
			s.onClose[i]()
		}
		s.lock.Release()
	})
}

// Stop makes Run shut down, as a signal would (a client's stop request).
func (s *Service) Stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// Plan is what Run runs and in which order it stops it.
type Plan struct {
	// Grace bounds the shutdown: deliveries and requests under way finish
	// within it.
	Grace time.Duration
	// DrainFirst are workers whose work must end while connections are still
	// open (tamq's dispatcher: a delivery cut off would be recorded as failed
	// although its text arrived). They stop before the server drains.
	DrainFirst []*Worker
	// Workers stop after the server has answered the requests under way
	// (which may need them: tamq's committer), in reverse order.
	Workers []*Worker
	// Stopping runs first at shutdown, before anything stops (tamq stops
	// claiming deliveries).
	Stopping func()
	// Stopped runs last, before Close, with a short bound of its own: the
	// program's final writes (endpoints disconnected, the shutdown receipt).
	// graceExceeded says whether work was still running when the grace
	// period ended.
	Stopped func(ctx context.Context, reason string, graceExceeded bool) error
}

// Run serves the socket and runs the workers until ctx ends (a signal) or
// Stop is called, then shuts down: no new connections (the socket is removed
// at once), the drain-first workers finish, the requests under way are
// answered, every connection closes, the other workers stop, the Stopped hook
// writes what the program keeps, and everything is released. Requests are
// served with a context a signal does not cancel: a request accepted before
// SIGTERM is answered, not failed.
func (s *Service) Run(ctx context.Context, plan Plan) error {
	base := context.WithoutCancel(ctx)
	go s.srv.Serve(base, s.ln) // it returns only once the listener is closed
	for _, w := range plan.Workers {
		w.Start(base)
	}
	for _, w := range plan.DrainFirst {
		w.Start(base)
	}
	reason := "stop request"
	select {
	case <-ctx.Done():
		reason = "signal"
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			reason = cause.Error()
		}
	case <-s.stopped:
	}
	return s.shutdown(plan, reason)
}

func (s *Service) shutdown(plan Plan, reason string) error {
	defer s.Close()
	began := time.Now()
	s.log.Info("shutting down", "reason", reason, "grace", plan.Grace)
	grace, cancel := context.WithTimeout(context.Background(), plan.Grace)
	defer cancel()
	s.ln.Close()
	sockErr := s.ln.Remove()
	if plan.Stopping != nil {
		plan.Stopping()
	}
	var drainErr error
	for _, w := range plan.DrainFirst {
		drainErr = errors.Join(drainErr, w.Stop(grace))
	}
	drainErr = errors.Join(drainErr, s.srv.Shutdown(grace))
	for i := len(plan.Workers) - 1; i >= 0; i-- {
		drainErr = errors.Join(drainErr, plan.Workers[i].Stop(grace))
	}
	if drainErr != nil {
		s.log.Warn("grace period ended with work still running", "error", drainErr.Error())
	}
	var finalErr error
	if plan.Stopped != nil {
		// Short writes, with their own bound so a wedged database cannot
		// hold the process past the grace period by much.
		write, cancelWrite := context.WithTimeout(context.Background(), max(plan.Grace-time.Since(began), time.Second))
		finalErr = plan.Stopped(write, reason, drainErr != nil)
		cancelWrite()
	}
	if err := errors.Join(sockErr, finalErr); err != nil {
		s.log.Error("unclean shutdown", "error", err.Error())
		return errs.Wrap(errs.Storage, err, "unclean shutdown")
	}
	s.log.Info(string(s.paths.Program) + " service stopped")
	return nil
}

// SignalContext is ctx, ended with the signal's name as its cause by the
// first SIGTERM or SIGINT; stop stops listening.
func SignalContext(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case sig := <-sigs:
			cancel(errors.New(signalName(sig)))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}

// Changes is the service's change counter: the program bumps it where its
// state changes, and OpChanges lets a view wait for that.
func (s *Service) Changes() *Changes { return s.changes }

// Lifecycle are the handlers of the operations every service answers, for a
// program to add to its own: hello (the negotiated protocol and, as
// capabilities, exactly the operations the server answers), ping (which
// service answers, since when), shutdown (a stop request; the service then
// stops within grace) and changes (a wait for the state to change).
func (s *Service) Lifecycle(started time.Time, grace time.Duration) map[string]unixrpc.Handler {
	version := buildinfo.Get().Version
	return map[string]unixrpc.Handler{
		OpHello: func(_ context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
			var args HelloArgs
			if err := unixrpc.DecodeArgs(req, &args); err != nil {
				return nil, err
			}
			proto, err := unixrpc.Negotiate(unixrpc.Version, req.Proto)
			if err != nil {
				return nil, err
			}
			caps := slices.Sorted(maps.Keys(s.srv.Handlers))
			return HelloResult{Server: string(s.paths.Program), ServerVersion: version, Proto: proto, Capabilities: caps}, nil
		},
		OpPing: func(_ context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
			if err := unixrpc.NoArgs(req); err != nil {
				return nil, err
			}
			return PingResult{PID: os.Getpid(), StartedAt: started, ServerVersion: version, Proto: unixrpc.Version}, nil
		},
		OpShutdown: func(_ context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
			if err := unixrpc.NoArgs(req); err != nil {
				return nil, err
			}
			s.log.Info("stop requested", "peer_pid", peer.PID)
			s.Stop()
			return ShutdownResult{PID: os.Getpid(), GraceSeconds: grace.Seconds()}, nil
		},
		OpChanges: s.Changes().handler,
	}
}
