package service

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/secretscan"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// waker sends each offered lease's wake to tamq until tamq has answered it
// (Run retries those not answered yet, with a backoff); the judge and the
// operator's wake send the first one themselves.
type waker struct {
	store    *store.Store
	log      *slog.Logger
	clock    clock.Clock
	config   *config.Loaded
	registry func() (*gita.Registry, error)
	tamq     Tamq
	// prompts writes the prompts of each wake.
	prompts interface {
		promptInput(t lease.Trigger, leaseID string, attempt, attempts int, reg func() (*gita.Registry, error)) prompt.Input
	}
	// routesChanged says tamq is gone (its endpoints detached): the
	// observer's next look judges the work waiting for a window again.
	routesChanged func()
	// shared has the checkpoints other hosts shared ([cluster]): the
	// claimer.
	shared interface {
		sharedCheckpoint(ctx context.Context, t lease.Trigger, leaseID string) *lease.Checkpoint
	}
	// wake is the signal of whoever left a wake to send: the pending wakes
	// go now.
	wake wakeup.Signal
}

// wakerBackoff paces the waker's tries while tamq does not answer.
var wakerBackoff = backoff.Policy{Min: 500 * time.Millisecond, Max: 30 * time.Second}

// sendWake sends the wake of an offered lease's current attempt and records
// tamq's answer. A transport failure (tamq down or slow) is returned and
// recorded nowhere: the waker sends the identical request again, which tamq
// answers with the original message. A refusal is recorded as a failed wake;
// the lease then runs out at its ack deadline and is retried.
func (wk *waker) sendWake(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	req, err := wk.wakeRequest(ctx, l)
	if err != nil {
		return l, err
	}
	// The last look before the prompt leaves: a checkpoint since the
	// trigger was judged may have brought secret material into it.
	if f, hit := secretscan.Scan(req.Prompt + "\n" + req.AgentPrompt); hit {
		wk.log.Warn("wake stopped: its prompt would carry secret material", "lease", l.ID, "rule", f.Rule)
		return wk.store.Leases.StopLease(ctx, l.ID, observe.GateSecret, "the prompt would carry secret material ("+f.Rule+")")
	}
	ack, err := wk.tamq.Wake(ctx, req)
	switch {
	case notAnswered(err):
		wk.tamqGone(ctx, err)
		return l, err
	case err != nil:
		return wk.store.Leases.RecordWake(ctx, l.ID, l.Attempt, store.WakeRecord{Err: string(errs.CodeOf(err)) + ": " + textsafe.Escape(err.Error())})
	}
	w := store.WakeRecord{
		Capability: ack.Capability, MessageID: ack.MessageID, TamqEndpointID: ack.SessionID,
		CoordinationEndpointID: l.CoordinationEndpointID, Reason: ack.Reason,
	}
	if ack.Capability == tamqapi.WakeUnavailable {
		// No window could take it: the attempt is withdrawn (it costs
		// nothing) and the work waits for the window to change, which
		// tamq's next attach says.
		w.Wait, w.Until = lease.Wait(ack.Wait), wk.clock.Now().Add(retryPause(wk.config))
		if !slices.Contains(lease.Waits, w.Wait) {
			w.Wait = lease.WaitNoWindow
		}
		wk.log.Info("wake withdrawn: no window can take it now", "lease", l.ID, "attempt", l.Attempt, "reason", ack.Reason)
	} else if ack.Acks != "" {
		wk.log.Info("wake queued", "lease", l.ID, "attempt", l.Attempt, "acks", ack.Acks)
	}
	return wk.store.Leases.RecordWake(ctx, l.ID, l.Attempt, w)
}

// tamqGone marks every endpoint detached when tamq's service does not
// answer at all (killed, or stopped without detaching): work waits for it
// ("tamq_unreachable") instead of being offered into windows nobody
// serves. tamq attaches again when it is back.
func (wk *waker) tamqGone(ctx context.Context, err error) {
	if !errs.Is(err, errs.Unavailable) || wk.tamq == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	_, perr := wk.tamq.Ping(pctx)
	cancel()
	if perr == nil {
		return // it answers: too busy this once, not gone
	}
	if n, derr := wk.store.Endpoints.DetachAll(ctx, "tamq does not answer"); derr == nil && n > 0 {
		wk.log.Warn("tamq does not answer; its endpoints are detached until it attaches again", "endpoints", n)
		wk.routesChanged()
	}
}

// wakeRequest builds the request of a lease's current attempt from what is
// stored, so sending it again gives the identical request.
func (wk *waker) wakeRequest(ctx context.Context, l lease.Lease) (tamqapi.WakeRequest, error) {
	t, err := wk.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return tamqapi.WakeRequest{}, err
	}
	cp, err := wk.store.Checkpoints.LatestCheckpoint(ctx, l.ID)
	if err != nil {
		return tamqapi.WakeRequest{}, err
	}
	switch {
	case cp != nil:
	case t.Resume != nil:
		// A checkpoint_resume trigger resumes from the checkpoint it was
		// made from: its text goes into the prompt.
		cp = t.Resume
	case t.TaskID != "":
		// A new lease of a task worked on before (blocked, then set back
		// to todo by a person) resumes from the task's latest checkpoint.
		if cp, err = wk.store.Checkpoints.LatestTaskCheckpoint(ctx, t.TaskID); err != nil {
			return tamqapi.WakeRequest{}, err
		}
	}
	if cp == nil {
		// The work may have been begun on another host, which died: its
		// checkpoint, if the cluster vouches it is the last word of the
		// work's previous claim, for this task and repo.
		cp = wk.shared.sharedCheckpoint(ctx, t, l.ID)
	}
	// The wake goes to the endpoint the lease was offered for, by tamq's id
	// of it; a lease offered for no endpoint lets tamq choose.
	tamqEndpoint := ""
	if l.CoordinationEndpointID != "" {
		eps, err := wk.store.Endpoints.List(ctx, false)
		if err != nil {
			return tamqapi.WakeRequest{}, err
		}
		for _, ep := range eps {
			if ep.ID == l.CoordinationEndpointID {
				tamqEndpoint = ep.TamqEndpointID
			}
		}
	}
	// A later attempt wakes the agent because its retry is due (spec
	// section 2's retry_due), whatever first made the work actionable; the
	// trigger keeps its own reason.
	reason := t.Reason
	if l.Attempt > 1 {
		reason = lease.RetryDue
	}
	in := wk.prompts.promptInput(t, l.ID, l.Attempt, l.Attempts(), wk.registry)
	in.Trigger.Reason = string(reason)
	req := tamqapi.WakeRequest{
		LeaseID: l.ID, Attempt: l.Attempt, TargetRepo: l.TargetRepo, TargetAgent: l.TargetAgent,
		EndpointID: tamqEndpoint, CoordinationEndpointID: l.CoordinationEndpointID,
		Trigger: tamqapi.WakeTrigger{
			ID: t.ID, Source: string(t.Source), SourceID: t.SourceID, SourceRevision: t.SourceRevision,
			TargetRepo: t.TargetRepo, TargetAgent: t.TargetAgent, Reason: string(reason), ObservedAt: t.ObservedAt,
		},
	}
	if cp != nil {
		in.Checkpoint = &prompt.Checkpoint{Summary: cp.Summary, NextAction: cp.NextAction, BlockedReason: string(cp.BlockedReason),
			FilesChanged: cp.FilesChanged, RecordedAt: cp.RecordedAt}
		req.Checkpoint = &tamqapi.WakeCheckpoint{LeaseID: cp.LeaseID, TaskID: cp.TaskID, Summary: cp.Summary, FilesChanged: cp.FilesChanged,
			NextAction: cp.NextAction, BlockedReason: string(cp.BlockedReason), RecordedAt: cp.RecordedAt}
	}
	req.Prompt, req.AgentPrompt = bothPrompts(in)
	return req, nil
}

// Run sends the wakes tamq has not answered yet: of leases offered
// while tamq was down, re-offered after a retry, or whose answer a crash
// lost. While tamq is unreachable it waits with a capped backoff.
func (wk *waker) Run(ctx context.Context) {
	delay := time.Duration(0)
	for {
		failed := false
		pending, err := wk.store.Deadlines.PendingWakes(ctx)
		if err != nil {
			wk.log.Error("cannot read the wakes to send", "error", err.Error())
			failed = true
		}
		for _, l := range pending {
			if ctx.Err() != nil {
				return
			}
			if _, err := wk.sendWake(ctx, l); err != nil {
				wk.log.Debug("wake not sent; will try again", "lease", l.ID, "error", err.Error())
				failed = true
				break
			}
		}
		var wait <-chan time.Time
		if failed {
			delay = wakerBackoff.Next(delay)
			wait = wk.clock.After(delay)
		} else {
			delay = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-wk.wake.C():
		case <-wait:
		}
	}
}
