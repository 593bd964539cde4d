// Package service is coordination-engine's daemon: the shared skeleton
// (internal/daemon) running a few small services, each a type with its own
// state and goroutine (the observer, the judge, the lease clock, the waker,
// the receipt outbox, the retention, the notifier), and the handlers grouped by area
// (attach, leases, the manual wake, relay, status), each registering its
// operations. Service is the composition root: it builds them, each given
// the small interfaces, funcs and wake-up signals (internal/wakeup) it
// depends on and never another service's struct, and runs them in order;
// docs/layout.md says which owns what and which talks to which.
package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/notify"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/kinds"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// Tamq is what the engine needs of tamq's service: its typed client
// (internal/tamqclient) in production.
type Tamq interface {
	Wake(ctx context.Context, req tamqapi.WakeRequest) (tamqapi.WakeAck, error)
	CancelWake(ctx context.Context, args tamqapi.CancelWakeArgs) (tamqapi.CancelWakeResult, error)
	WakeHeld(ctx context.Context, args tamqapi.WakeHeldArgs) (tamqapi.WakeHeldResult, error)
	Ack(ctx context.Context, id string) (tamqapi.Message, error)
	Ping(ctx context.Context) (daemon.PingResult, error)
	// Whois says which of tamq's windows a process runs in; Listener
	// which process listens on tamq's socket. The engine knows its callers
	// by them.
	Whois(ctx context.Context, pid int32) (tamqapi.WhoisResult, error)
	Listener(ctx context.Context) (unixrpc.Peer, error)
}

// Options configure the engine's service.
type Options struct {
	Paths    paths.Paths
	Config   *config.Loaded
	Registry func() (*gita.Registry, error)
	Tamq     Tamq
	// TamqSocket is shown in status.
	TamqSocket string
	Log        *slog.Logger
	// Clock is every service's clock (nil: the system's); tests move it
	// on by hand.
	Clock clock.Clock
	// Orwell, when set, receives every protocol frame in full (--orwell).
	Orwell   io.Writer
	Detached bool
	// Cluster, when set ([cluster] in the config), is where the engines of
	// every host claim work before they offer a lease of it; HostID is this
	// host's name there.
	Cluster Claims
	HostID  string
	// Hub is State Hub, the driver of its kind; nil: the one the config
	// names (internal/statehub/kinds). Tests may hand in another
	// (internal/statehub/fakehub).
	Hub statehub.Hub
}

// Service is a running coordination-engine: its services, wired, and the
// skeleton that runs them.
type Service struct {
	opts      Options
	log       *slog.Logger
	d         *daemon.Service
	store     *store.Store
	server    *unixrpc.Server
	startedAt time.Time

	observer   *observer
	judge      *judge
	leaseClock *leaseClock
	waker      *waker
	outbox     *receiptOutbox
	retention  *retention
	wake       *wakeHandler
	status     *statusHandlers
	claimer    *claimer
	// notifier is nil unless [notify] names a command.
	notifier *notifier
	// instance is the database's id, the engine's id in the cluster.
	instance string
}

// Start brings the engine up to the point where it accepts connections:
// every check that can fail runs before the database is opened, and the
// socket is bound last.
func Start(ctx context.Context, o Options) (*Service, error) {
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Hub == nil {
		hub, err := kinds.Open(o.Config, o.Registry, o.Clock)
		if err != nil {
			return nil, err
		}
		o.Hub = hub
	}
	s := &Service{opts: o, log: o.Log}
	d, err := daemon.Open(o.Paths, o.Log)
	if err != nil {
		return nil, err
	}
	s.d = d
	fail := func(err error) (*Service, error) {
		d.Close()
		return nil, err
	}
	st, err := store.Open(ctx, o.Paths, o.Config.BusyTimeout(), o.Clock)
	if err != nil {
		return fail(err)
	}
	d.Database(st.DB)
	st.PolicyProfile, st.ConfigVersion = o.Config.ProfileRef(), o.Config.Version
	// Every transition writes a receipt: a view waiting for changes
	// (OpChanges) hears of each.
	st.ReceiptAdded = d.Changes().Bump
	s.store = st
	// Endpoints attached to an earlier run attach again when their tamq
	// sees this one; until then nothing is woken through them.
	if _, err := st.Endpoints.DetachAll(ctx, "coordination-engine restarted"); err != nil {
		return fail(err)
	}
	if s.instance, err = st.Observer.Instance(ctx); err != nil {
		return fail(err)
	}
	s.startedAt = o.Clock.Now()
	s.server = &unixrpc.Server{Handlers: s.build(), Log: s.log, IdleTimeout: 30 * time.Second, MaxConns: 256}
	if o.Orwell != nil {
		s.server.Trace = daemon.OrwellTracer(o.Orwell, o.Clock.Now)
	}
	if err := d.Listen(s.server); err != nil {
		return fail(err)
	}
	if err := st.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "service.start", Status: "started", Detail: map[string]any{
		"pid": os.Getpid(), "version": buildinfo.Get().Version, "proto": unixrpc.Version, "detached": o.Detached, "orwell": o.Orwell != nil,
	}}); err != nil {
		return fail(err)
	}
	s.log.Info("coordination-engine started", "pid", os.Getpid(), "socket", o.Paths.Socket, "database", o.Paths.Database,
		"policy_profile", o.Config.ProfileRef(), "config_version", o.Config.Version)
	return s, nil
}

// build makes the services and the handler groups, each given what it
// depends on (small interfaces, funcs, wake-up signals) and none another's
// insides, in the order they depend on one another, and returns the
// handlers, each guarded by who may call it.
func (s *Service) build() map[string]unixrpc.Handler {
	o, st, log, clk, cfg := s.opts, s.store, s.log, s.opts.Clock, s.opts.Config
	timing := Timing(cfg.Config)
	// The wake-up signals the services give one another: the observer
	// looks now, the lease clock reads the deadlines, the waker sends the
	// wakes pending, the notifier reads the standings.
	lookNow, deadlinesChanged, wakesPending, looked := wakeup.New(), wakeup.New(), wakeup.New(), wakeup.New()
	// What the observer saw, which the judge and the handlers read, and
	// the flag of tamq's windows changing, which the observer reads.
	view, routes := newHubView(), &routesFlag{}
	problems := &problemLog{store: st, log: log, seen: newSeenSet(maxInvalidSeen)}
	router := &router{store: st}
	prompter := &prompts{log: log, config: cfg, timing: timing, taskBodies: o.Hub.Offers().TaskBodies}
	wakes := tamqWakes{tamq: o.Tamq, log: log}

	s.outbox = newOutbox(st, log, clk, o.Hub, o.HostID)
	s.claimer = newClaimer(o.Cluster, st, log, clk, o.HostID, s.instance, ClaimTTL(timing),
		attemptEnds{wakes: wakes, deadlinesChanged: deadlinesChanged, lookAgain: lookNow})
	ends := attemptEnds{wakes: wakes, claims: s.claimer, deadlinesChanged: deadlinesChanged, lookAgain: lookNow}
	s.waker = &waker{store: st, log: log, clock: clk, config: cfg, registry: o.Registry, tamq: o.Tamq, prompts: prompter,
		routesChanged: routes.Changed, shared: s.claimer, wake: wakesPending}
	offers := &offerer{store: st, log: log, timing: timing, claims: s.claimer, wakes: s.waker,
		deadlinesChanged: deadlinesChanged, wakesPending: wakesPending}
	s.judge = &judge{store: st, log: log, clock: clk, config: cfg, registry: o.Registry, timing: timing, latest: view,
		router: router, prompts: prompter, problems: problems, offers: offers, ends: ends, deadlinesChanged: deadlinesChanged,
		claims: s.claimer}
	s.observer = startObserver(&observer{hub: o.Hub, store: st, log: log, clock: clk, config: cfg, view: view,
		judge: s.judge, problems: problems, receipts: s.outbox, wake: lookNow, changes: s.d.Changes(), routes: routes,
		looked: looked})
	s.leaseClock = &leaseClock{store: st, log: log, clock: clk, timing: timing, tamq: o.Tamq, ends: ends, retries: s.judge,
		wake: deadlinesChanged}
	s.retention = &retention{store: st, log: log, clock: clk, config: cfg, forget: s.judge.forget}

	s.wake = &wakeHandler{store: st, log: log, clock: clk, registry: o.Registry, timing: timing, router: router,
		view: view, offers: offers}
	leases := &leaseHandlers{store: st, log: log, timing: timing, ends: ends, deadlinesChanged: deadlinesChanged, claims: s.claimer,
		changes: s.d.Changes()}
	attach := &attachHandlers{store: st, log: log, registry: o.Registry, hub: o.Hub, routes: routes, lookNow: lookNow,
		wakesPending: wakesPending}
	relay := &relayHandlers{store: st, log: log, hub: o.Hub, view: view, lookNow: lookNow, receipts: s.outbox}
	status := &statusHandlers{opts: o, startedAt: s.startedAt, store: st, clock: clk, observer: s.observer, outbox: s.outbox, leaseOps: leases,
		claimer: s.claimer}
	s.status = status
	tamqProc := &daemon.ServiceProcess{}
	if o.Tamq != nil {
		tamqProc.Listener = o.Tamq.Listener
	}
	guard := &callers{store: st, log: log, clock: clk, tamq: o.Tamq, tamqSocket: o.TamqSocket, tamqProc: tamqProc,
		policy: door.Policy{TamqSocket: o.TamqSocket, EngineSocket: o.Paths.Socket}}
	if cfg.Notify.On() {
		s.notifier = &notifier{store: st, log: log, looked: looked,
			runner: notify.Runner{Command: cfg.Notify.Command, Timeout: cfg.Notify.Timeout(), Clock: clk},
			standings: func(ctx context.Context) ([]api.TaskStanding, bool, error) {
				view := s.observer.explainView()
				all, err := status.standings(ctx, view)
				return all, view.Observed, err
			}}
	}

	hs := s.d.Lifecycle(s.startedAt, cfg.ShutdownGrace())
	all := ops{daemon.OpShutdown: {door.OperatorOnly, hs[daemon.OpShutdown]}}
	for _, group := range []ops{attach.ops(), leases.ops(), s.wake.ops(), relay.ops(), status.ops(), s.retention.ops()} {
		maps.Copy(all, group)
	}
	for name, op := range all {
		hs[name] = guard.guard(op.access, name, op.handler)
	}
	return hs
}

// ops are a handler group's operations, each with who may call it.
type ops map[string]op

type op struct {
	access  door.Access
	handler unixrpc.Handler
}

// Timing is the lease timing of a configuration.
func Timing(c config.Config) lease.Timing {
	co := c.Coordination
	backoff := make([]time.Duration, len(co.RetryBackoffSeconds))
	for i, s := range co.RetryBackoffSeconds {
		backoff[i] = time.Duration(s) * time.Second
	}
	return lease.Timing{
		AckTimeout:     time.Duration(co.WakeAckTimeoutSeconds) * time.Second,
		RenewInterval:  time.Duration(co.LeaseRenewIntervalSeconds) * time.Second,
		MissedRenewals: co.LeaseMissedRenewals,
		Backoff:        backoff,
		MaxRetries:     co.MaxRetries,
	}
}

// Run serves until ctx ends (a signal) or a client asks the engine to stop,
// then shuts down as the skeleton does: no new requests or leases, requests
// under way answered within the grace period, the services stopped (the
// observer, its events and the waker first, while tamq's connections are
// open; then the lease clock, the outbox and the retention), every endpoint
// marked detached and the shutdown receipt written. Leases stay in the
// database; their deadlines are read back at the next start.
func (s *Service) Run(ctx context.Context) error {
	var began time.Time
	worker := func(name string, run func(context.Context)) *daemon.Worker {
		return &daemon.Worker{Name: name, Run: run}
	}
	return s.d.Run(ctx, daemon.Plan{
		Grace: s.opts.Config.ShutdownGrace(),
		DrainFirst: []*daemon.Worker{worker("State Hub observer", s.observer.Run), worker("State Hub events", s.observer.RunEvents),
			worker("waker", s.waker.Run)},
		Workers: []*daemon.Worker{worker("lease clock", s.leaseClock.Run), worker("cluster claims", s.claimer.Run),
			worker("receipt outbox", s.outbox.Run), worker("retention", s.retention.Run), worker("notifier", s.notifier.run)},
		Stopping: func() {
			began = s.opts.Clock.Now()
			s.wake.stopTakingLeases()
		},
		Stopped: func(ctx context.Context, reason string, graceExceeded bool) error {
			n, detachErr := s.store.Endpoints.DetachAll(ctx, "coordination-engine stopped")
			rcptErr := s.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "service.shutdown", Status: "stopped", Reason: reason, Detail: map[string]any{
				"pid": os.Getpid(), "endpoints_detached": n, "grace_exceeded": graceExceeded,
				"duration_ms": s.opts.Clock.Now().Sub(began).Milliseconds(),
			}})
			return errors.Join(detachErr, rcptErr)
		},
	})
}
