package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// explain tells why a task was or was not woken (spec section 7): what the
// last observation said of it and its dependencies, and the engine's
// triggers, gates, leases and wakes about it, from its receipts.
func (sh *statusHandlers) explain(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.ExplainArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	sh.observer.awaitFirstLook(ctx)
	res, err := Explain(ctx, sh.store, args.Task, sh.observer.explainView())
	res.URL = sh.opts.Hub.Link(args.Task)
	sh.claimer.explainHeld(&res)
	return res, err
}

// ExplainView is the running engine's last observation of State Hub, for
// Explain; Observed is false before the first look answered.
type ExplainView struct {
	Observed bool
	At       time.Time
	observe.Observation
}

// Explain answers explain from the engine's database and, when the engine
// runs, its last observation (view); a nil view means the engine is not
// running (the command reads its database offline): the result says so.
// Both tell the task's timeline (explain_timeline.go) from the same records.
func Explain(ctx context.Context, st *store.Store, task string, view *ExplainView) (api.ExplainResult, error) {
	if p := textsafe.NameProblem(task); p != "" {
		return api.ExplainResult{}, errs.New(errs.BadRequest, "task id %q: %s", textsafe.Escape(task), p)
	}
	args := api.ExplainArgs{Task: task}
	res := api.ExplainResult{Task: args.Task, Dependencies: []api.ExplainDep{}, Dependents: []api.ExplainDep{}, Triggers: []api.ExplainTrigger{}}
	// The observation's part: none offline or before the first look.
	func(v *ExplainView) {
		if v == nil || !v.Observed {
			return
		}
		polled := v.At.UTC()
		res.ObservedAt = &polled
		tv, ok := v.Tasks[args.Task]
		if !ok {
			return
		}
		res.Observed = true
		res.Status, res.Revision, res.Repo, res.Workplan = tv.Status, tv.Revision, tv.Repo, tv.Workplan
		res.WorkplanStatus, res.Priority, res.Actionable, res.Waiting = tv.WorkplanStatus, tv.Priority, tv.Actionable, tv.Waiting
		res.Skipped = tv.Skipped
		if tv.Open() {
			// A gate stands in the way of work to do; a task that ended
			// has none, whatever its labels still say.
			res.Gate, res.GateReason = tv.Gate, tv.GateReason
		}
		for _, d := range tv.Deps {
			res.Dependencies = append(res.Dependencies, api.ExplainDep{ID: d.ID, Status: d.Status, Repo: d.Repo, Found: d.Found, Done: d.Status == "done"})
		}
		for id, other := range v.Tasks {
			if slices.ContainsFunc(other.Deps, func(d observe.Dep) bool { return d.ID == args.Task }) {
				res.Dependents = append(res.Dependents, api.ExplainDep{ID: id, Status: other.Status, Repo: other.Repo, Found: true, Done: other.Status == "done"})
			}
		}
		slices.SortFunc(res.Dependents, func(a, b api.ExplainDep) int { return cmp.Compare(a.ID, b.ID) })
	}(view)
	trs, err := st.Triggers.TriggersOfTask(ctx, args.Task)
	if err != nil {
		return res, err
	}
	// A task neither State Hub (at the last look) nor the engine's records
	// know is most likely a mistyped id: not_found, not an answer that
	// exits 0. Before the first look the engine cannot tell, and answers.
	switch {
	case len(trs) > 0:
	case view == nil:
		return res, errs.New(errs.NotFound, "task %s: coordination-engine's database has no record of it (the engine is not running, and State Hub is observed only while it runs)", task).
			WithHint("check the id; to see what State Hub says of it, start the engine (coordination-engine start --detach) and ask again")
	case view.Observed && !res.Observed:
		return res, errs.New(errs.NotFound, "task %s: State Hub has no such task (last observed %s) and coordination-engine has no record of it", task, res.ObservedAt.Format(time.RFC3339)).
			WithHint("check the id: `coordination-engine tasks` lists the tasks State Hub has")
	}
	stories := make([]triggerStory, 0, len(trs))
	for _, t := range trs {
		et := api.ExplainTrigger{Trigger: api.TriggerOf(t), Leases: []api.ExplainLease{}}
		if t.State == lease.TriggerGated {
			res.NextRetry = earliest(res.NextRetry, t.NextCheckAt)
		}
		// One read of the trigger's receipts serves its gate, its leases'
		// wakes and the timeline: a lease's receipts name its trigger.
		rs, err := st.Receipts.List(ctx, store.ReceiptFilter{TriggerID: t.ID})
		if err != nil {
			return res, err
		}
		if t.State == lease.TriggerGated || t.State == lease.TriggerStopped {
			for _, r := range rs {
				if r.Kind == store.KindTriggerStopped || r.Kind == store.KindTriggerGated || r.Kind == store.KindLeaseStopped {
					et.Why = r.Reason
				}
			}
		}
		ls, err := st.LeaseLists.LeasesOfTrigger(ctx, t.ID)
		if err != nil {
			return res, err
		}
		for _, l := range ls {
			el := api.ExplainLease{Lease: api.LeaseOf(l), Wakes: []api.ExplainWake{}}
			if l.State == lease.RetryWait {
				res.NextRetry = earliest(res.NextRetry, l.NextRetryAt)
			}
			for _, r := range rs {
				if r.LeaseID == l.ID && (r.Kind == store.KindWakeSent || r.Kind == store.KindWakeFailed) {
					el.Wakes = append(el.Wakes, api.ExplainWake{Attempt: r.Attempt, Status: r.Status, MessageID: r.LocalMessageID, Reason: r.Reason, At: r.At.UTC()})
				}
			}
			et.Leases = append(et.Leases, el)
		}
		res.Triggers = append(res.Triggers, et)
		stories = append(stories, triggerStory{t: t, ls: ls, rs: rs})
	}
	if res.Timeline, err = timeline(ctx, st, res, stories); err != nil {
		return res, err
	}
	res.Verdict = verdict(res)
	if view == nil {
		res.Offline = true
		res.Verdict = "coordination-engine is not running; from its database as last written: " + verdict(res)
	}
	return res, nil
}

// verdict says in one sentence where the task stands: the live lease of any
// of its triggers first (one agent at a time works on a task), else the
// latest trigger about it, else the observation. A task not woken for its
// latest revision that was woken for an earlier one says so, naming that
// wake: an agent may have worked on it.
func verdict(r api.ExplainResult) string {
	v := latestVerdict(r)
	if before := earlierWake(r); before != "" && strings.HasPrefix(v, "not woken") {
		v = "not woken again" + strings.TrimPrefix(v, "not woken") + "; " + before
	}
	return v
}

// earlierWake names the newest wake tamq took (it queued the prompt) for a
// trigger before the task's latest one, or "".
func earlierWake(r api.ExplainResult) string {
	for i := len(r.Triggers) - 2; i >= 0; i-- {
		t := r.Triggers[i]
		for j := len(t.Leases) - 1; j >= 0; j-- {
			l := t.Leases[j]
			for k := len(l.Wakes) - 1; k >= 0; k-- {
				if w := l.Wakes[k]; w.MessageID != "" && w.Status != tamqapi.WakeUnavailable {
					return fmt.Sprintf("woken before, for revision %s: lease %s (now %s), attempt %d, tamq message %s at %s",
						t.SourceRevision, l.LeaseID, l.State, w.Attempt, w.MessageID, w.At.Format(time.RFC3339))
				}
			}
		}
	}
	return ""
}

// latestVerdict is verdict without what earlier triggers did.
func latestVerdict(r api.ExplainResult) string {
	for i := len(r.Triggers) - 1; i >= 0; i-- {
		t := r.Triggers[i]
		if m := len(t.Leases); m > 0 && lease.State(t.Leases[m-1].State).Live() {
			l := t.Leases[m-1]
			v := fmt.Sprintf("%s: lease %s is %s, attempt %d of %d", woken(t.Trigger), l.LeaseID, l.State, l.Attempt, l.MaxAttempts)
			if l.State == string(lease.RetryWait) && t.WaitingFor != "" {
				v += "; its next attempt waits: " + t.WaitingFor
			}
			return v
		}
	}
	if r.Skipped != "" {
		// Its triggers, if any, are of revisions before the one skipped.
		return "not woken: skipped by the engine: " + r.Skipped + "; mend the task in State Hub"
	}
	if n := len(r.Triggers); n > 0 {
		t := r.Triggers[n-1]
		var l *api.ExplainLease
		if m := len(t.Leases); m > 0 {
			l = &t.Leases[m-1]
		}
		switch {
		case l != nil && l.State == string(lease.Completed):
			return fmt.Sprintf("%s; lease %s completed", woken(t.Trigger), l.LeaseID)
		case l != nil && l.Released == string(lease.ResultBlocked):
			return fmt.Sprintf("%s; lease %s stopped: %s; it is woken again when State Hub changes the task", woken(t.Trigger), l.LeaseID, l.StopReason)
		case l != nil:
			return fmt.Sprintf("%s; lease %s stopped: %s", woken(t.Trigger), l.LeaseID, l.StopReason)
		case (t.State == string(lease.TriggerStopped) || t.State == string(lease.TriggerGated)) &&
			t.WokenBy != "operator" && observe.OtherRevision(r.Revision, t.SourceRevision):
			// The gate held a revision State Hub has since changed (its
			// label lifted) into one not actionable: the observation says why.
		case t.State == string(lease.TriggerStopped):
			return "not woken: stopped at gate " + t.GateReason + why(t.Why)
		case t.State == string(lease.TriggerGated):
			return "not woken yet: held at gate " + t.GateReason + why(t.Why) + "; checked again later"
		case t.State == string(lease.TriggerSuperseded):
			return "not woken: its trigger was superseded by a newer revision"
		case t.State == string(lease.TriggerPending) && t.WaitingFor != "":
			return "waiting: " + t.WaitingFor + "; woken as soon as that changes"
		case t.State == string(lease.TriggerPending):
			return "not woken yet: judged at the next observation"
		}
	}
	switch {
	case r.ObservedAt == nil:
		return "not woken: State Hub has not been observed yet"
	case !r.Observed:
		return "not woken: State Hub's last observation has no task " + r.Task
	case !r.Actionable:
		return "not woken: " + r.Waiting
	}
	return "actionable: the next observation takes it"
}

// woken says what woke a task's agent, and who asked: an operator's
// coordination-engine wake, or what State Hub showed.
func woken(t api.Trigger) string {
	if t.WokenBy == "operator" {
		return "woken by the operator (coordination-engine wake) at " + t.ObservedAt.Format(time.RFC3339)
	}
	return "woken (" + t.Reason + ")"
}

// why puts a reason in parentheses, when there is one.
func why(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// earliest is the earlier of an optional time and t (zero: unset).
func earliest(cur *time.Time, t time.Time) *time.Time {
	if t.IsZero() {
		return cur
	}
	t = t.UTC()
	if cur == nil || t.Before(*cur) {
		return &t
	}
	return cur
}
