package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/api"
	"github.com/tmux-amq/tamq/internal/engine/lease"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/prompt"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/secretscan"
	tamqapi "github.com/tmux-amq/tamq/internal/tamq/api"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// wake is the operator's manual trigger: a trigger like an observed one,
// through the same gates, lease and wake path.
func (s *Service) wake(ctx context.Context, _ protocol.Peer, req *protocol.Request) (any, error) {
	var args api.WakeArgs
	if err := protocol.DecodeArgs(req, &args); err != nil {
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
	now := s.opts.Now()
	sourceID := args.Task
	if sourceID == "" {
		sourceID = "manual:" + args.Repo
	}
	t, _, err := s.store.AddTrigger(ctx, lease.Trigger{
		Source: lease.SourceTask, SourceID: sourceID,
		// Each operator command is a new revision: waking twice on purpose
		// is two triggers, not one collapsed observation.
		SourceRevision: "manual-" + now.Format("20060102T150405.000Z"),
		TargetRepo:     args.Repo, Reason: lease.TaskActionable, ObservedAt: now,
	})
	if err != nil {
		return nil, err
	}
	res := api.WakeResult{Trigger: api.TriggerOf(t)}
	endpoint, gate, reason, err := s.route(ctx, func() (*gita.Registry, error) { return reg, nil }, args.Repo, args.EndpointID)
	if err != nil {
		return nil, err
	}
	switch {
	case gate == observe.GateUnavailable && args.EndpointID != "":
		reason = fmt.Sprintf("endpoint %s is not attached or does not host %s", textsafe.Escape(args.EndpointID), args.Repo)
	case gate == observe.GateAmbiguous:
		reason += "; name one with --endpoint"
	}
	if gate != "" {
		if err := s.store.StopTrigger(ctx, t.ID, gate, reason); err != nil {
			return nil, err
		}
		res.Trigger.State, res.Trigger.GateReason = string(lease.TriggerStopped), gate
		res.Stopped, res.Reason = gate, reason
		return res, nil
	}
	l, err := s.store.Offer(ctx, t.ID, endpoint, s.timing)
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
		return s.store.GateLease(ctx, l.ID, observe.GateSecret, "the prompt would carry secret material ("+f.Rule+")")
	}
	ack, err := s.opts.Tamq.Wake(ctx, req)
	switch {
	case notAnswered(err):
		return l, err
	case err != nil:
		return s.store.RecordWake(ctx, l.ID, l.Attempt, store.WakeRecord{Err: string(errs.CodeOf(err)) + ": " + textsafe.Escape(err.Error())})
	}
	return s.store.RecordWake(ctx, l.ID, l.Attempt, store.WakeRecord{
		Capability: ack.Capability, MessageID: ack.MessageID, TamqEndpointID: ack.SessionID,
		CoordinationEndpointID: l.CoordinationEndpointID, Reason: ack.Reason,
	})
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
	t, err := s.store.Trigger(ctx, l.TriggerID)
	if err != nil {
		return tamqapi.WakeRequest{}, err
	}
	cp, err := s.store.LatestCheckpoint(ctx, l.ID)
	if err != nil {
		return tamqapi.WakeRequest{}, err
	}
	// The wake goes to the endpoint the lease was offered for, by tamq's id
	// of it; a lease offered for no endpoint lets tamq choose.
	tamqEndpoint := ""
	if l.CoordinationEndpointID != "" {
		eps, err := s.store.Endpoints(ctx, false)
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
		pending, err := s.store.PendingWakes(ctx)
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
			wait = s.opts.After(backoff)
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

// runClock expires leases whose deadline passed and re-offers those whose
// retry is due, then sleeps until the next deadline in the database: the
// deadlines survive a restart because they are read from SQLite each turn.
func (s *Service) runClock(ctx context.Context) {
	for {
		now := s.opts.Now()
		if changed, err := s.store.ExpireDue(ctx, now, s.timing); err != nil {
			s.log.Error("cannot expire leases; will try again", "error", err.Error())
		} else {
			for _, l := range changed {
				s.log.Info("lease ran out", "lease", l.ID, "state", l.State, "attempt", l.Attempt)
			}
		}
		if changed, err := s.store.ReofferDue(ctx, now, s.timing); err != nil {
			s.log.Error("cannot re-offer leases; will try again", "error", err.Error())
		} else if len(changed) > 0 {
			kick(s.wakerKick)
		}
		wait := time.Minute // something kicks the clock first when a lease changes
		if next, ok, err := s.store.NextDue(ctx); err != nil {
			wait = time.Second
		} else if ok {
			wait = min(wait, max(next.Sub(s.opts.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clockKick:
		case <-s.opts.After(wait):
		}
	}
}
