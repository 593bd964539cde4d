// Package service is tamq's daemon: it owns the database, listens on the
// Unix socket, answers the protocol's operations and shuts down cleanly.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/api"
	"github.com/tmux-amq/tamq/internal/tamq/queue"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// Now is the service's clock: UTC, to the millisecond, so every time it
// reports is what the database keeps (Unix milliseconds) and every JSON time
// is RFC 3339 in UTC with at most millisecond precision.
func Now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// IdleTimeout closes a client connection that sends nothing for this long.
const IdleTimeout = 30 * time.Second

// The connection caps. A CLI command holds one connection for one request,
// so hundreds at once already means something runs amok; a broker holds one
// session per agent window for its whole life. Together they bound the
// descriptors connections take well below any usual RLIMIT_NOFILE (Go raises
// the soft limit to the hard one at start), so a flood of connections is
// refused before it can use them up.
const (
	MaxConns   = 256
	MaxStreams = 512
)

// Options configure a service.
type Options struct {
	Paths    paths.Paths
	Config   *config.Loaded
	Registry func() (*gita.Registry, error)
	Log      *slog.Logger
	Now      func() time.Time
	// Notices receives what the operator must see at start (the history
	// advisory); stderr in practice.
	Notices io.Writer
	// Orwell, when set, receives every protocol frame in full (--orwell).
	Orwell   io.Writer
	Detached bool
	// AdvisoryLimit is the history size that triggers the purge advisory;
	// zero means the spec's 100 MB.
	AdvisoryLimit int64
	// IdleRelease is how long after its last request the service hands freed
	// memory back to the system; zero means DefaultIdleRelease.
	IdleRelease time.Duration
	// Writer writes into terminals; nil means TmuxWriter.
	Writer Writer
	// Restore reopens the recorded windows at start (tamq start): those of
	// every tmux server that runs, and those of the sockets in Recreate,
	// whose server is started again when it is gone.
	Restore  bool
	Recreate []string
}

// DefaultIdleRelease keeps an idle service small: the Go runtime returns freed
// heap to the system only gradually, and a daemon that mostly waits should not
// hold on to the peak of its last burst of work.
const DefaultIdleRelease = 2 * time.Second

// Service is a running tamq service.
type Service struct {
	opts      Options
	log       *slog.Logger
	lock      *lockfile.Lock
	db        *sqlitedb.DB
	store     *store.Store
	ln        *protocol.Listener
	server    *protocol.Server
	startedAt time.Time

	stopOnce sync.Once
	stopped  chan struct{}
	idle     *time.Timer

	// The background work, stopped in this order at shutdown: the dispatcher
	// (its deliveries finish), then, once the requests under way are
	// answered, the committer they may need, then the watcher.
	stopDispatch, stopCommit, stopWatch context.CancelFunc
	// work ends when shutdown begins: long requests (a purge) stop at their
	// next step instead of holding the shutdown to its grace period.
	work     context.Context
	stopWork context.CancelFunc
	purgeMu  sync.Mutex

	brokers      brokers
	live         *live
	epMu         sync.Mutex
	epCache      []store.Endpoint // the endpoints table; nil when stale
	instance     string           // names this run's delivery claims
	wakeCh       chan struct{}
	enqCh        chan enqueueReq
	stopping     atomic.Bool
	busy         sync.Map // delivery keys of windows being written to
	dispatchDone chan struct{}
	commitDone   chan struct{}
	watchDone    chan struct{}
}

// Start brings the service up to the point where it accepts connections. The
// order matters: every check that can fail runs before the database is
// opened, so a failed start leaves existing data untouched; the socket is
// bound last, so nobody reaches a half-started service.
func Start(ctx context.Context, o Options) (*Service, error) {
	if o.Now == nil {
		o.Now = Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		opts: o, log: o.Log, stopped: make(chan struct{}),
		instance: store.NewID(), wakeCh: make(chan struct{}, 1), enqCh: make(chan enqueueReq, 256),
		dispatchDone: make(chan struct{}), commitDone: make(chan struct{}), watchDone: make(chan struct{}),
		live: newLive(),
	}
	s.work, s.stopWork = context.WithCancel(context.Background())
	if s.opts.Writer == nil {
		s.opts.Writer = RoutingWriter{svc: s, tmux: TmuxWriter{Pause: s.enterPause}}
	}
	if err := paths.EnsurePrivateDir(o.Paths.StateDir); err != nil {
		return nil, err
	}
	if o.Paths.SocketDirPrivate(o.Paths.Socket) {
		// Made and checked as tmux makes /tmp/tmux-<uid>: in a shared /tmp,
		// only a directory of our own keeps others from the socket's path.
		if err := protocol.CheckPrivateDir(o.Paths.PrivateDir, true); err != nil {
			return nil, err
		}
	}
	if err := protocol.CheckSocketPath(o.Paths.Socket, daemon.Names(o.Paths)); err != nil {
		return nil, err
	}
	lock, err := lockfile.TryLock(o.Paths.LockFile)
	if errors.Is(err, lockfile.ErrHeld) {
		pid, what := lockfile.Holder(o.Paths.LockFile)
		if what != "" {
			// Not a service: a command that writes the database while no
			// service runs (tamq purge) holds the lock for its run.
			return nil, errs.New(errs.Conflict, "cannot start: tamq %s (pid %d) is writing to the database in %s", textsafe.Escape(what), pid, o.Paths.StateDir).
				WithHint("start the service again once it has finished")
		}
		return nil, errs.New(errs.AlreadyRunning, "another tamq service (pid %d) already uses %s", pid, o.Paths.StateDir).
			WithHint("see `tamq status`; stop it with `tamq stop`")
	}
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot start: state dir %s", o.Paths.StateDir)
	}
	s.lock = lock
	fail := func(err error) (*Service, error) {
		if s.ln != nil {
			s.ln.Close()
			s.ln.Remove()
		}
		s.release()
		return nil, err
	}
	st, err := store.Open(ctx, o.Paths, o.Config.BusyTimeout(), o.Now)
	if err != nil {
		return fail(err)
	}
	st.PolicyProfile, st.ConfigVersion = o.Config.ProfileRef(), o.Config.Version
	s.db, s.store = st.DB, st
	if st.DB.BackupPath != "" {
		s.log.Info("database migrated", "backup", st.DB.BackupPath)
	}
	ln, err := protocol.Listen(o.Paths.Socket, daemon.Names(o.Paths))
	if err != nil {
		return fail(err)
	}
	s.ln = ln
	s.startedAt = o.Now()
	s.server = &protocol.Server{
		Names:       daemon.Names(o.Paths),
		Handlers:    s.handlers(),
		Log:         s.log,
		StreamOps:   map[string]bool{api.OpBrokerSession: true},
		Refused:     s.refused,
		IdleTimeout: IdleTimeout,
		MaxConns:    MaxConns,
		MaxStreams:  MaxStreams,
	}
	if o.Orwell != nil {
		s.server.Trace = orwellTracer(o.Orwell, o.Now)
	}
	if err := s.store.AddReceipt(ctx, s.receipt(receipt.KindServiceStart, "started", "", map[string]any{
		"pid": os.Getpid(), "version": buildinfo.Get().Version, "proto": protocol.Version, "detached": o.Detached, "orwell": o.Orwell != nil,
	})); err != nil {
		return fail(err)
	}
	s.advise(ctx)
	s.reconnectEndpoints(ctx)
	if o.Restore {
		if _, err := s.restore(ctx, o.Recreate); err != nil {
			// The service runs without the windows that could not come back;
			// the log says which, and `tamq start` can be run again.
			s.log.Error("the workspace was not fully restored", "error", err.Error())
		}
	}
	s.log.Info("tamq service started", "pid", os.Getpid(), "socket", o.Paths.Socket, "database", o.Paths.Database,
		"policy_profile", o.Config.ProfileRef(), "config_version", o.Config.Version)
	return s, nil
}

func (s *Service) receipt(kind, status, reason string, detail map[string]any) receipt.Receipt {
	return receipt.Receipt{
		Kind: kind, Status: status, Reason: reason, Detail: detail,
		PolicyProfile: s.opts.Config.ProfileRef(), ConfigVersion: s.opts.Config.Version,
	}
}

// refused records a connection rejected by peer credentials. Nothing was read
// from it, so the receipt holds only the peer's identity.
func (s *Service) refused(peer protocol.Peer, err error) {
	s.log.Warn("connection refused", "peer_uid", peer.UID, "peer_pid", peer.PID, "reason", err.Error())
	r := s.receipt(receipt.KindAuthRefused, "refused", "peer uid differs from service uid",
		map[string]any{"peer_uid": peer.UID, "peer_pid": peer.PID})
	if werr := s.store.AddReceipt(context.Background(), r); werr != nil {
		s.log.Error("cannot record refused connection", "error", werr.Error())
	}
}

// Run serves until ctx ends (a signal) or a client asks the service to stop,
// then shuts down: no new connections or requests, the requests under way
// finish (within the grace period), endpoints are marked disconnected, the
// socket is closed and removed, a shutdown receipt is written. Queues and leases
// stay in the database for the next start.
func (s *Service) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	// Requests are served with a context a signal does not cancel: a
	// request accepted before SIGTERM is answered, not failed.
	go func() { serveErr <- s.server.Serve(context.WithoutCancel(ctx), s.ln) }()
	base := context.WithoutCancel(ctx)
	var commitCtx, dispatchCtx, watchCtx context.Context
	commitCtx, s.stopCommit = context.WithCancel(base)
	dispatchCtx, s.stopDispatch = context.WithCancel(base)
	watchCtx, s.stopWatch = context.WithCancel(base)
	defer s.stopCommit()
	defer s.stopDispatch()
	defer s.stopWatch()
	go func() {
		defer close(s.commitDone)
		s.commit(commitCtx)
	}()
	go func() {
		defer close(s.dispatchDone)
		s.dispatch(dispatchCtx)
	}()
	go func() {
		defer close(s.watchDone)
		s.watch(watchCtx)
	}()
	reason := "stop request"
	select {
	case <-ctx.Done():
		reason = "signal"
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			reason = cause.Error()
		}
	case <-s.stopped:
	case err := <-serveErr:
		s.log.Error("accept loop failed", "error", err)
		reason = "listener failure"
	}
	return s.shutdown(reason)
}

func (s *Service) shutdown(reason string) error {
	grace := s.opts.Config.ShutdownGrace()
	began := s.opts.Now()
	s.log.Info("shutting down", "reason", reason, "grace", grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()

	s.ln.Close()
	s.idle.Stop()
	s.stopping.Store(true) // no new deliveries are claimed
	s.stopWork()
	sockErr := s.ln.Remove()
	var drainErr error
	// Deliveries under way finish first, while their brokers' sessions are
	// still open: a delivery cut off would be recorded as failed although its
	// text arrived.
	s.stopDispatch()
	select {
	case <-s.dispatchDone:
	case <-graceCtx.Done():
		drainErr = errs.New(errs.Timeout, "deliveries still running when the grace period ended")
	}
	// Then the requests under way are answered (the committer still runs for
	// the sends among them), and every connection, broker sessions too, closes.
	drainErr = errors.Join(drainErr, s.server.Shutdown(graceCtx))
	s.stopCommit()
	s.stopWatch()
	select {
	case <-s.commitDone:
	case <-graceCtx.Done():
	}
	if drainErr != nil {
		s.log.Warn("grace period ended with work still running", "error", drainErr.Error())
	}
	// The writes below are short; they get their own bound so a wedged
	// database cannot hold the process past the grace period by much.
	writeCtx, cancelWrite := context.WithTimeout(context.Background(), max(grace-time.Since(began), time.Second))
	defer cancelWrite()
	n, markErr := s.store.MarkEndpointsDisconnected(writeCtx)
	rcptErr := s.store.AddReceipt(writeCtx, s.receipt(receipt.KindServiceShutdown, "stopped", reason, map[string]any{
		"pid": os.Getpid(), "endpoints_disconnected": n, "grace_exceeded": drainErr != nil,
		"duration_ms": s.opts.Now().Sub(began).Milliseconds(),
	}))
	s.release()
	if err := errors.Join(sockErr, markErr, rcptErr); err != nil {
		s.log.Error("unclean shutdown", "error", err.Error())
		return errs.Wrap(errs.Storage, err, "unclean shutdown")
	}
	s.log.Info("tamq service stopped")
	return nil
}

// requestStop makes Run shut down, as a signal would.
func (s *Service) requestStop() { s.stopOnce.Do(func() { close(s.stopped) }) }

func (s *Service) release() {
	s.stopWork()
	if s.db != nil {
		s.db.Close()
	}
	s.lock.Release()
}

func (s *Service) handlers() map[string]protocol.Handler {
	hs := map[string]protocol.Handler{
		daemon.OpHello:      s.hello,
		daemon.OpPing:       s.ping,
		api.OpStatus:        s.status,
		daemon.OpShutdown:   s.shutdownOp,
		api.OpRegister:      s.register,
		api.OpSend:          s.send,
		api.OpAck:           s.ack,
		api.OpRetry:         s.retry,
		api.OpReplay:        s.replay,
		api.OpEndpoints:     s.endpoints,
		api.OpForget:        s.forget,
		api.OpRestore:       s.restoreOp,
		api.OpPurge:         s.purge,
		api.OpBrokerSession: s.brokerSession,
	}
	release := s.opts.IdleRelease
	if release == 0 {
		release = DefaultIdleRelease
	}
	s.idle = time.AfterFunc(release, debug.FreeOSMemory)
	for op, h := range hs {
		hs[op] = func(ctx context.Context, peer protocol.Peer, req *protocol.Request) (any, error) {
			defer s.idle.Reset(release)
			return h(ctx, peer, req)
		}
	}
	return hs
}

func (s *Service) hello(_ context.Context, _ protocol.Peer, req *protocol.Request) (any, error) {
	var args daemon.HelloArgs
	if err := protocol.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	proto, err := protocol.Negotiate(protocol.Version, req.Proto)
	if err != nil {
		return nil, err
	}
	// What it offers is what it answers: its operations, never a list kept
	// apart from them.
	caps := slices.Sorted(maps.Keys(s.server.Handlers))
	return daemon.HelloResult{Server: "tamq", ServerVersion: buildinfo.Get().Version, Proto: proto, Capabilities: caps}, nil
}

func (s *Service) ping(_ context.Context, _ protocol.Peer, req *protocol.Request) (any, error) {
	return daemon.PingResult{PID: os.Getpid(), StartedAt: s.startedAt, ServerVersion: buildinfo.Get().Version, Proto: protocol.Version}, nil
}

func (s *Service) status(ctx context.Context, _ protocol.Peer, _ *protocol.Request) (any, error) {
	now := s.opts.Now()
	r := status.Collect(ctx, status.Sources{
		Paths: s.opts.Paths, Config: s.opts.Config, Registry: s.opts.Registry,
		Migrations: store.Migrations, DB: s.db.Reader, Now: now,
	})
	for i, ep := range r.Endpoints {
		for j, w := range ep.Windows {
			win := &r.Endpoints[i].Windows[j]
			win.Broker = s.brokerLive(ep.ID, w.Repo, w.PaneID)
			switch {
			case ep.State != store.Connected:
				win.WaitReason = "its tmux server is gone"
			default:
				win.WaitReason = s.live.waitReason(store.DeliveryKey(ep.ID, w.Repo))
			}
		}
	}
	started := s.startedAt.UTC()
	r.Service = api.ServiceStatus{
		Running: true, PID: os.Getpid(), StartedAt: &started, UptimeSeconds: now.Sub(s.startedAt).Seconds(),
		ServerVersion: buildinfo.Get().Version, Proto: protocol.Version,
		Socket: s.opts.Paths.Socket, LogFile: s.opts.Paths.LogFile, Orwell: s.opts.Orwell != nil,
		PolicyProfile: s.opts.Config.ProfileRef(), ConfigVersion: s.opts.Config.Version,
	}
	status.Judge(&r)
	return r, nil
}

func (s *Service) shutdownOp(_ context.Context, peer protocol.Peer, _ *protocol.Request) (any, error) {
	s.log.Info("stop requested", "peer_pid", peer.PID)
	s.requestStop()
	return daemon.ShutdownResult{PID: os.Getpid(), GraceSeconds: s.opts.Config.ShutdownGrace().Seconds()}, nil
}

// advise prints the spec's history advisory when history is over the limit.
func (s *Service) advise(ctx context.Context) {
	size, since, _, err := store.HistorySize(ctx, s.db.Reader)
	if err != nil {
		s.log.Warn("cannot measure history", "error", err.Error())
		return
	}
	limit := s.opts.AdvisoryLimit
	if limit == 0 {
		limit = AdvisoryLimit
	}
	if msg := HistoryAdvisory(size, since, limit); msg != "" {
		s.log.Warn("history is large", "bytes", size, "since", since)
		if s.opts.Notices != nil {
			fmt.Fprintln(s.opts.Notices, msg)
		}
	}
}

// AdvisoryLimit is the history size above which the service advises a purge.
const AdvisoryLimit = 100 * 1000 * 1000

// HistoryAdvisory is the spec's advisory text, or "" under the limit.
func HistoryAdvisory(bytes int64, since time.Time, limit int64) string {
	if bytes <= limit {
		return ""
	}
	return fmt.Sprintf("Size of history is %d MB since %s, exceeding %dMB. Consider using 'tamq purge'.",
		bytes/1000/1000, since.UTC().Format("060102"), limit/1000/1000)
}

// orwellTracer writes frames to the Orwell sink, one line each.
func orwellTracer(w io.Writer, now func() time.Time) func(string, []byte) {
	var mu sync.Mutex
	return func(direction string, frame []byte) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s %s %s\n", now().UTC().Format(time.RFC3339Nano), direction, frame)
	}
}

func (s *Service) isStopping() bool { return s.stopping.Load() }

// reconnectEndpoints marks each recorded endpoint connected when its tmux
// server still runs with the same pid, else disconnected.
func (s *Service) reconnectEndpoints(ctx context.Context) {
	eps, err := store.Endpoints(ctx, s.db.Reader, false)
	if err != nil {
		s.log.Error("cannot read endpoints", "error", err.Error())
		return
	}
	for _, ep := range eps {
		state, reason := store.Disconnected, "its tmux server is gone"
		askCtx, cancel := askTmux(ctx)
		pid, err := (tmux.Server{Socket: ep.TmuxSocket}).PID(askCtx)
		cancel()
		if err == nil && pid == ep.ServerPID {
			state, reason = store.Connected, "its tmux server still runs"
		}
		if err := s.store.SetEndpointState(ctx, ep.ID, state, reason); err != nil {
			s.log.Error("cannot record endpoint state", "endpoint", ep.ID, "error", err.Error())
		}
	}
	s.endpointsChanged()
	s.live.requestRebind()
}

type enqueueReq struct {
	m    *queue.Message
	done chan error
}

// enqueue hands a message to the committer and waits until it is durable.
// It never waits on a committer that has stopped.
func (s *Service) enqueue(ctx context.Context, m *queue.Message) error {
	stopped := errs.New(errs.ShuttingDown, "the service is shutting down; the message was not queued").
		WithHint("send it again once the service is back")
	req := enqueueReq{m: m, done: make(chan error, 1)}
	select {
	case s.enqCh <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.commitDone:
		return stopped
	}
	select {
	case err := <-req.done:
		return err
	case <-s.commitDone:
		// The committer answers every request it took before it stops.
		select {
		case err := <-req.done:
			return err
		default:
			return stopped
		}
	}
}

// commit writes queued messages in groups: every request waiting when a
// commit starts joins it, so concurrent senders share one fsync instead of
// paying one each. A group that fails is retried one message at a time, so
// one bad message cannot fail the others.
func (s *Service) commit(ctx context.Context) {
	for {
		var group []enqueueReq
		select {
		case <-ctx.Done():
			return
		case req := <-s.enqCh:
			group = append(group, req)
		}
	more:
		for len(group) < 256 {
			select {
			case req := <-s.enqCh:
				group = append(group, req)
			default:
				break more
			}
		}
		msgs := make([]*queue.Message, len(group))
		for i, r := range group {
			msgs[i] = r.m
		}
		if err := s.store.Enqueue(ctx, msgs); err == nil {
			for _, r := range group {
				r.done <- nil
			}
			continue
		}
		for _, r := range group {
			r.m.ID, r.m.BatchID = "", ""
			r.done <- s.store.Enqueue(ctx, []*queue.Message{r.m})
		}
	}
}

// knownEndpoints returns the recorded endpoints, read once and then kept
// until something changes them: every send needs them.
func (s *Service) knownEndpoints(ctx context.Context) ([]store.Endpoint, error) {
	s.epMu.Lock()
	defer s.epMu.Unlock()
	if s.epCache == nil {
		eps, err := store.Endpoints(ctx, s.db.Reader, false)
		if err != nil {
			return nil, err
		}
		if eps == nil {
			eps = []store.Endpoint{}
		}
		s.epCache = eps
	}
	return s.epCache, nil
}

// endpointsChanged drops the endpoint cache.
func (s *Service) endpointsChanged() {
	s.epMu.Lock()
	s.epCache = nil
	s.epMu.Unlock()
}
