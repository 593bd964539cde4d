package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/secretscan"
	tamqapi "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// wake is the operator's manual trigger: a trigger like an observed one,
// through the same gates, lease and wake path. One live lease per task,
// whoever asks: naming a task whose lease lives answers with that lease and
// sends nothing; a repo whose agent holds a lease gets another only with
// force.
func (s *Service) wake(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.WakeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if s.stopping.Load() {
		return nil, errs.New(errs.ShuttingDown, "coordination-engine is stopping and takes no new leases")
	}
	if args.Task != "" {
		if p := textsafe.NameProblem(args.Task); p != "" {
			return nil, errs.New(errs.BadRequest, "task id %q: %s", textsafe.Escape(args.Task), p)
		}
	}
	// The registry is read afresh: only what gita registers now is addressed.
	reg, err := s.opts.Registry()
	if err != nil {
		return nil, err
	}
	if _, ok := reg.Lookup(args.Repo); !ok {
		return nil, errs.New(errs.UnknownTarget, "%q is not a gita-registered repo", textsafe.Escape(args.Repo)).
			WithHint("see `coordination-engine repos`")
	}
	if args.EndpointID != "" {
		if eps, err := s.hostsOf(ctx, args.Repo, args.EndpointID); err != nil {
			return nil, err
		} else if len(eps) == 0 {
			return nil, errs.New(errs.Unavailable, "endpoint %s is not attached or has no window for %s", textsafe.Escape(args.EndpointID), args.Repo).
				WithHint("see the endpoints in `coordination-engine status`")
		}
	}
	if args.Task != "" {
		if l, live, err := s.store.LeaseLists.LiveLeaseOfTask(ctx, args.Task); err != nil {
			return nil, err
		} else if live {
			t, err := s.store.Triggers.Trigger(ctx, l.TriggerID)
			if err != nil {
				return nil, err
			}
			out := api.LeaseOf(l)
			return api.WakeResult{Trigger: api.TriggerOf(t), Lease: &out, Existing: true,
				Reason: fmt.Sprintf("task %s already has lease %s (%s, attempt %d of %d); nothing new was sent", args.Task, l.ID, l.State, l.Attempt, l.MaxAttempts+1)}, nil
		}
	} else if !args.Force {
		if busy, err := s.busyWith(ctx, args.Repo, ""); err != nil {
			return nil, err
		} else if busy != "" {
			return nil, errs.New(errs.Conflict, "%s has a live lease: %s", args.Repo, busy).
				WithHint("wait for it to end, name the task with --task, or add a second lease with --force")
		}
	}
	// The task's own gates hold for a manual wake as for an observed change,
	// unless the operator names the gate to go through.
	var taskGate, taskGateReason string
	if tv, ok := s.observedTask(args.Task); ok && args.Task != "" {
		taskGate, taskGateReason = tv.Gate, tv.GateReason
	}
	switch {
	case args.OverrideGate != "" && taskGate == "":
		return nil, errs.New(errs.BadRequest, "task %s is stopped at no gate; --override-gate %s overrides nothing", args.Task, textsafe.Escape(args.OverrideGate))
	case args.OverrideGate != "" && args.OverrideGate != taskGate:
		return nil, errs.New(errs.BadRequest, "task %s is stopped at gate %s, not %s", args.Task, taskGate, textsafe.Escape(args.OverrideGate)).
			WithHint("name the gate that stops it: --override-gate %s", taskGate)
	}
	now := s.opts.Clock.Now()
	sourceID := args.Task
	if sourceID == "" {
		sourceID = "manual:" + args.Repo
	}
	t, _, err := s.store.Triggers.AddTrigger(ctx, lease.Trigger{
		Source: lease.SourceTask, SourceID: sourceID, TaskID: args.Task,
		// Each operator command is a new revision: waking twice on purpose
		// is two triggers, not one collapsed observation.
		SourceRevision: api.OperatorRevision + now.Format("20060102T150405.000Z"),
		TargetRepo:     args.Repo, Reason: lease.TaskActionable, ObservedAt: now,
	})
	if err != nil {
		return nil, err
	}
	r, wait, err := s.judgeRoute(ctx, t, func() (*gita.Registry, error) { return reg, nil }, routeAsk{Endpoint: args.EndpointID, Force: args.Force})
	if err != nil {
		return nil, err
	}
	switch {
	case taskGate != "" && args.OverrideGate == "" && r.Gate == "":
		r.Gate, r.Reason = taskGate, taskGateReason+"; a person who means to go through wakes it with --override-gate "+taskGate
	case taskGate != "":
		rc := receipt.Receipt{Kind: store.KindGateOverridden, TriggerID: t.ID, Status: taskGate,
			Reason: "the operator woke task " + args.Task + " through gate " + taskGate,
			Detail: callerFrom(ctx).detail(map[string]any{"task_id": args.Task, "trigger_id": t.ID, "gate": taskGate})}
		if err := s.store.Receipts.AddReceipt(ctx, rc); err != nil {
			return nil, err
		}
	}
	res := api.WakeResult{Trigger: api.TriggerOf(t)}
	switch {
	case r.Gate != "":
		if r.Gate == observe.GateAmbiguous {
			r.Reason += "; name one with --endpoint"
		}
		if err := s.store.Triggers.StopTrigger(ctx, t.ID, r.Gate, r.Reason); err != nil {
			return nil, err
		}
		res.Trigger.State, res.Trigger.GateReason = string(lease.TriggerStopped), r.Gate
		res.Stopped, res.Reason = r.Gate, r.Reason
		return res, nil
	case wait != "":
		if err := s.store.Triggers.WaitTrigger(ctx, t.ID, wait, r.Reason); err != nil {
			return nil, err
		}
		res.Trigger.Waiting, res.Trigger.WaitingFor = string(wait), r.Reason
		res.Waiting, res.Reason = string(wait), r.Reason
		return res, nil
	}
	l, err := s.store.Leases.Offer(ctx, t.ID, r.EndpointID, s.timing)
	if err != nil {
		return nil, err
	}
	kick(s.clockKick)
	// The operator waits for tamq's answer; the waker sends it again if
	// this one is lost.
	if l, err = s.sendWake(ctx, l); err != nil {
		s.log.Warn("wake not sent yet; the waker tries again", "lease", l.ID, "error", err.Error())
		kick(s.wakerKick)
	}
	res.Trigger.State = string(lease.TriggerLeased)
	out := api.LeaseOf(l)
	res.Lease = &out
	return res, nil
}

// sendWake sends the wake of an offered lease's current attempt and records
// tamq's answer. A transport failure (tamq down or slow) is returned and
// recorded nowhere: the waker sends the identical request again, which tamq
// answers with the original message. A refusal is recorded as a failed wake;
// the lease then runs out at its ack deadline and is retried.
func (s *Service) sendWake(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	req, err := s.wakeRequest(ctx, l)
	if err != nil {
		return l, err
	}
	// The last look before the prompt leaves: a checkpoint since the
	// trigger was judged may have brought secret material into it.
	if f, hit := secretscan.Scan(req.Prompt); hit {
		s.log.Warn("wake stopped: its prompt would carry secret material", "lease", l.ID, "rule", f.Rule)
		return s.store.Leases.StopLease(ctx, l.ID, observe.GateSecret, "the prompt would carry secret material ("+f.Rule+")")
	}
	ack, err := s.opts.Tamq.Wake(ctx, req)
	switch {
	case notAnswered(err):
		s.tamqGone(ctx, err)
		return l, err
	case err != nil:
		return s.store.Leases.RecordWake(ctx, l.ID, l.Attempt, store.WakeRecord{Err: string(errs.CodeOf(err)) + ": " + textsafe.Escape(err.Error())})
	}
	w := store.WakeRecord{
		Capability: ack.Capability, MessageID: ack.MessageID, TamqEndpointID: ack.SessionID,
		CoordinationEndpointID: l.CoordinationEndpointID, Reason: ack.Reason,
	}
	if ack.Capability == tamqapi.WakeUnavailable {
		// No window could take it: the attempt is withdrawn (it costs
		// nothing) and the work waits for the window to change, which
		// tamq's next attach says.
		w.Wait, w.Until = lease.Wait(ack.Wait), s.opts.Clock.Now().Add(s.retryPause())
		if !slices.Contains(lease.Waits, w.Wait) {
			w.Wait = lease.WaitNoWindow
		}
		s.log.Info("wake withdrawn: no window can take it now", "lease", l.ID, "attempt", l.Attempt, "reason", ack.Reason)
	}
	return s.store.Leases.RecordWake(ctx, l.ID, l.Attempt, w)
}

// tamqGone marks every endpoint detached when tamq's service does not
// answer at all (killed, or stopped without detaching): work waits for it
// ("tamq_unreachable") instead of being offered into windows nobody
// serves. tamq attaches again when it is back.
func (s *Service) tamqGone(ctx context.Context, err error) {
	if !errs.Is(err, errs.Unavailable) || s.opts.Tamq == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	_, perr := s.opts.Tamq.Ping(pctx)
	cancel()
	if perr == nil {
		return // it answers: too busy this once, not gone
	}
	if n, derr := s.store.Endpoints.DetachAll(ctx, "tamq does not answer"); derr == nil && n > 0 {
		s.log.Warn("tamq does not answer; its endpoints are detached until it attaches again", "endpoints", n)
		s.routesChanged.Store(true)
	}
}

// notAnswered says tamq did not answer a wake (not running, slow, stopping,
// or the engine itself is stopping): the same request is sent again later.
func notAnswered(err error) bool {
	return errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Timeout) || errs.Is(err, errs.ShuttingDown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// wakeRequest builds the request of a lease's current attempt from what is
// stored, so sending it again gives the identical request.
func (s *Service) wakeRequest(ctx context.Context, l lease.Lease) (tamqapi.WakeRequest, error) {
	t, err := s.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return tamqapi.WakeRequest{}, err
	}
	cp, err := s.store.Checkpoints.LatestCheckpoint(ctx, l.ID)
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
		if cp, err = s.store.Checkpoints.LatestTaskCheckpoint(ctx, t.TaskID); err != nil {
			return tamqapi.WakeRequest{}, err
		}
	}
	// The wake goes to the endpoint the lease was offered for, by tamq's id
	// of it; a lease offered for no endpoint lets tamq choose.
	tamqEndpoint := ""
	if l.CoordinationEndpointID != "" {
		eps, err := s.store.Endpoints.List(ctx, false)
		if err != nil {
			return tamqapi.WakeRequest{}, err
		}
		for _, ep := range eps {
			if ep.ID == l.CoordinationEndpointID {
				tamqEndpoint = ep.TamqEndpointID
			}
		}
	}
	in := s.promptInput(t, l.ID, l.Attempt, l.MaxAttempts+1, s.opts.Registry)
	req := tamqapi.WakeRequest{
		LeaseID: l.ID, Attempt: l.Attempt, TargetRepo: l.TargetRepo, TargetAgent: l.TargetAgent,
		EndpointID: tamqEndpoint, CoordinationEndpointID: l.CoordinationEndpointID,
		Trigger: tamqapi.WakeTrigger{
			ID: t.ID, Source: string(t.Source), SourceID: t.SourceID, SourceRevision: t.SourceRevision,
			TargetRepo: t.TargetRepo, TargetAgent: t.TargetAgent, Reason: string(t.Reason), ObservedAt: t.ObservedAt,
		},
	}
	if cp != nil {
		in.Checkpoint = &prompt.Checkpoint{Summary: cp.Summary, NextAction: cp.NextAction, BlockedReason: string(cp.BlockedReason),
			FilesChanged: cp.FilesChanged, RecordedAt: cp.RecordedAt}
		req.Checkpoint = &tamqapi.WakeCheckpoint{LeaseID: cp.LeaseID, TaskID: cp.TaskID, Summary: cp.Summary, FilesChanged: cp.FilesChanged,
			NextAction: cp.NextAction, BlockedReason: string(cp.BlockedReason), RecordedAt: cp.RecordedAt}
	}
	req.Prompt = prompt.Build(in)
	return req, nil
}

// runWaker sends the wakes tamq has not answered yet: of leases offered
// while tamq was down, re-offered after a retry, or whose answer a crash
// lost. While tamq is unreachable it waits with a capped backoff.
func (s *Service) runWaker(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		failed := false
		pending, err := s.store.Deadlines.PendingWakes(ctx)
		if err != nil {
			s.log.Error("cannot read the wakes to send", "error", err.Error())
			failed = true
		}
		for _, l := range pending {
			if ctx.Err() != nil {
				return
			}
			if _, err := s.sendWake(ctx, l); err != nil {
				s.log.Debug("wake not sent; will try again", "lease", l.ID, "error", err.Error())
				failed = true
				break
			}
		}
		var wait <-chan time.Time
		if failed {
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			wait = s.opts.Clock.After(backoff)
		} else {
			backoff = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wakerKick:
		case <-wait:
		}
	}
}

// runClock expires leases whose deadline passed and judges those whose
// next attempt is due (offered again, postponed, or stopped), then sleeps
// until the next deadline in the database: the deadlines survive a restart
// because they are read from SQLite each turn.
func (s *Service) runClock(ctx context.Context) {
	for {
		now := s.opts.Clock.Now()
		if changed, err := s.store.Deadlines.ExpireDue(ctx, now, s.timing); err != nil {
			s.log.Error("cannot expire leases; will try again", "error", err.Error())
		} else {
			for _, l := range changed {
				s.log.Info("lease ran out", "lease", l.ID, "state", l.State, "attempt", l.Attempt)
				ended := l
				ended.Attempt, ended.State = l.Attempt-1, lease.Offered // the attempt that ran out
				why := "attempt " + strconv.Itoa(ended.Attempt) + " ran out; a new attempt follows"
				if l.State == lease.Stopped {
					ended.Attempt, why = l.Attempt, "the lease stopped: "+l.StopReason
				}
				s.attemptEnded(ctx, ended, l, why)
			}
		}
		if s.offerDue(ctx, now) {
			kick(s.wakerKick)
		}
		wait := time.Minute // something kicks the clock first when a lease changes
		if next, ok, err := s.store.Deadlines.NextDue(ctx); err != nil {
			wait = time.Second
		} else if ok {
			wait = min(wait, max(next.Sub(s.opts.Clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clockKick:
		case <-s.opts.Clock.After(wait):
		}
	}
}
