package service

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// cancelTimeout bounds the call that cancels a stale wake in tamq: tamq
// checks every wake with the engine before it writes it anyway, so this is
// only so that its history says "cancelled" at once.
const cancelTimeout = 2 * time.Second

// tamqAckTimeout bounds the ack of a wake message that follows a lease ack:
// the agent's command waits for it, and tamq's own deadline covers a loss.
const tamqAckTimeout = 3 * time.Second

// leaseClock expires leases whose deadline passed and has the judge judge
// those whose next attempt is due (Run), reading the deadlines from SQLite
// each turn. Whoever changes a lease's deadlines wakes it (its wake signal).
type leaseClock struct {
	store  *store.Store
	log    *slog.Logger
	clock  clock.Clock
	timing lease.Timing
	tamq   Tamq
	// ends follows the attempts the clock ends (ran out, stopped).
	ends attemptEnds
	// retries judges the leases whose next attempt is due (the judge).
	retries interface {
		offerDue(ctx context.Context, now time.Time)
	}
	// wake is the signal of whoever changed a lease's deadlines.
	wake wakeup.Signal
}

// attemptEnds follows each move of a lease made by the agent, the clock,
// the judge or the cluster's keeper that ends an attempt: the lease clock
// woken, the attempt's wake settled or cancelled in tamq, the claim
// settled in the cluster, the observer woken to judge the waiting work.
type attemptEnds struct {
	wakes tamqWakes
	// claims settles the cluster's claim of a lease no longer live (the
	// claimer).
	claims interface {
		leaseEnded(ctx context.Context, l lease.Lease)
	}
	// deadlinesChanged wakes the lease clock; lookAgain the observer.
	deadlinesChanged, lookAgain wakeup.Signal
}

// attemptEnded follows a move of a lease from -> to made by the agent or
// the clock. When it ended from's attempt (a release, a blocked checkpoint,
// an expiry, a stop), the attempt's wake is cancelled in tamq if it was not
// written yet or waits to be presented again (a completed lease's is
// acknowledged: the agent did its work), and the observer judges the
// waiting work again (the repo's window may be free).
func (a attemptEnds) attemptEnded(ctx context.Context, from, to lease.Lease, why string) {
	a.deadlinesChanged.Wake()
	ended := from.State != lease.RetryWait && (to.State == lease.RetryWait || !to.State.Live())
	switch {
	case ended && to.State == lease.Completed:
		a.wakes.settleWake(ctx, to)
	case ended:
		a.wakes.cancelWakes(ctx, from.ID, from.Attempt, why)
	}
	if !to.State.Live() {
		// Another host may take the work now.
		a.claims.leaseEnded(ctx, to)
	}
	if ended || !to.State.Live() {
		a.lookAgain.Wake()
	}
}

// tamqWakes are the wakes sent to tamq, as the engine follows them once
// their attempt ended: cancelled while unwritten, settled when the work is
// done.
type tamqWakes struct {
	tamq Tamq
	log  *slog.Logger
}

// cancelWakes asks tamq to cancel the unwritten wakes of the lease's
// attempts up to attempt. A failure is only logged: tamq asks the engine
// before it writes any wake, and then cancels it itself.
func (w tamqWakes) cancelWakes(ctx context.Context, leaseID string, attempt int, why string) {
	if w.tamq == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	res, err := w.tamq.CancelWake(cctx, tamqapi.CancelWakeArgs{LeaseID: leaseID, Attempt: attempt, Reason: why})
	switch {
	case err != nil:
		w.log.Debug("cannot cancel a stale wake in tamq; tamq checks before it writes", "lease", leaseID, "attempt", attempt, "error", err.Error())
	case res.Cancelled > 0:
		w.log.Info("stale wake cancelled in tamq", "lease", leaseID, "attempt", attempt, "messages", res.Cancelled)
	}
}

// settleWake acknowledges the wake message of the lease's current attempt
// in tamq, so tamq stops presenting the prompt. It is idempotent in tamq,
// and a failure only leaves tamq to present the prompt again at its own
// deadline, when the agent's ack settles it.
func (w tamqWakes) settleWake(ctx context.Context, l lease.Lease) {
	if l.LocalLeaseID == "" {
		return
	}
	actx, cancel := context.WithTimeout(ctx, tamqAckTimeout)
	defer cancel()
	if _, err := w.tamq.Ack(actx, l.LocalLeaseID); err != nil && !errs.Is(err, errs.Conflict) {
		w.log.Warn("cannot acknowledge the wake message in tamq", "lease", l.ID, "message", l.LocalLeaseID, "error", err.Error())
	}
}

// wakeHeldTimeout bounds the question to tamq at an ack deadline: tamq
// answers from memory and one read of its database.
const wakeHeldTimeout = 2 * time.Second

// onItsWayLimit is how many ack timeouts, counted from its offer, a wake
// that tamq says is on its way into a free window (being written, or about
// to be) may wait unwritten before its attempt runs out as any other.
const onItsWayLimit = 3

// holdWakes asks tamq, for each offered attempt whose ack deadline has
// come, whether its wake was ever written: one never delivered did not run
// out, it waited. Behind a dialog or in a window without its agent it waits
// on (its deadline starts again; the wake goes in when a person has dealt
// with it); on an endpoint that is gone it is taken back, at no cost, and
// routed afresh (the repo's live window, or it waits for one). What tamq
// cannot answer, or answers as written, runs out as before. An agent busy
// in its window (at work for a person) holds it too: it never saw the
// prompt.
func (lc *leaseClock) holdWakes(ctx context.Context, now time.Time) {
	if lc.tamq == nil {
		return
	}
	due, err := lc.store.Deadlines.HeldWakesDue(ctx, now)
	if err != nil {
		lc.log.Error("cannot read the offered leases due", "error", err.Error())
		return
	}
	for _, l := range due {
		if ctx.Err() != nil {
			return
		}
		actx, cancel := context.WithTimeout(ctx, wakeHeldTimeout)
		res, err := lc.tamq.WakeHeld(actx, tamqapi.WakeHeldArgs{LeaseID: l.ID, Attempt: l.Attempt})
		cancel()
		if err != nil {
			lc.log.Debug("cannot ask tamq what holds a wake; the attempt runs out", "lease", l.ID, "attempt", l.Attempt, "error", err.Error())
			continue
		}
		if !res.Held {
			continue
		}
		wait := lease.Wait(res.Wait)
		if wait == "" && !now.Before(l.AcquiredAt.Add(onItsWayLimit*lc.timing.AckTimeout)) {
			// Said to be on its way for that long, it is not: something
			// keeps it from its window that tamq cannot name. It runs
			// out, so that the budget ends it and a person hears of it,
			// rather than waiting unseen for ever.
			lc.log.Warn("wake still unwritten in a free window; the attempt runs out", "lease", l.ID, "attempt", l.Attempt, "since", l.AcquiredAt)
			continue
		}
		switch wait {
		case lease.WaitDialog, lease.WaitNoAgent, lease.WaitBusy, "":
			// "": on its way into a window that can take it; the
			// agent gets a whole ack timeout from now.
			held, err := lc.store.Leases.HoldWake(ctx, l.ID, l.Attempt, now.Add(lc.timing.AckTimeout), wait, res.Reason)
			if err != nil {
				lc.log.Error("cannot hold a wake; the attempt runs out", "lease", l.ID, "error", err.Error())
				continue
			}
			if held != l && wait != "" {
				lc.log.Info("wake held by tamq: the attempt waits, nothing spent", "lease", l.ID, "attempt", l.Attempt, "wait", string(wait), "reason", res.Reason)
			}
		case lease.WaitNoWindow:
			// Nothing will write it where it is: taken back first in tamq,
			// so that an endpoint that comes back does not type it.
			lc.ends.wakes.cancelWakes(ctx, l.ID, l.Attempt, "re-routed: "+res.Reason)
			to, err := lc.store.Leases.WithdrawHeldWake(ctx, l.ID, l.Attempt, now, lease.WaitNoWindow, res.Reason)
			if err != nil {
				lc.log.Error("cannot withdraw a held wake; the attempt runs out", "lease", l.ID, "error", err.Error())
				continue
			}
			if to.State == lease.RetryWait {
				lc.log.Info("wake withdrawn: its endpoint or window is gone; the work is routed again, nothing spent", "lease", l.ID, "attempt", l.Attempt, "reason", res.Reason)
			}
		default:
			// A wait this engine does not know (a newer tamq's): the
			// attempt runs out as before, which no wait can make worse.
			lc.log.Debug("tamq holds a wake for a reason unknown here; the attempt runs out", "lease", l.ID, "wait", string(wait))
		}
	}
}

// Run expires leases whose deadline passed and judges those whose
// next attempt is due (offered again, postponed, or stopped), then sleeps
// until the next deadline in the database: the deadlines survive a restart
// because they are read from SQLite each turn.
func (lc *leaseClock) Run(ctx context.Context) {
	for {
		now := lc.clock.Now()
		lc.holdWakes(ctx, now)
		if changed, err := lc.store.Deadlines.ExpireDue(ctx, now, lc.timing); err != nil {
			lc.log.Error("cannot expire leases; will try again", "error", err.Error())
		} else {
			for _, l := range changed {
				lc.log.Info("lease ran out", "lease", l.ID, "state", l.State, "attempt", l.Attempt)
				ended := l
				ended.Attempt, ended.State = l.Attempt-1, lease.Offered // the attempt that ran out
				why := "attempt " + strconv.Itoa(ended.Attempt) + " ran out; a new attempt follows"
				if l.State == lease.Stopped {
					ended.Attempt, why = l.Attempt, "the lease stopped: "+l.StopReason
				}
				lc.ends.attemptEnded(ctx, ended, l, why)
			}
		}
		lc.retries.offerDue(ctx, now)
		wait := time.Minute // whoever changes a lease wakes the clock first
		if next, ok, err := lc.store.Deadlines.NextDue(ctx); err != nil {
			wait = time.Second
		} else if ok {
			wait = min(wait, max(next.Sub(lc.clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-lc.wake.C():
		case <-lc.clock.After(wait):
		}
	}
}
