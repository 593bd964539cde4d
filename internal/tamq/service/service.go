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
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
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
	Paths paths.Paths
	// Engine are coordination-engine's paths: where tamq attaches, and the
	// socket its windows are told about.
	Engine   paths.Paths
	Config   *config.Loaded
	Registry func() (*gita.Registry, error)
	// Addresses is the registry every send's address is checked against:
	// a watched reading of it (gita.Reader.Watched), so that a send does not
	// stat every registered repo. Nil means Registry.
	Addresses func() (*gita.Registry, error)
	Log       *slog.Logger
	Now       func() time.Time
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
	// Publish paces the receipt publisher; zero is its defaults.
	Publish PublishTiming
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

// Service is a running tamq service: the shared skeleton (internal/daemon)
// with tamq's handlers and workers.
type Service struct {
	opts      Options
	log       *slog.Logger
	d         *daemon.Service
	db        *sqlitedb.DB
	store     *store.Store
	server    *unixrpc.Server
	startedAt time.Time
	idle      *time.Timer
	// shutdownBegan is when the shutdown began, for its receipt.
	shutdownBegan time.Time

	// The background work. At shutdown the dispatcher stops first (its
	// deliveries finish while their brokers' sessions are open), then, once
	// the requests under way are answered, the others: the committer those
	// requests may need last.
	dispatcher, committer, ackExpirer, leaseRescuer, watcher, attacher, publisher, leaseKeeper *daemon.Worker
	// keeper is what the lease keeper knows: the wakes written, per window.
	keeper *keeper
	// engineLink is the link to coordination-engine the attacher keeps.
	engineLink *attachment
	// engineProc recognises the engine's process: only it may wake.
	engineProc *daemon.ServiceProcess
	// pub is the publisher's state: how it sends receipts, and how it went.
	pub *publisher

	brokers   brokers
	live      *live
	epMu      sync.Mutex
	epCache   []queue.Endpoint // the endpoints table; nil when stale
	instance  string           // names this run's delivery claims
	wakeCh    chan struct{}
	enqCh     chan enqueueReq
	ackWakeCh chan struct{}
	stopping  atomic.Bool
	busy      sync.Map // delivery keys of windows being written to
	// work ends when shutdown begins: long requests (a purge) stop at their
	// next step instead of holding the shutdown to its grace period.
	work     context.Context
	stopWork context.CancelFunc
	purgeMu  sync.Mutex
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
	if o.Addresses == nil {
		o.Addresses = o.Registry
	}
	s := &Service{
		opts: o, log: o.Log,
		instance: store.NewID(), wakeCh: make(chan struct{}, 1), ackWakeCh: make(chan struct{}, 1), enqCh: make(chan enqueueReq, maxGroup),
		live: newLive(),
	}
	s.work, s.stopWork = context.WithCancel(context.Background())
	s.dispatcher = &daemon.Worker{Name: "dispatcher", Run: s.dispatch}
	s.committer = &daemon.Worker{Name: "committer", Run: s.commit}
	s.ackExpirer = &daemon.Worker{Name: "ack expirer", Run: s.expireAcksLoop}
	s.leaseRescuer = &daemon.Worker{Name: "lease rescuer", Run: s.rescueLeases}
	s.watcher = &daemon.Worker{Name: "watcher", Run: s.watch}
	s.attacher = &daemon.Worker{Name: "attacher", Run: s.attachLoop}
	s.engineLink = newAttachment(o.Engine.Socket)
	s.engineProc = newEngineProcess(o)
	s.publisher = &daemon.Worker{Name: "publisher", Run: s.publishLoop}
	s.keeper = newKeeper()
	s.leaseKeeper = &daemon.Worker{Name: "lease keeper", Run: s.keepLeases}
	s.pub = newPublisher(o)
	if s.opts.Writer == nil {
		s.opts.Writer = RoutingWriter{svc: s, tmux: TmuxWriter{Pause: s.enterPause, Agent: s.paneAgent}}
	}
	d, err := daemon.Open(o.Paths, o.Log)
	if err != nil {
		return nil, err
	}
	s.d = d
	d.OnClose(s.stopWork)
	fail := func(err error) (*Service, error) {
		d.Close()
		return nil, err
	}
	st, err := store.Open(ctx, o.Paths, o.Config.BusyTimeout(), o.Now)
	if err != nil {
		return fail(err)
	}
	d.Database(st.DB)
	st.PolicyProfile, st.ConfigVersion = o.Config.ProfileRef(), o.Config.Version
	st.ReceiptAdded = s.pub.receiptAdded
	s.db, s.store = st.DB, st
	s.startedAt = o.Now()
	s.server = &unixrpc.Server{
		Handlers:    s.handlers(),
		Log:         s.log,
		StreamOps:   map[string]bool{api.OpBrokerSession: true},
		Refused:     s.refused,
		IdleTimeout: IdleTimeout,
		MaxConns:    MaxConns,
		MaxStreams:  MaxStreams,
	}
	if o.Orwell != nil {
		s.server.Trace = daemon.OrwellTracer(o.Orwell, o.Now)
	}
	if err := d.Listen(s.server); err != nil {
		return fail(err)
	}
	if err := s.store.AddReceipt(ctx, s.receipt(receipt.KindServiceStart, "started", "", map[string]any{
		"pid": os.Getpid(), "version": buildinfo.Get().Version, "proto": unixrpc.Version, "detached": o.Detached, "orwell": o.Orwell != nil,
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
func (s *Service) refused(peer unixrpc.Peer, err error) {
	s.log.Warn("connection refused", "peer_uid", peer.UID, "peer_pid", peer.PID, "reason", err.Error())
	r := s.receipt(receipt.KindAuthRefused, "refused", "peer uid differs from service uid",
		map[string]any{"peer_uid": peer.UID, "peer_pid": peer.PID})
	if werr := s.store.AddReceipt(context.Background(), r); werr != nil {
		s.log.Error("cannot record refused connection", "error", werr.Error())
	}
}

// Run serves until ctx ends (a signal) or a client asks the service to stop,
// then shuts down as the skeleton does (internal/daemon): no new connections
// or requests, deliveries and requests under way finish within the grace
// period, then tamq marks its endpoints disconnected and writes the shutdown
// receipt. Queues and leases stay in the database for the next start.
func (s *Service) Run(ctx context.Context) error {
	return s.d.Run(ctx, daemon.Plan{
		Grace:      s.opts.Config.ShutdownGrace(),
		DrainFirst: []*daemon.Worker{s.dispatcher},
		Workers:    []*daemon.Worker{s.committer, s.ackExpirer, s.leaseRescuer, s.watcher, s.attacher, s.publisher, s.leaseKeeper},
		Stopping: func() {
			s.shutdownBegan = s.opts.Now()
			s.stopWork() // a purge under way stops at its next step
			s.idle.Stop()
			s.stopping.Store(true) // no new deliveries are claimed
		},
		Stopped: s.stopped,
	})
}

// stopped writes what a shutdown leaves: the endpoints disconnected (their
// windows may outlive the service, but nothing delivers into them now) and
// the shutdown receipt.
func (s *Service) stopped(ctx context.Context, reason string, graceExceeded bool) error {
	s.detachAll()
	n, markErr := s.store.MarkEndpointsDisconnected(ctx)
	rcptErr := s.store.AddReceipt(ctx, s.receipt(receipt.KindServiceShutdown, "stopped", reason, map[string]any{
		"pid": os.Getpid(), "endpoints_disconnected": n, "grace_exceeded": graceExceeded,
		"duration_ms": s.opts.Now().Sub(s.shutdownBegan).Milliseconds(),
	}))
	return errors.Join(markErr, rcptErr)
}

func (s *Service) handlers() map[string]unixrpc.Handler {
	hs := s.d.Lifecycle(s.startedAt, s.opts.Config.ShutdownGrace())
	maps.Copy(hs, map[string]unixrpc.Handler{
		api.OpStatus:        s.status,
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
		api.OpWake:          s.wakeOp,
		api.OpCancelWake:    s.cancelWakeOp,
		api.OpWhois:         s.whois,
		// A broker's last look before it writes a delivery of wakes.
		api.OpDeliveryCurrent: s.deliveryCurrent,
	})
	release := s.opts.IdleRelease
	if release == 0 {
		release = DefaultIdleRelease
	}
	s.idle = time.AfterFunc(release, debug.FreeOSMemory)
	for op, h := range hs {
		hs[op] = func(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
			defer s.idle.Reset(release)
			return h(ctx, peer, req)
		}
	}
	return hs
}

func (s *Service) status(ctx context.Context, _ unixrpc.Peer, _ *unixrpc.Request) (any, error) {
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
			case ep.State != string(queue.Connected):
				win.WaitReason = "its tmux server is gone"
			default:
				win.WaitReason = s.live.waitReason(store.DeliveryKey(ep.ID, w.Repo))
			}
		}
	}
	started := s.startedAt.UTC()
	r.Service = api.ServiceStatus{
		Running: true, PID: os.Getpid(), StartedAt: &started, UptimeSeconds: now.Sub(s.startedAt).Seconds(),
		ServerVersion: buildinfo.Get().Version, Proto: unixrpc.Version,
		Socket: s.opts.Paths.Socket, LogFile: s.opts.Paths.LogFile, Orwell: s.opts.Orwell != nil,
		PolicyProfile: s.opts.Config.ProfileRef(), ConfigVersion: s.opts.Config.Version,
	}
	r.Coordination = s.engineLink.snapshot()
	r.StateHub.Publishing = s.publishStatus()
	status.Judge(&r)
	return r, nil
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
		state, reason := queue.Disconnected, "its tmux server is gone"
		askCtx, cancel := askTmux(ctx)
		pid, err := (tmux.Server{Socket: ep.TmuxSocket}).PID(askCtx)
		cancel()
		if err == nil && pid == ep.ServerPID {
			state, reason = queue.Connected, "its tmux server still runs"
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
	case <-s.committer.Done():
		return stopped
	}
	select {
	case err := <-req.done:
		return err
	case <-s.committer.Done():
		// The committer answers every request it took before it stops.
		select {
		case err := <-req.done:
			return err
		default:
			return stopped
		}
	}
}

// maxGroup is the most sends one commit takes; more wait for the next.
const maxGroup = 256

// maxGroupWait bounds how long a group waits for the senders of the last
// one to come back (see commit).
const maxGroupWait = time.Millisecond

// commit is the single writer of new messages, a group commit: every send
// waiting when a commit starts joins it, up to maxGroup, so concurrent
// senders share one transaction and one sync of the disk instead of paying
// one each. A lone send commits at once, sends arriving during a commit make
// the next group, and a group smaller than the last waits a little for the
// last one's senders (below), never for more. Each send gets its
// own answer once the commit is durable: its message stored, or its own
// error (a message the database refuses fails alone, store.EnqueueEach), or
// the group's when the transaction fails as a whole.
func (s *Service) commit(ctx context.Context) {
	var failing spell
	group := make([]enqueueReq, 0, maxGroup)
	msgs := make([]*queue.Message, 0, maxGroup)
	// How many sends the next group waits for, and how long the last commit
	// took (the machine's time: a matter of scheduling, not of the service's
	// clock).
	var expect int
	var lastCommit time.Duration
	for {
		group, msgs = group[:0], msgs[:0]
		select {
		case <-ctx.Done():
			return
		case req := <-s.enqCh:
			group = append(group, req)
		}
	more:
		for len(group) < maxGroup {
			select {
			case req := <-s.enqCh:
				group = append(group, req)
			default:
				break more
			}
		}
		// The senders the last commit answered are likely coming back with
		// their next message: without waiting for them, the first one back
		// commits alone while the others wait out that commit (eight busy
		// senders made groups of 1 and 7 by turns, two commits where one
		// does). So a group waits until it holds as many as expect (the last
		// group's senders and the sends that arrived during its commit),
		// but only for an eighth of the last commit's time (at most
		// maxGroupWait), a cost bounded by what it can save: senders that
		// were answered and send again at once join in microseconds. A lone
		// sender never waits: its last group was its own send alone.
		if len(group) < expect {
			wait := time.NewTimer(min(lastCommit/8, maxGroupWait))
		rest:
			for len(group) < expect {
				select {
				case req := <-s.enqCh:
					group = append(group, req)
				case <-wait.C:
					break rest
				case <-ctx.Done():
					break rest
				}
			}
			wait.Stop()
		}
		started := time.Now()
		for _, r := range group {
			msgs = append(msgs, r.m)
		}
		failed, err := s.store.EnqueueEach(ctx, msgs)
		lastCommit = time.Since(started)
		// Counted before the answers go out: what waits now arrived during
		// the commit, none of it from this group's senders. Expecting only
		// this group's size instead let eight senders settle into two groups
		// of four that alternate, each meeting its expectation.
		expect = min(len(s.enqCh)+len(group), maxGroup)
		switch {
		case err != nil && ctx.Err() == nil:
			failing.failed(s.log, "cannot queue messages; sends are refused until this clears", err)
		case err == nil:
			failing.ok(s.log, "queueing messages again")
		}
		for i, r := range group {
			if err != nil {
				r.done <- err
				continue
			}
			if failed[i] != nil {
				s.log.Error("cannot queue a message", "target", r.m.Target, "error", failed[i].Error())
			}
			r.done <- failed[i]
		}
	}
}

// knownEndpoints returns the recorded endpoints, read once and then kept
// until something changes them: every send needs them.
func (s *Service) knownEndpoints(ctx context.Context) ([]queue.Endpoint, error) {
	s.epMu.Lock()
	defer s.epMu.Unlock()
	if s.epCache == nil {
		eps, err := store.Endpoints(ctx, s.db.Reader, false)
		if err != nil {
			return nil, err
		}
		if eps == nil {
			eps = []queue.Endpoint{}
		}
		s.epCache = eps
	}
	return s.epCache, nil
}

// endpointsChanged drops the endpoint cache and hands the endpoints to
// coordination-engine again.
func (s *Service) endpointsChanged() {
	s.epMu.Lock()
	s.epCache = nil
	s.epMu.Unlock()
	if s.engineLink != nil {
		s.engineLink.requestAttach()
	}
}
