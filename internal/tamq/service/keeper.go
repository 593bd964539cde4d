package service

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// The keeper acknowledges and renews coordination leases on the agent's
// behalf. The spec asks the agent to acknowledge before work begins and to
// renew while it is active; a model cannot keep a ten-second rhythm, but the
// broker that runs the agent knows the facts: the wake was submitted and the
// agent turned busy (acknowledge), the agent lives and works or waits at a
// dialog (renew), it is back at its idle prompt or gone (stop renewing, so
// the lease expires and the next attempt carries the latest checkpoint).
// The engine knows the calls come from tamq by their credentials and
// records them as the broker's.
type keeper struct {
	log   *slog.Logger
	clock clock.Clock
	// engine is coordination-engine's client, reader the database (a
	// window's last wake), brokers the sessions whose reports say what an
	// agent does.
	engine  leaseCalls
	reader  *sql.DB
	brokers brokerViews

	mu sync.Mutex
	// byWindow are the wakes written into a window, by its delivery key:
	// the newest one per window is the lease its agent works on.
	byWindow map[string]*keptLease
	// look makes the keeper look at its leases now: a broker reported a
	// change, or a wake was written.
	look wakeup.Signal
}

// leaseCalls are the engine's calls the keeper makes for an agent
// (engineclient.Client's).
type leaseCalls interface {
	Ack(ctx context.Context, args engineapi.LeaseArgs) (engineapi.Lease, error)
	Renew(ctx context.Context, args engineapi.LeaseArgs) (engineapi.Lease, error)
}

// brokerViews has the latest report of a window's broker (brokerTable.view).
type brokerViews interface {
	view(key string) (st api.BrokerState, bc *brokerConn, seq uint64, live bool)
}

type keptLease struct {
	repo    string
	leaseID string
	attempt int
	// The broker session the prompt went through and how many reports it
	// had made when it answered: only a later report says what the agent
	// did with the prompt.
	via   *brokerConn
	after uint64
	// held: the broker held the Enter back; the prompt is taken only when
	// a person submits it and the agent turns busy (a dialog then is
	// the one that held it).
	held  bool
	acked bool
	// every is how often the lease is renewed: a third of the time the
	// engine gave it at the ack, so two renewals may be lost before it
	// expires.
	every     time.Duration
	nextRenew time.Time
	// failures counts calls the engine did not answer in a row.
	failures int
}

// written notes that a wake's prompt was submitted into the window of key
// through the broker session via, which had made after reports by then.
func (k *keeper) written(key, repo, leaseID string, attempt int, via *brokerConn, after uint64, held bool) {
	k.mu.Lock()
	k.byWindow[key] = &keptLease{repo: repo, leaseID: leaseID, attempt: attempt, via: via, after: after, held: held}
	k.mu.Unlock()
	k.look.Wake()
}

// keeperRetry is how soon a call the engine did not answer is made again;
// keeperIdle how often the keeper looks when nothing is due (a broker that
// reports no change still counts: an agent busy for an hour).
const (
	keeperRetry = 2 * time.Second
	keeperIdle  = time.Second
)

// run is the lease keeper worker: it looks when a broker reports, when a
// renewal is due, and at least every keeperIdle.
func (k *keeper) run(ctx context.Context) {
	for {
		wait := k.keepOnce(ctx, k.engine)
		select {
		case <-ctx.Done():
			return
		case <-k.look.C():
		case <-k.clock.After(wait):
		}
	}
}

// keepOnce acknowledges or renews each held lease whose window's broker
// says so now, and says how soon the next renewal is due.
func (k *keeper) keepOnce(ctx context.Context, c leaseCalls) (next time.Duration) {
	next = keeperIdle
	defer func() {
		now := k.clock.Now()
		k.mu.Lock()
		defer k.mu.Unlock()
		// A renewal due later is looked at when it falls due; one due
		// already waits for its agent to work (a broker report wakes the
		// keeper then, or the next idle look).
		for _, kl := range k.byWindow {
			if d := kl.nextRenew.Sub(now); (kl.acked || kl.failures > 0) && d > 0 {
				next = min(next, d)
			}
		}
	}()
	k.mu.Lock()
	keys := make([]string, 0, len(k.byWindow))
	for key := range k.byWindow {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.mu.Lock()
		kl := k.byWindow[key]
		var l keptLease
		if kl != nil {
			l = *kl
		}
		k.mu.Unlock()
		if kl == nil {
			continue
		}
		st, via, seq, live := k.brokers.view(key)
		now := k.clock.Now()
		switch {
		case !live || st.NoAgent:
			// The agent is gone: nothing to acknowledge or renew. The lease
			// runs out at the engine; a newer wake replaces this one.
			continue
		case !st.Reads:
			// The broker cannot read this agent (no screen rules, no status
			// reports): a question on its screen is no sign it took the
			// prompt. Its prompt told it to acknowledge and renew itself.
			continue
		case !l.acked && working(st) && (via != l.via || seq > l.after) && (!l.held || st.Screen == broker.StateBusy):
			k.keepCall(ctx, c, key, kl, func(cctx context.Context) (engineapi.Lease, error) {
				return c.Ack(cctx, engineapi.LeaseArgs{LeaseID: l.leaseID, Attempt: l.attempt})
			}, true)
		case l.acked && working(st) && !now.Before(l.nextRenew):
			args := engineapi.LeaseArgs{LeaseID: l.leaseID, Attempt: l.attempt}
			if st.Screen == broker.StateDialog {
				args.Dialog = l.repo + ": " + st.Reason
			}
			k.keepCall(ctx, c, key, kl, func(cctx context.Context) (engineapi.Lease, error) { return c.Renew(cctx, args) }, false)
		}
	}
	return next
}

// working says the agent took its prompt and is at it: a turn runs, or it
// waits at a dialog in the middle of one.
func working(st api.BrokerState) bool {
	return !st.NoAgent && (st.Screen == broker.StateBusy || st.Screen == broker.StateDialog)
}

// keepCall makes one ack or renewal and records its outcome on the lease
// (still kl: a newer wake may have replaced it meanwhile).
func (k *keeper) keepCall(ctx context.Context, c leaseCalls, key string, kl *keptLease, call func(context.Context) (engineapi.Lease, error), ack bool) {
	cctx, cancel := context.WithTimeout(ctx, engineAskTimeout)
	got, err := call(cctx)
	cancel()
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byWindow[key] != kl {
		return
	}
	switch {
	case err == nil:
		kl.failures = 0
		if ack {
			kl.acked = true
			k.log.Info("lease acknowledged for the agent", "lease", kl.leaseID, "attempt", kl.attempt, "repo", kl.repo)
		}
		// A repeated ack leaves the deadline as the first one set it:
		// renewed at once then, and every third of the hold after.
		kl.every = max(got.ExpiresAt.Sub(now)/3, 100*time.Millisecond)
		kl.nextRenew = now.Add(kl.every)
	case errs.Is(err, errs.LeaseExpired), errs.Is(err, errs.NotFound), errs.Is(err, errs.LeaseState):
		// The attempt is over (released, expired, superseded, stopped):
		// nothing more to keep.
		delete(k.byWindow, key)
		k.log.Info("lease no longer kept for the agent", "lease", kl.leaseID, "attempt", kl.attempt, "repo", kl.repo, "reason", err.Error())
	default:
		kl.failures++
		kl.nextRenew = now.Add(keeperRetry)
		if kl.failures == 1 {
			k.log.Warn("cannot reach coordination-engine to keep a lease; will try again", "lease", kl.leaseID, "error", err.Error())
		}
	}
}

// adoptWindow takes up, when a window's broker attaches and the keeper holds
// nothing for the window, the newest wake written there in the last day
// whose lease may still be live: after tamq restarts, the lease of an agent
// at work is renewed again instead of running out under it. The engine
// refuses the calls for a lease that ended, and the keeper drops it then.
func (k *keeper) adoptWindow(ctx context.Context, endpointID, repo string) {
	key := store.DeliveryKey(endpointID, repo)
	k.mu.Lock()
	_, kept := k.byWindow[key]
	k.mu.Unlock()
	if kept {
		return
	}
	ms, err := store.History(ctx, k.reader, store.Page{Filter: store.Filter{Repo: repo, Since: k.clock.Now().Add(-24 * time.Hour)}, Limit: 20})
	if err != nil {
		k.log.Warn("cannot look for the window's last wake", "repo", repo, "error", err.Error())
		return
	}
	for _, m := range ms { // newest first
		leaseID, attempt, ok := store.WakeKey(m.IdempotencyKey)
		if !ok || m.SenderKind != queue.FromCoordination || m.EndpointID != endpointID || m.Target != repo {
			continue
		}
		if m.State != queue.AwaitingAck && m.State != queue.Acknowledged && m.State != queue.Held {
			return // the newest wake was never taken (or was cancelled)
		}
		k.mu.Lock()
		if _, kept := k.byWindow[key]; !kept {
			// Acknowledged in tamq means the lease was acknowledged: renewed
			// from the first report that shows the agent at work.
			k.byWindow[key] = &keptLease{repo: repo, leaseID: leaseID, attempt: attempt, held: m.State == queue.Held,
				acked: m.State == queue.Acknowledged, every: keeperRetry}
		}
		k.mu.Unlock()
		k.look.Wake()
		return
	}
}
