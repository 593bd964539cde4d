package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// wakeHandler is the operator's manual wake. It takes no new lease once
// the engine is stopping.
type wakeHandler struct {
	store    *store.Store
	log      *slog.Logger
	clock    clock.Clock
	registry func() (*gita.Registry, error)
	timing   lease.Timing
	// router says where the wake may go, or why it waits or stops.
	router interface {
		hostsOf(ctx context.Context, repo, endpoint string) ([]lease.Endpoint, error)
		busyWith(ctx context.Context, repo, except string) (string, error)
		judgeRoute(ctx context.Context, t lease.Trigger, reg func() (*gita.Registry, error), ask routeAsk) (observe.Routing, lease.Wait, error)
	}
	// view is the observer's last look: the task's gates.
	view     *hubView
	offers   leaseOffers
	stopping atomic.Bool
}

func (wh *wakeHandler) ops() ops {
	return ops{api.OpWake: {door.OperatorOnly, wh.wake}}
}

// stopTakingLeases makes every wake from now on refused: the engine is
// stopping.
func (wh *wakeHandler) stopTakingLeases() { wh.stopping.Store(true) }

// wake is the operator's manual trigger: a trigger like an observed one,
// through the same gates, lease and wake path. One live lease per task,
// whoever asks: naming a task whose lease lives answers with that lease and
// sends nothing; a repo whose agent holds a lease gets another only with
// force.
func (wh *wakeHandler) wake(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.WakeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	reg, existing, err := wh.admit(ctx, args)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return *existing, nil
	}
	taskGate, taskGateReason, err := wh.gateOf(args)
	if err != nil {
		return nil, err
	}
	now := wh.clock.Now()
	sourceID := args.Task
	if sourceID == "" {
		sourceID = "manual:" + args.Repo
	}
	t, _, err := wh.store.Triggers.AddTrigger(ctx, lease.Trigger{
		Source: lease.SourceTask, SourceID: sourceID, TaskID: args.Task,
		// Each operator command is a new revision: waking twice on purpose
		// is two triggers, not one collapsed observation.
		SourceRevision: api.OperatorRevision + now.Format("20060102T150405.000Z"),
		TargetRepo:     args.Repo, Reason: lease.TaskActionable, ObservedAt: now,
	})
	if err != nil {
		return nil, err
	}
	r, wait, err := wh.router.judgeRoute(ctx, t, func() (*gita.Registry, error) { return reg, nil }, routeAsk{Endpoint: args.EndpointID, Force: args.Force})
	if err != nil {
		return nil, err
	}
	if err := wh.throughTaskGate(ctx, t, &r, args, taskGate, taskGateReason); err != nil {
		return nil, err
	}
	res := api.WakeResult{Trigger: api.TriggerOf(t)}
	if r.Gate != "" {
		if r.Gate == observe.GateAmbiguous {
			r.Reason += "; name one with --endpoint"
		}
		if err := wh.store.Triggers.StopTrigger(ctx, t.ID, r.Gate, r.Reason); err != nil {
			return nil, err
		}
		res.Trigger.State, res.Trigger.GateReason = string(lease.TriggerStopped), r.Gate
		res.Stopped, res.Reason = r.Gate, r.Reason
		return res, nil
	}
	if wait != "" {
		return wh.waitFor(ctx, t, res, wait, r.Reason)
	}
	// Where it may go, a manual wake takes the judge's path: claimed
	// across hosts, offered, and its wake sent while the operator waits
	// for tamq's answer.
	l, wait, why, err := wh.offers.offer(ctx, t, r.EndpointID, nil)
	switch {
	case wait != "":
		return wh.waitFor(ctx, t, res, wait, why)
	case errs.Is(err, errs.Conflict):
		// A look of the judge took this very trigger up meanwhile (it
		// saw it waiting, as an operator's wake may): it is woken all
		// the same, under the judge's lease.
		taken, lerr := wh.takenUp(ctx, t.ID)
		if lerr != nil || taken == nil {
			return nil, err
		}
		l = *taken
	case err != nil:
		return nil, err
	}
	res.Trigger.State = string(lease.TriggerLeased)
	out := api.LeaseOf(l)
	res.Lease = &out
	return res, nil
}

// admit checks what the operator asks before anything is recorded: a task
// id fit to print, a repo gita registers now (the registry, read afresh, is
// returned for the route), an attached endpoint if one is named. A task
// whose lease lives gets that lease as the answer (existing), and a repo
// whose agent holds a lease is refused unless forced.
func (wh *wakeHandler) admit(ctx context.Context, args api.WakeArgs) (reg *gita.Registry, existing *api.WakeResult, err error) {
	if wh.stopping.Load() {
		return nil, nil, errs.New(errs.ShuttingDown, "coordination-engine is stopping and takes no new leases")
	}
	if args.Task != "" {
		if p := textsafe.NameProblem(args.Task); p != "" {
			return nil, nil, errs.New(errs.BadRequest, "task id %q: %s", textsafe.Escape(args.Task), p)
		}
	}
	if reg, err = wh.registry(); err != nil {
		return nil, nil, err
	}
	if _, ok := reg.Lookup(args.Repo); !ok {
		return nil, nil, errs.New(errs.UnknownTarget, "%q is not a gita-registered repo", textsafe.Escape(args.Repo)).
			WithHint("see `coordination-engine repos`")
	}
	if args.EndpointID != "" {
		if eps, err := wh.router.hostsOf(ctx, args.Repo, args.EndpointID); err != nil {
			return nil, nil, err
		} else if len(eps) == 0 {
			return nil, nil, errs.New(errs.Unavailable, "endpoint %s is not attached or has no window for %s", textsafe.Escape(args.EndpointID), args.Repo).
				WithHint("see the endpoints in `coordination-engine status`")
		}
	}
	if args.Task != "" {
		l, live, err := wh.store.LeaseLists.LiveLeaseOfTask(ctx, args.Task)
		if err != nil || !live {
			return reg, nil, err
		}
		t, err := wh.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return nil, nil, err
		}
		out := api.LeaseOf(l)
		return reg, &api.WakeResult{Trigger: api.TriggerOf(t), Lease: &out, Existing: true,
			Reason: fmt.Sprintf("task %s already has lease %s (%s, attempt %d of %d); nothing new was sent", args.Task, l.ID, l.State, l.Attempt, l.Attempts())}, nil
	}
	if !args.Force {
		if busy, err := wh.router.busyWith(ctx, args.Repo, ""); err != nil {
			return nil, nil, err
		} else if busy != "" {
			return nil, nil, errs.New(errs.Conflict, "%s has a live lease: %s", args.Repo, busy).
				WithHint("wait for it to end, name the task with --task, or add a second lease with --force")
		}
	}
	return reg, nil, nil
}

// gateOf is the gate the named task stands at, if any: the task's own gates
// hold for a manual wake as for an observed change, unless the operator
// names the gate to go through (--override-gate), which must be that one.
func (wh *wakeHandler) gateOf(args api.WakeArgs) (gate, reason string, err error) {
	if tv, ok := wh.view.task(args.Task); ok && args.Task != "" {
		gate, reason = tv.Gate, tv.GateReason
	}
	switch {
	case args.OverrideGate != "" && gate == "":
		return "", "", errs.New(errs.BadRequest, "task %s is stopped at no gate; --override-gate %s overrides nothing", args.Task, textsafe.Escape(args.OverrideGate))
	case args.OverrideGate != "" && args.OverrideGate != gate:
		return "", "", errs.New(errs.BadRequest, "task %s is stopped at gate %s, not %s", args.Task, gate, textsafe.Escape(args.OverrideGate)).
			WithHint("name the gate that stops it: --override-gate %s", gate)
	}
	return gate, reason, nil
}

// throughTaskGate stops the route at the task's gate, or, where the
// operator named that gate, records that they went through it.
func (wh *wakeHandler) throughTaskGate(ctx context.Context, t lease.Trigger, r *observe.Routing, args api.WakeArgs, gate, reason string) error {
	switch {
	case gate != "" && args.OverrideGate == "" && r.Gate == "":
		r.Gate, r.Reason = gate, reason+"; a person who means to go through wakes it with --override-gate "+gate
	case gate != "":
		rc := receipt.Receipt{Kind: store.KindGateOverridden, TriggerID: t.ID, Status: gate,
			Reason: "the operator woke task " + args.Task + " through gate " + gate,
			Detail: callerDetail(callerFrom(ctx), map[string]any{"task_id": args.Task, "trigger_id": t.ID, "gate": gate})}
		return wh.store.Receipts.AddReceipt(ctx, rc)
	}
	return nil
}

// waitFor leaves the operator's trigger waiting, with why, and says so.
func (wh *wakeHandler) waitFor(ctx context.Context, t lease.Trigger, res api.WakeResult, wait lease.Wait, why string) (any, error) {
	if err := wh.store.Triggers.WaitTrigger(ctx, t.ID, wait, why); err != nil {
		return nil, err
	}
	res.Trigger.Waiting, res.Trigger.WaitingFor = string(wait), why
	res.Waiting, res.Reason = string(wait), why
	return res, nil
}

// takenUp is the live lease of a trigger, when it has one.
func (wh *wakeHandler) takenUp(ctx context.Context, triggerID string) (*lease.Lease, error) {
	ls, err := wh.store.LeaseLists.LeasesOfTrigger(ctx, triggerID)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		if ls[i].State.Live() {
			return &ls[i], nil
		}
	}
	return nil, nil
}

// notAnswered says tamq did not answer a wake (not running, slow, stopping,
// or the engine itself is stopping): the same request is sent again later.
func notAnswered(err error) bool {
	return errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Timeout) || errs.Is(err, errs.ShuttingDown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
