package service

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// brokerReturnWait bounds how long, at start, a window's interrupted
// delivery waits for its broker to attach: the longest a broker may still
// be writing it (the service's own bound on a delivery) and the longest the
// broker waits between tries to reach the service.
const brokerReturnWait = DeliveryLease/2 + 5*time.Second

// leaseRescuer settles, at start, the deliveries an earlier run of the
// service claimed and never finished (it was killed mid-delivery). The
// window's broker outlives the service and tells, when its session opens,
// its last delivery and its answer (api.LastDelivery): a claim it answered
// is recorded as the answer says (written, held, failed), with the receipt
// the killed service would have written; a claim it never wrote goes back
// to the queue, same id, and is delivered again. So a kill doubles nothing
// written through a broker. A window gets no other delivery until its claim
// is settled, so its order holds. It waits for its broker at most
// brokerReturnWait; a window whose pane is gone, or runs no broker, gets its
// claim back in the queue at once (a write through tmux is not known).
type leaseRescuer struct {
	log        *slog.Logger
	clock      clock.Clock
	deliveries *store.Deliveries
	// record records a settled claim as the deliverer records a delivery.
	record    func(ctx context.Context, ms []queue.Message, wr Written, extra map[string]any)
	brokers   brokerLookup
	endpoints windowFinder
	// dispatch wakes the dispatcher once a window is free.
	dispatch wakeup.Signal
	// instance names this run's claims, which are not rescued.
	instance string
	// brokerAttached is woken when a broker session opens: it may carry the
	// answer to an interrupted delivery.
	brokerAttached wakeup.Signal

	mu sync.Mutex
	// read is set once the earlier claims are known; held names the
	// windows whose claim is not settled yet.
	read bool
	held map[string]bool
}

// holds says whether the window of key must wait for an earlier claim to
// be settled (every window does until the earlier claims are read).
func (r *leaseRescuer) holds(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.read || r.held[key]
}

func (r *leaseRescuer) run(ctx context.Context) {
	var claims []store.Interruption
	for {
		var err error
		if claims, err = r.deliveries.Interrupted(ctx, r.instance); err == nil {
			break
		}
		r.log.Error("cannot read interrupted deliveries; will try again", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(time.Second):
		}
	}
	windows := map[string][]store.Interruption{}
	for _, c := range claims {
		key := store.DeliveryKey(c.Message.EndpointID, c.Message.Target)
		windows[key] = append(windows[key], c)
	}
	r.mu.Lock()
	r.read, r.held = true, map[string]bool{}
	for key := range windows {
		r.held[key] = true
	}
	r.mu.Unlock()
	r.dispatch.Wake() // the other windows may take deliveries now
	if len(windows) == 0 {
		return
	}
	r.log.Info("interrupted deliveries wait for their brokers' word", "messages", len(claims), "windows", len(windows))
	gone := r.brokerless(ctx, windows)
	var timeUp <-chan time.Time // from the end of the first pass
	waited := false
	for {
		failed := false
		for key, cs := range windows {
			bc := r.brokers.get(key)
			if bc == nil && !waited && !gone[key] {
				continue
			}
			if err := r.settle(ctx, cs, bc); err != nil {
				failed = true
				continue
			}
			delete(windows, key)
			r.mu.Lock()
			delete(r.held, key)
			r.mu.Unlock()
			r.dispatch.Wake()
		}
		if len(windows) == 0 {
			return
		}
		if timeUp == nil && !waited {
			timeUp = r.clock.After(brokerReturnWait)
		}
		var again <-chan time.Time
		if failed {
			again = r.clock.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.brokerAttached.C():
		case <-timeUp:
			waited = true
		case <-again:
		}
	}
}

// brokerless names the windows of claims that no broker will answer for:
// no longer recorded, whose pane is gone, dead or runs no broker, or on a
// tmux server that does not answer (a broker's session is verified with
// that server: none would be taken).
func (r *leaseRescuer) brokerless(ctx context.Context, windows map[string][]store.Interruption) map[string]bool {
	gone := map[string]bool{}
	panes := map[string][]tmux.Window{} // by tmux socket
	for key, cs := range windows {
		m := cs[0].Message
		ep, w, err := r.endpoints.windowOf(ctx, m.EndpointID, m.Target)
		if err != nil || ep.State != queue.Connected {
			gone[key] = true
			continue
		}
		wins, ok := panes[ep.TmuxSocket]
		if !ok {
			askCtx, cancel := askTmux(ctx)
			_, listed, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
			cancel()
			if err != nil {
				listed = nil
			}
			wins, panes[ep.TmuxSocket] = listed, listed
		}
		if i := slices.IndexFunc(wins, func(tw tmux.Window) bool { return tw.PaneID == w.PaneID }); i < 0 || wins[i].Dead || !isBroker(wins[i].PanePID) {
			gone[key] = true
		}
	}
	return gone
}

// settle records the interrupted claims cs of one window by the answer its
// broker (bc; nil: none came) kept: the claims it wrote as it said, the
// others back in the queue.
func (r *leaseRescuer) settle(ctx context.Context, cs []store.Interruption, bc *brokerConn) error {
	var report *api.LastDelivery
	if bc != nil {
		report = bc.lastDelivery
	}
	var answered []queue.Message
	var back []string
	for _, c := range cs {
		if answers(report, c) {
			answered = append(answered, c.Message)
		} else {
			back = append(back, c.Message.ID)
		}
	}
	if len(back) > 0 {
		// All in one transaction: the messages of an interrupted batch come
		// back together and go in together again.
		now := r.clock.Now()
		failed, err := r.deliveries.TransitionEach(ctx, back, "delivery interrupted; redelivering", nil, func(m *queue.Message) error {
			return m.LeaseExpired(now)
		})
		if err != nil {
			r.log.Error("cannot return interrupted deliveries to the queue; will try again", "messages", len(back), "error", err.Error())
			return err
		}
		for i, ferr := range failed {
			if ferr != nil && !errs.Is(ferr, errs.Conflict) {
				r.log.Warn("cannot return an interrupted delivery to the queue", "message", back[i], "error", ferr.Error())
			}
		}
		why := "no broker answered for it"
		switch {
		case report == nil && bc != nil:
			why = "its broker reported no delivery"
		case report != nil:
			why = "its broker's last delivery was another claim, or wrote nothing"
		}
		r.log.Info("interrupted delivery returned to the queue", "message", back[0], "messages", len(back), "target", cs[0].Message.Target, "why", why)
	}
	if len(answered) > 0 {
		// Every report the new session made came after the write: the
		// lease keeper reads them all.
		r.log.Info("interrupted delivery settled by its broker's answer", "message", answered[0].ID, "messages", len(answered),
			"target", answered[0].Target, "written", report.Result.Kind == api.Written, "held", report.Result.Held)
		r.record(ctx, answered, bc.answered(report.Result, 0), map[string]any{"settled": "by its broker after a restart"})
	}
	return nil
}

// answers says whether the broker's last delivery is claim c and wrote (or
// may have written) something: a claim it found no prompt for, or whose
// wake was cancelled, wrote nothing and goes back to the queue.
func answers(d *api.LastDelivery, c store.Interruption) bool {
	return d != nil && d.Result.Kind != api.NotAtPrompt && d.Result.Kind != api.Cancelled &&
		sqlitedb.Millis(d.Claim.At) == sqlitedb.Millis(c.ClaimedAt) && slices.Contains(d.Claim.IDs, c.Message.ID)
}
