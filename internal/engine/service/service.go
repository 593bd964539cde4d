// Package service is coordination-engine's daemon: the shared skeleton
// (internal/daemon) with the engine's handlers (attach, the manual wake, the
// agents' lease commands, listings, status) and its workers (the lease clock,
// which expires and re-offers leases on time, and the waker, which sends each
// offered lease's wake to tamq until tamq has answered it).
package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Tamq is what the engine needs of tamq's service: its typed client
// (internal/tamqclient) in production.
type Tamq interface {
	Wake(ctx context.Context, req tamqapi.WakeRequest) (tamqapi.WakeAck, error)
	CancelWake(ctx context.Context, args tamqapi.CancelWakeArgs) (tamqapi.CancelWakeResult, error)
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
}

// Service is a running coordination-engine.
type Service struct {
	opts      Options
	log       *slog.Logger
	d         *daemon.Service
	store     *store.Store
	server    *unixrpc.Server
	startedAt time.Time
	timing    lease.Timing

	clock, waker *daemon.Worker
	clockKick    chan struct{}
	wakerKick    chan struct{}
	stopping     atomic.Bool

	// State Hub: its client and what the observer knows of it; the
	// observer's worker, its kick (events, endpoint changes), and what it
	// remembers between looks.
	hub                      hubState
	observer, events, outbox *daemon.Worker
	retention                *daemon.Worker
	observeKick, outboxKick  chan struct{}
	routesChanged            atomic.Bool
	// rejudge: a look that saw State Hub's workplans change failed before
	// it had acted on them (the disk full); the client reports a change
	// once, so the next look judges the tasks again.
	rejudge atomic.Bool
	// settledKeys are trigger keys past waiting (leased, stopped, done):
	// seen again, they cost a map lookup, not a write transaction. Each
	// names a trigger in the store, and goes when the retention (or the
	// operator's purge) deletes that trigger (purgeHistory).
	settledKeys sync.Map
	// invalidSeen are the skipped objects already reported, the newest
	// maxInvalidSeen of them.
	invalidSeen *seenSet
	// tamqProc recognises tamq's service among callers: a lease it
	// acknowledges or renews was so by its broker, on the agent's behalf;
	// only it attaches, detaches and publishes.
	tamqProc *daemon.ServiceProcess
	// callers remembers for a moment which window a caller runs in.
	callers callerCache
	// dialogs are the live leases whose agent waits at a dialog, as tamq's
	// broker last said at a renewal: the window and what shows there.
	dialogs sync.Map
	// freeMemory hands freed memory back to the system a little after a look
	// that decoded State Hub's workplans (see observeOnce).
	freeMemory *time.Timer
}

// releaseAfter is how long after a look that got the workplans the engine
// returns the memory that look freed. Decoding 10,000 tasks takes some
// 20 MB that the runtime would otherwise keep: after a burst of changes in
// State Hub an idle engine stayed at 39 MB; it now falls back to about 25
// (docs/performance.md, "Scale").
const releaseAfter = 2 * time.Second

// hubState is the State Hub client and the observer's view of it.
type hubState struct {
	client *statehub.Client
	view   hubView
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
	s := &Service{
		opts: o, log: o.Log, timing: Timing(o.Config.Config),
		clockKick: make(chan struct{}, 1), wakerKick: make(chan struct{}, 1),
		freeMemory:  time.AfterFunc(time.Hour, debug.FreeOSMemory),
		invalidSeen: newSeenSet(maxInvalidSeen),
	}
	s.freeMemory.Stop() // armed by the looks that decode the workplans
	s.tamqProc = &daemon.ServiceProcess{}
	if o.Tamq != nil {
		s.tamqProc.Listener = o.Tamq.Listener
	}
	s.clock = &daemon.Worker{Name: "lease clock", Run: s.runClock}
	s.waker = &daemon.Worker{Name: "waker", Run: s.runWaker}
	s.observer = &daemon.Worker{Name: "State Hub observer", Run: s.runObserver}
	s.events = &daemon.Worker{Name: "State Hub events", Run: s.runEvents}
	s.outbox = &daemon.Worker{Name: "receipt outbox", Run: s.runOutbox}
	s.retention = &daemon.Worker{Name: "retention", Run: s.runRetention}
	s.observeKick, s.outboxKick = make(chan struct{}, 1), make(chan struct{}, 1)
	s.hub.client = &statehub.Client{Base: o.Config.StateHub.APIBase, Credential: o.Config.StateHub.CredentialCommand}
	s.hub.view.EventsOffered = true
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
	s.store = st
	// Endpoints attached to an earlier run attach again when their tamq
	// sees this one; until then nothing is woken through them.
	if _, err := st.Endpoints.DetachAll(ctx, "coordination-engine restarted"); err != nil {
		return fail(err)
	}
	s.startedAt = o.Clock.Now()
	s.server = &unixrpc.Server{Handlers: s.handlers(), Log: s.log, IdleTimeout: 30 * time.Second, MaxConns: 256}
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
		MaxAttempts:    co.MaxAttempts,
	}
}

// Run serves until ctx ends (a signal) or a client asks the engine to stop,
// then shuts down as the skeleton does: no new requests or leases, requests
// under way answered within the grace period, the workers stopped, every
// endpoint marked detached and the shutdown receipt written. Leases stay in
// the database; their deadlines are read back at the next start.
func (s *Service) Run(ctx context.Context) error {
	var began time.Time
	return s.d.Run(ctx, daemon.Plan{
		Grace:      s.opts.Config.ShutdownGrace(),
		DrainFirst: []*daemon.Worker{s.observer, s.events, s.waker},
		Workers:    []*daemon.Worker{s.clock, s.outbox, s.retention},
		Stopping: func() {
			began = s.opts.Clock.Now()
			s.stopping.Store(true)
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

func (s *Service) handlers() map[string]unixrpc.Handler {
	hs := s.d.Lifecycle(s.startedAt, s.opts.Config.ShutdownGrace())
	stop := hs[daemon.OpShutdown]
	for op, g := range map[string]struct {
		a access
		h unixrpc.Handler
	}{
		api.OpStatus: {anyone, s.status},
		// tamq asks before it writes a wake.
		api.OpLeaseCurrent: {anyone, s.leaseCurrent},
		api.OpAttach:       {tamqOnly, s.attach},
		api.OpDetach:       {tamqOnly, s.detach},
		api.OpPublish:      {tamqOnly, s.publish},
		api.OpWake:         {operator, s.wake},
		api.OpLeases:       {operator, s.leases},
		api.OpReceipts:     {operator, s.receipts},
		api.OpExplain:      {operator, s.explain},
		api.OpPurge:        {operator, s.purge},
		daemon.OpShutdown:  {operator, stop},
		api.OpLeaseAck:     {worker, s.ack},
		api.OpLeaseRenew:   {worker, s.renew},
		api.OpRelease:      {worker, s.release},
		api.OpCheckpoint:   {worker, s.checkpoint},
		// What an agent asks of State Hub through the engine (relay.go).
		api.OpMessageShow: {worker, s.messageShow},
		api.OpMessageRead: {worker, s.messageRead},
		api.OpTaskSet:     {worker, s.taskSet},
	} {
		hs[op] = s.guard(g.a, op, g.h)
	}
	return hs
}

// kick wakes a worker now; a kick already pending is enough.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
