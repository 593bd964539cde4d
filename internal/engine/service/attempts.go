package service

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
)

// What happens between a lease's attempts: the end of one (its wake
// cancelled in tamq, the repo's other work judged again:
// attemptEnds in leaseclock.go), the judge's judgment before the next, here
// (docs/observation.md: every attempt is judged again), and its offer
// (offer.go).

// retryPause is how long a next attempt that cannot be offered yet (no
// window, the window busy) waits before it is judged again at the latest:
// a window that opens or a lease that ends judges it at once.
func retryPause(c *config.Loaded) time.Duration {
	poll := time.Duration(c.Coordination.StateHubPollIntervalSeconds) * time.Second
	return min(max(poll, 5*time.Second), time.Minute)
}

// offerDue judges every lease whose next attempt is due and offers it, or
// postpones it while it must wait, or stops it when its work ended or a
// gate closed on it.
func (j *judge) offerDue(ctx context.Context, now time.Time) {
	due, err := j.store.Deadlines.DueRetries(ctx, now)
	if err != nil {
		j.log.Error("cannot read the leases due; will try again", "error", err.Error())
		return
	}
	reg := j.registryOnce()
	for _, l := range due {
		if ctx.Err() != nil {
			return
		}
		if err := j.judgeRetry(ctx, l, reg); err != nil {
			j.log.Error("cannot judge the next attempt of a lease; will try again", "lease", l.ID, "error", err.Error())
		}
	}
}

// judgeRetry judges the next attempt of a lease in retry_wait against the
// latest observation and the windows, and acts on it.
func (j *judge) judgeRetry(ctx context.Context, l lease.Lease, reg func() (*gita.Registry, error)) error {
	t, err := j.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return err
	}
	stop := func(gate, reason string) error {
		j.log.Info("lease stopped before its next attempt", "lease", l.ID, "gate", gate, "reason", reason)
		to, err := j.store.Leases.StopLease(ctx, l.ID, gate, reason)
		if err == nil {
			j.ends.attemptEnded(ctx, l, to, "the lease stopped: "+reason)
		}
		return err
	}
	postpone := func(wait lease.Wait, detail string) error {
		_, err := j.store.Leases.Postpone(ctx, l.ID, j.clock.Now().Add(retryPause(j.config)), wait, detail)
		return err
	}
	v, judged, err := j.judgeWork(ctx, t)
	if err != nil {
		return err
	}
	if judged {
		switch {
		case v.Stop:
			return stop(v.Gate, v.Reason)
		case v.Wait:
			return postpone(lease.WaitNotActionable, v.Reason)
		}
	}
	// The attempt goes where the last one went while that endpoint still
	// hosts the repo (the operator may have named it among several);
	// once it is gone (stopped, forgotten), the work is routed afresh:
	// the repo's live window, or it waits for one.
	ask := routeAsk{Lease: l.ID}
	if l.CoordinationEndpointID != "" {
		if hosts, err := j.router.hostsOf(ctx, t.TargetRepo, l.CoordinationEndpointID); err != nil {
			return err
		} else if len(hosts) > 0 {
			ask.Endpoint = l.CoordinationEndpointID
		}
	}
	r, wait, err := j.router.judgeRoute(ctx, t, reg, ask)
	switch {
	case err != nil:
		return err
	case r.Gate != "":
		return stop(r.Gate, r.Reason)
	case wait != "":
		return postpone(wait, r.Reason)
	}
	_, wait, why, err := j.offers.offer(ctx, t, r.EndpointID, &l)
	if wait != "" {
		return postpone(wait, why)
	}
	return err
}

// judgeWork judges the work a trigger is about against the latest
// observation (judged false when there is none to judge it by: State Hub
// not observed yet, or an operator's wake about no State Hub task).
func (j *judge) judgeWork(ctx context.Context, t lease.Trigger) (observe.Verdict, bool, error) {
	obs, inbox, _, observed := j.latest.snapshot()
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
		through, err := j.store.Receipts.OverriddenGate(ctx, t.ID)
		if err != nil {
			return observe.Verdict{}, false, err
		}
		if through == v.Gate {
			return observe.Verdict{}, true, nil
		}
	}
	return v, true, nil
}

// judgeOffered stops the offered leases whose work ended or was gated in
// State Hub since they were offered, before their agent takes them up: the
// wake is cancelled in tamq if it was not written yet.
func (j *judge) judgeOffered(ctx context.Context) error {
	ls, err := j.store.LeaseLists.List(ctx, string(lease.Offered), 0, 0)
	if err != nil {
		return err
	}
	for _, l := range ls {
		t, err := j.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return err
		}
		v, judged, err := j.judgeWork(ctx, t)
		if err != nil {
			return err
		}
		if judged && v.Stop {
			to, err := j.store.Leases.StopLease(ctx, l.ID, v.Gate, v.Reason)
			if errs.Is(err, errs.LeaseState) {
				continue // it moved on meanwhile
			}
			if err != nil {
				return err
			}
			j.log.Info("offered lease stopped: its work ended in State Hub", "lease", l.ID, "gate", v.Gate, "reason", v.Reason)
			j.ends.attemptEnded(ctx, l, to, "the lease stopped: "+v.Reason)
		}
	}
	return nil
}
