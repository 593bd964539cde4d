// Package service is tamq's daemon: it owns the database, listens on the
// Unix socket, answers the protocol's operations and shuts down cleanly.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Now is the service's clock: UTC, to the millisecond, so every time it
// reports is what the database keeps (Unix milliseconds) and every JSON time
// is RFC 3339 in UTC with at most millisecond precision.
func Now() time.Time { return clock.System.Now() }

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
	// Clock is what every part of the service tells the time and waits by;
	// nil is the system's.
	Clock clock.Clock
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
// running tamq's handlers and its services. It is the composition root: it
// builds the services, hands each what it calls (build), registers the
// handlers and runs the plan that starts and stops them in order. Each
// service keeps its own state; docs/layout.md draws how a message flows
// through them.
type Service struct {
	opts      Options
	clock     clock.Clock
	log       *slog.Logger
	d         *daemon.Service
	db        *sqlitedb.DB
	store     *store.Store
	server    *unixrpc.Server
	startedAt time.Time
	idle      *time.Timer
	// shutdownBegan is when the shutdown began, for its receipt.
	shutdownBegan time.Time
	// work ends when shutdown begins: long requests (a purge) stop at their
	// next step instead of holding the shutdown to its grace period.
	work     context.Context
	stopWork context.CancelFunc

	// The services.
	endpoints  *endpointBook
	live       *live
	writer     *queueWriter
	dispatcher *dispatcher
	delivery   *deliverer
	acks       *ackExpirer
	rescuer    *leaseRescuer
	watcher    *watcher
	callers    *callers
	brokers    *brokerTable
	keeper     *keeper
	engineLink *attachment
	publisher  *receiptPublisher

	// The handlers, by area.
	messages    *messageHandlers
	endpointOps *endpointHandlers
	wakes       *wakeHandlers
	purges      *purgeHandler
	sessions    *brokerSessions

	// The background work. At shutdown the dispatcher stops first (its
	// deliveries finish while their brokers' sessions are open), then, once
	// the requests under way are answered, the others: the committer those
	// requests may need last.
	dispatcherWorker *daemon.Worker
	workers          []*daemon.Worker
}

// Start brings the service up to the point where it accepts connections. The
// order matters: every check that can fail runs before the database is
// opened, so a failed start leaves existing data untouched; the socket is
// bound last, so nobody reaches a half-started service.
func Start(ctx context.Context, o Options) (*Service, error) {
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Addresses == nil {
		o.Addresses = o.Registry
	}
	s := &Service{opts: o, clock: o.Clock, log: o.Log}
	s.work, s.stopWork = context.WithCancel(context.Background())
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
	st, err := store.Open(ctx, o.Paths, o.Config.BusyTimeout(), o.Clock.Now)
	if err != nil {
		return fail(err)
	}
	d.Database(st.DB)
	st.Receipts.PolicyProfile, st.Receipts.ConfigVersion = o.Config.ProfileRef(), o.Config.Version
	s.db, s.store = st.DB, st
	s.build()
	// Every transition writes a receipt: the publisher sends it, and a view
	// waiting for changes (OpChanges) hears of it.
	changes := d.Changes()
	st.Receipts.Added = func() { s.publisher.Kick(); changes.Bump() }
	s.startedAt = o.Clock.Now()
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
		s.server.Trace = daemon.OrwellTracer(o.Orwell, o.Clock.Now)
	}
	if err := d.Listen(s.server); err != nil {
		return fail(err)
	}
	if err := s.store.Receipts.AddReceipt(ctx, newReceipt(o.Config, receipt.KindServiceStart, "started", "", map[string]any{
		"pid": os.Getpid(), "version": buildinfo.Get().Version, "proto": unixrpc.Version, "detached": o.Detached, "orwell": o.Orwell != nil,
	})); err != nil {
		return fail(err)
	}
	s.advise(ctx)
	// A tmux server killed with its windows leaves every broker's hook
	// socket behind, and only a new broker swept them.
	broker.SweepHooks(o.Paths.StateDir)
	s.endpointOps.reconnectEndpoints(ctx)
	if o.Restore {
		if _, err := s.endpointOps.restore(ctx, o.Recreate); err != nil {
			// The service runs without the windows that could not come back;
			// the log says which, and `tamq start` can be run again.
			s.log.Error("the workspace was not fully restored", "error", err.Error())
		}
	}
	s.log.Info("tamq service started", "pid", os.Getpid(), "socket", o.Paths.Socket, "database", o.Paths.Database,
		"policy_profile", o.Config.ProfileRef(), "config_version", o.Config.Version)
	return s, nil
}

// newReceipt is a receipt of the service under the configuration in force.
func newReceipt(c *config.Loaded, kind, status, reason string, detail map[string]any) receipt.Receipt {
	return receipt.Receipt{
		Kind: kind, Status: status, Reason: reason, Detail: detail,
		PolicyProfile: c.ProfileRef(), ConfigVersion: c.Version,
	}
}

func (s *Service) refused(peer unixrpc.Peer, err error) {
	s.log.Warn("connection refused", "peer_uid", peer.UID, "peer_pid", peer.PID, "reason", err.Error())
	r := newReceipt(s.opts.Config, receipt.KindAuthRefused, "refused", "peer uid differs from service uid",
		map[string]any{"peer_uid": peer.UID, "peer_pid": peer.PID})
	if werr := s.store.Receipts.AddReceipt(context.Background(), r); werr != nil {
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
		DrainFirst: []*daemon.Worker{s.dispatcherWorker},
		Workers:    s.workers,
		Stopping: func() {
			s.shutdownBegan = s.clock.Now()
			s.stopWork() // a purge under way stops at its next step
			s.idle.Stop()
			s.dispatcher.stop() // no new deliveries are claimed
		},
		Stopped: s.stopped,
	})
}

// stopped writes what a shutdown leaves: the endpoints disconnected (their
// windows may outlive the service, but nothing delivers into them now) and
// the shutdown receipt.
func (s *Service) stopped(ctx context.Context, reason string, graceExceeded bool) error {
	s.engineLink.detachAll()
	s.watcher.recordEnds(ctx)
	n, markErr := s.store.Endpoints.MarkEndpointsDisconnected(ctx)
	rcptErr := s.store.Receipts.AddReceipt(ctx, newReceipt(s.opts.Config, receipt.KindServiceShutdown, "stopped", reason, map[string]any{
		"pid": os.Getpid(), "endpoints_disconnected": n, "grace_exceeded": graceExceeded,
		"duration_ms": s.clock.Now().Sub(s.shutdownBegan).Milliseconds(),
	}))
	return errors.Join(markErr, rcptErr)
}

func (s *Service) handlers() map[string]unixrpc.Handler {
	hs := s.d.Lifecycle(s.startedAt, s.opts.Config.ShutdownGrace())
	// Who may call what (docs/security.md lists both daemons' refusals in
	// one table): a window's agent may send, ack its own messages, replay
	// its own lines and read what changes nothing; what reaches other
	// repos' messages or the service itself is the operator's; a wake is
	// the engine's.
	all := map[string]struct {
		access  door.Access
		handler unixrpc.Handler
	}{
		daemon.OpHello:    {door.Anyone, hs[daemon.OpHello]},
		daemon.OpPing:     {door.Anyone, hs[daemon.OpPing]},
		daemon.OpChanges:  {door.Anyone, hs[daemon.OpChanges]},
		daemon.OpShutdown: {door.OperatorOnly, hs[daemon.OpShutdown]},
		api.OpStatus:      {door.Anyone, s.status},
		api.OpEndpoints:   {door.Anyone, s.endpointOps.listEndpoints},
		api.OpWhois:       {door.Anyone, s.callers.whois},
		// From a window, a registration could make a repo ambiguous (two
		// endpoints) and so stop every wake and send to it.
		api.OpRegister: {door.OperatorOnly, s.endpointOps.register},
		api.OpForget:   {door.OperatorOnly, s.endpointOps.forget},
		api.OpRestore:  {door.OperatorOnly, s.endpointOps.restoreOp},
		api.OpPurge:    {door.OperatorOnly, s.purges.purge},
		api.OpSend:     {door.Window, s.messages.send},
		api.OpAck:      {door.Window, s.messages.ack},
		api.OpRetry:    {door.Window, s.messages.retry},
		api.OpReplay:   {door.Window, s.messages.replay},
		// Dropping a message is the person's call, never an agent's (it
		// would silence what another repo asked of it).
		api.OpCancel: {door.OperatorOnly, s.messages.cancel},
		// A broker is its pane's own process (checked by the handler).
		api.OpBrokerSession: {door.Window, s.sessions.brokerSession},
		// A broker's last look before it writes a delivery of wakes.
		api.OpDeliveryCurrent: {door.Window, s.delivery.deliveryCurrent},
		api.OpWake:            {door.EngineOnly, s.wakes.wakeOp},
		api.OpCancelWake:      {door.EngineOnly, s.wakes.cancelWakeOp},
		api.OpWakeHeld:        {door.EngineOnly, s.wakes.wakeHeldOp},
	}
	for op, h := range all {
		hs[op] = s.callers.guard(h.access, op, h.handler)
	}
	release := s.opts.IdleRelease
	if release == 0 {
		release = DefaultIdleRelease
	}
	// On the wall clock, not the service's: it is about the process's
	// memory, and it is reset by every request, which clock.Clock's one-shot
	// waits cannot do.
	s.idle = time.AfterFunc(release, debug.FreeOSMemory)
	for op, h := range hs {
		hs[op] = func(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
			defer s.idle.Reset(release)
			return h(ctx, peer, req)
		}
	}
	return hs
}

func (s *Service) status(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	if err := unixrpc.NoArgs(req); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	r := status.Collect(ctx, status.Sources{
		Paths: s.opts.Paths, Config: s.opts.Config, Registry: s.opts.Registry,
		Migrations: store.Migrations, DB: s.db.Reader, Now: now,
	})
	for i, ep := range r.Endpoints {
		for j, w := range ep.Windows {
			win := &r.Endpoints[i].Windows[j]
			win.Broker = s.brokers.isLive(ep.ID, w.Repo, w.PaneID)
			switch {
			case ep.State != string(queue.Connected):
				win.WaitReason = "its tmux server is gone"
			default:
				win.WaitReason = s.live.waitReason(store.DeliveryKey(ep.ID, w.Repo))
			}
		}
	}
	r.Service = daemon.RunningStatus(s.opts.Paths, s.startedAt, now, s.opts.Config.ProfileRef(), s.opts.Config.Version, s.opts.Orwell != nil)
	r.Coordination = s.engineLink.snapshot()
	r.StateHub.Publishing = s.publisher.status()
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
