package service

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// leaseCallLog is the engine behind the keeper: it grants every call a
// lease held for 30 seconds on the keeper's clock (or answers refuse, when
// set), and keeps the calls.
type leaseCallLog struct {
	clock  clock.Clock
	refuse error
	mu     sync.Mutex
	calls  []string
}

func (l *leaseCallLog) call(what string, args engineapi.LeaseArgs) (engineapi.Lease, error) {
	if args.Dialog != "" {
		what += " (" + args.Dialog + ")"
	}
	l.mu.Lock()
	l.calls = append(l.calls, what)
	l.mu.Unlock()
	if l.refuse != nil {
		return engineapi.Lease{}, l.refuse
	}
	return engineapi.Lease{ExpiresAt: l.clock.Now().Add(30 * time.Second)}, nil
}

func (l *leaseCallLog) Ack(_ context.Context, args engineapi.LeaseArgs) (engineapi.Lease, error) {
	return l.call("ack", args)
}

func (l *leaseCallLog) Renew(_ context.Context, args engineapi.LeaseArgs) (engineapi.Lease, error) {
	return l.call("renew", args)
}

func (l *leaseCallLog) made() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// oneBroker is the broker table of one window: the latest report of its
// broker session, how many reports it has made, and whether it is live.
type oneBroker struct {
	mu      sync.Mutex
	session *brokerConn
	state   api.BrokerState
	reports uint64
	live    bool
}

func (b *oneBroker) view(string) (api.BrokerState, *brokerConn, uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.session, b.reports, b.live
}

// report is the broker reporting its agent's state anew.
func (b *oneBroker) report(st api.BrokerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state = st
	b.reports++
}

// newKeeper is a lease keeper built alone, over a fake engine and a fake
// broker table, on a fake clock.
func newKeeper(fake *clock.Fake, brokers *oneBroker) (*keeper, *leaseCallLog) {
	engine := &leaseCallLog{clock: fake}
	return &keeper{log: slog.New(slog.DiscardHandler), clock: fake, engine: engine, brokers: brokers,
		byWindow: map[string]*keptLease{}, look: wakeup.New()}, engine
}

// The lease keeper acknowledges a wake's lease once the broker that took
// its prompt reports the agent at work (busy, or at a dialog midway), and
// renews an acknowledged one while the agent works or waits at a dialog
// (naming it); it leaves alone an agent back at its prompt or gone, a
// broker gone, and an agent its broker cannot read. A lease the engine
// says has ended (expired, unknown, in another state) is kept no more; one
// the engine did not answer for is asked for again keeperRetry later.
func TestKeeperAcksAndRenewsFromWhatTheBrokerSees(t *testing.T) {
	t.Parallel()
	busy := api.BrokerState{Reads: true, Screen: broker.StateBusy}
	dialog := api.BrokerState{Reads: true, Screen: broker.StateDialog, Reason: "a permission question"}
	ended := func(code errs.Code) error { return &errs.Error{Code: code, Message: "lease " + string(code)} }
	for _, c := range []struct {
		name  string
		acked bool // the lease was acknowledged already
		held  bool // the broker held the prompt's Enter back
		state api.BrokerState
		// noReport: the broker has said nothing since it took the prompt.
		noReport, brokerGone bool
		// refuse is the engine's answer to every call; with it set the
		// broker reports the agent at work again, keeperRetry later,
		// and the keeper looks once more.
		refuse error
		want   []string
		// kept: the keeper still holds the lease after.
		kept bool
	}{
		{name: "submitted and busy: acknowledged", state: busy, want: []string{"ack"}},
		{name: "submitted, at a dialog midway: acknowledged", state: dialog, want: []string{"ack"}},
		{name: "busy before any report since the prompt: not yet", state: busy, noReport: true},
		{name: "Enter held, at a dialog: not taken yet", held: true, state: dialog},
		{name: "Enter held, then busy: a person submitted it", held: true, state: busy, want: []string{"ack"}},
		{name: "acknowledged and busy: renewed", acked: true, state: busy, want: []string{"renew"}},
		{name: "acknowledged, at a dialog: renewed naming it", acked: true, state: dialog,
			want: []string{"renew (r: a permission question)"}},
		{name: "acknowledged, idle at its prompt: left to run out", acked: true,
			state: api.BrokerState{Reads: true, Screen: broker.StatePrompt, AtPrompt: true}},
		{name: "the agent gone: left to run out", acked: true, state: api.BrokerState{Reads: true, NoAgent: true}},
		{name: "the broker gone: left to run out", acked: true, state: busy, brokerGone: true},
		{name: "an agent its broker cannot read: left to the agent", state: api.BrokerState{Screen: broker.StateBusy}},
		{name: "the lease expired at the engine: renewed no more", acked: true, state: busy,
			refuse: ended(errs.LeaseExpired), want: []string{"renew"}},
		{name: "the lease unknown to the engine: renewed no more", acked: true, state: busy,
			refuse: ended(errs.NotFound), want: []string{"renew"}},
		{name: "the lease ended before its ack: acknowledged no more", state: busy,
			refuse: ended(errs.LeaseState), want: []string{"ack"}},
		{name: "the engine not answering: renewed again later", acked: true, state: busy,
			refuse: ended(errs.Unavailable), want: []string{"renew", "renew"}, kept: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(time.Now())
			brokers := &oneBroker{session: &brokerConn{}, live: !c.brokerGone, reports: 3}
			k, engine := newKeeper(fake, brokers)
			key := store.DeliveryKey(testEndpoint, testRepo)
			k.written(key, testRepo, "lease", 1, brokers.session, 3, c.held)
			k.byWindow[key].acked = c.acked // renewal due at once
			if c.noReport {
				brokers.state = c.state
			} else {
				brokers.report(c.state)
			}
			engine.refuse = c.refuse
			k.keepOnce(context.Background(), engine)
			if c.refuse != nil {
				brokers.report(c.state)
				fake.Advance(keeperRetry)
				k.keepOnce(context.Background(), engine)
			}
			if got := engine.made(); !slices.Equal(got, c.want) {
				t.Errorf("engine calls %q, want %q", got, c.want)
			}
			if _, kept := k.byWindow[key]; kept != (c.kept || c.refuse == nil) {
				t.Errorf("the lease kept: %v", kept)
			}
		})
	}
}

// The keeper renews on its clock: every third of the time the engine gave
// the lease (10 of 30 seconds), for as long as the agent works, and stops
// once the agent is back at its prompt.
func TestKeeperRenewsEveryThirdOfTheLease(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	brokers := &oneBroker{session: &brokerConn{}, live: true}
	k, engine := newKeeper(fake, brokers)
	k.written(store.DeliveryKey(testEndpoint, testRepo), testRepo, "lease", 1, brokers.session, 0, false)
	brokers.report(api.BrokerState{Reads: true, Screen: broker.StateBusy})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.run(ctx) }()
	defer func() { cancel(); <-done }()

	// Two looks at once (the start, and the wake written left): each waits
	// keeperIdle on the clock, the first having acknowledged.
	if !fake.BlockUntil(2, done) {
		t.Fatal("the keeper ended")
	}
	want := []string{"ack"}
	for second := 1; second <= 25; second++ {
		if second == 21 {
			brokers.report(api.BrokerState{Reads: true, Screen: broker.StatePrompt, AtPrompt: true})
		}
		fake.Advance(time.Second) // fires every wait pending: one look follows
		if !fake.BlockUntil(1, done) {
			t.Fatal("the keeper ended")
		}
		if second == 10 || second == 20 {
			want = append(want, "renew")
		}
		if got := engine.made(); !slices.Equal(got, want) {
			t.Fatalf("after %ds: engine calls %q, want %q", second, got, want)
		}
	}
}
