package service

import (
	"context"
	"fmt"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/tamqapi"
)

// What happens between a lease's attempts: the end of one (its wake
// cancelled in tamq, the repo's other work judged again) and the judgment
// before the next (docs/observation.md: every attempt is judged again).

// cancelTimeout bounds the call that cancels a stale wake in tamq: tamq
// checks every wake with the engine before it writes it anyway, so this is
// only so that its history says "cancelled" at once.
const cancelTimeout = 2 * time.Second

// attemptEnded follows a move of a lease from -> to made by the agent or
// the clock. When it ended from's attempt (a release, a blocked checkpoint,
// an expiry, a stop), the attempt's wake is cancelled in tamq if it was not
// written yet or waits to be presented again (a completed lease's is
// acknowledged: the agent did its work), and the observer judges the
// waiting work again (the repo's window may be free).
func (s *Service) attemptEnded(ctx context.Context, from, to lease.Lease, why string) {
	kick(s.clockKick)
	ended := from.State != lease.RetryWait && (to.State == lease.RetryWait || !to.State.Live())
	switch {
	case ended && to.State == lease.Completed:
		s.settleWake(ctx, to)
	case ended:
		s.cancelWakes(ctx, from.ID, from.Attempt, why)
	}
	if ended || !to.State.Live() {
		kick(s.observeKick)
	}
}

// cancelWakes asks tamq to cancel the unwritten wakes of the lease's
// attempts up to attempt. A failure is only logged: tamq asks the engine
// before it writes any wake, and then cancels it itself.
func (s *Service) cancelWakes(ctx context.Context, leaseID string, attempt int, why string) {
	if s.opts.Tamq == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	res, err := s.opts.Tamq.CancelWake(cctx, tamqapi.CancelWakeArgs{LeaseID: leaseID, Attempt: attempt, Reason: why})
	switch {
	case err != nil:
		s.log.Debug("cannot cancel a stale wake in tamq; tamq checks before it writes", "lease", leaseID, "attempt", attempt, "error", err.Error())
	case res.Cancelled > 0:
		s.log.Info("stale wake cancelled in tamq", "lease", leaseID, "attempt", attempt, "messages", res.Cancelled)
	}
}

// retryPause is how long a next attempt that cannot be offered yet (no
// window, the window busy) waits before it is judged again at the latest:
// a window that opens or a lease that ends judges it at once.
func (s *Service) retryPause() time.Duration {
	poll := time.Duration(s.opts.Config.Coordination.StateHubPollIntervalSeconds) * time.Second
	return min(max(poll, 5*time.Second), time.Minute)
}

// offerDue judges every lease whose next attempt is due and offers it, or
// postpones it while it must wait, or stops it when its work ended or a
// gate closed on it. It returns whether any was offered.
func (s *Service) offerDue(ctx context.Context, now time.Time) bool {
	due, err := s.store.Deadlines.DueRetries(ctx, now)
	if err != nil {
		s.log.Error("cannot read the leases due; will try again", "error", err.Error())
		return false
	}
	offered := false
	reg := s.registryOnce()
	for _, l := range due {
		if ctx.Err() != nil {
			return offered
		}
		ok, err := s.judgeRetry(ctx, l, reg)
		if err != nil {
			s.log.Error("cannot judge the next attempt of a lease; will try again", "lease", l.ID, "error", err.Error())
			continue
		}
		offered = offered || ok
	}
	return offered
}

// judgeRetry judges the next attempt of a lease in retry_wait against the
// latest observation and the windows, and acts on it.
func (s *Service) judgeRetry(ctx context.Context, l lease.Lease, reg func() (*gita.Registry, error)) (bool, error) {
	t, err := s.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return false, err
	}
	stop := func(gate, reason string) (bool, error) {
		s.log.Info("lease stopped before its next attempt", "lease", l.ID, "gate", gate, "reason", reason)
		to, err := s.store.Leases.StopLease(ctx, l.ID, gate, reason)
		if err == nil {
			s.attemptEnded(ctx, l, to, "the lease stopped: "+reason)
		}
		return false, err
	}
	postpone := func(wait lease.Wait, detail string) (bool, error) {
		_, err := s.store.Leases.Postpone(ctx, l.ID, s.opts.Clock.Now().Add(s.retryPause()), wait, detail)
		return false, err
	}
	v, judged, err := s.judgeWork(ctx, t)
	if err != nil {
		return false, err
	}
	if judged {
		switch {
		case v.Stop:
			return stop(v.Gate, v.Reason)
		case v.Wait:
			return postpone(lease.WaitNotActionable, v.Reason)
		}
	}
	r, wait, err := s.judgeRoute(ctx, t, reg, routeAsk{Lease: l.ID})
	switch {
	case err != nil:
		return false, err
	case r.Gate != "":
		return stop(r.Gate, r.Reason)
	case wait != "":
		return postpone(wait, r.Reason)
	}
	if _, err := s.store.Leases.Reoffer(ctx, l.ID, s.timing); err != nil {
		return false, err
	}
	return true, nil
}

// judgeWork judges the work a trigger is about against the latest
// observation (judged false when there is none to judge it by: State Hub
// not observed yet, or an operator's wake about no State Hub task).
func (s *Service) judgeWork(ctx context.Context, t lease.Trigger) (observe.Verdict, bool, error) {
	var obs observe.Observation
	var inbox map[string]bool
	observed := false
	s.hub.view.update(func(v *hubView) { obs, inbox, observed = v.obs, v.inbox, v.observed })
	if !observed {
		return observe.Verdict{}, false, nil
	}
	switch {
	case t.Source == lease.SourceMessage:
		if !inbox[t.SourceID] {
			return observe.Verdict{Stop: true, Reason: "message_read: the message is read or no longer asks for action"}, true, nil
		}
		return observe.Verdict{}, true, nil
	case t.TaskID == "":
		return observe.Verdict{}, false, nil
	}
	if _, known := obs.Tasks[t.TaskID]; !known && operatorWake(t) {
		return observe.Verdict{}, false, nil // the operator named a task State Hub does not have
	}
	v := obs.Attempt(t.TaskID)
	if v.Stop && v.Gate != "" && operatorWake(t) {
		// The gate the operator woke the task through does not stop it
		// again at the next look; another gate, or the task ending, does.
		through, err := s.store.Receipts.OverriddenGate(ctx, t.ID)
		if err != nil {
			return observe.Verdict{}, false, err
		}
		if through == v.Gate {
			return observe.Verdict{}, true, nil
		}
	}
	return v, true, nil
}

// busyWith says, in words, what the repo's agent works on when another
// live lease than except holds the repo ("" when none does): a repo's
// agent gets one lease at a time.
func (s *Service) busyWith(ctx context.Context, repo, except string) (string, error) {
	ls, err := s.store.LeaseLists.LiveLeasesOfRepo(ctx, repo)
	if err != nil {
		return "", err
	}
	for _, l := range ls {
		if l.ID == except {
			continue
		}
		what := "lease " + l.ID
		if t, err := s.store.Triggers.Trigger(ctx, l.TriggerID); err == nil && t.TaskID != "" {
			what = t.TaskID
		}
		return fmt.Sprintf("window busy with %s (lease %s, %s)", what, l.ID, l.State), nil
	}
	return "", nil
}

// judgeOffered stops the offered leases whose work ended or was gated in
// State Hub since they were offered, before their agent takes them up: the
// wake is cancelled in tamq if it was not written yet.
func (s *Service) judgeOffered(ctx context.Context) error {
	ls, err := s.store.LeaseLists.List(ctx, string(lease.Offered), 0, 0)
	if err != nil {
		return err
	}
	for _, l := range ls {
		t, err := s.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return err
		}
		v, judged, err := s.judgeWork(ctx, t)
		if err != nil {
			return err
		}
		if judged && v.Stop {
			to, err := s.store.Leases.StopLease(ctx, l.ID, v.Gate, v.Reason)
			if errs.Is(err, errs.LeaseState) {
				continue // it moved on meanwhile
			}
			if err != nil {
				return err
			}
			s.log.Info("offered lease stopped: its work ended in State Hub", "lease", l.ID, "gate", v.Gate, "reason", v.Reason)
			s.attemptEnded(ctx, l, to, "the lease stopped: "+v.Reason)
		}
	}
	return nil
}
