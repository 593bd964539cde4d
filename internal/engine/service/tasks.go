package service

import (
	"cmp"
	"context"
	"slices"

	"github.com/tmux-amq/tamq/internal/engine/standing"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// tasks lists every task of the last observation with where it stands.
func (sh *statusHandlers) tasks(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.TasksArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Kind != "" && !slices.Contains(standing.Kinds, standing.Kind(args.Kind)) {
		return nil, errs.New(errs.BadRequest, "%q is not a kind of standing (%v)", textsafe.Escape(args.Kind), standing.Kinds)
	}
	sh.observer.awaitFirstLook(ctx)
	// One view for the list and its time: the observer replaces it whole.
	view := sh.observer.explainView()
	all, err := sh.standings(ctx, view)
	if err != nil {
		return nil, err
	}
	res := taskList(all, args)
	res.StateHubUnreachableSince = sh.observer.stateHubUnreachableSince()
	if view.Observed {
		at := view.At.UTC()
		res.ObservedAt = &at
	}
	return res, nil
}

// taskList is the list of all the standings args asks for, one page of it,
// with the counts of all.
func taskList(all []api.TaskStanding, args api.TasksArgs) api.TasksResult {
	res := api.TasksResult{Counts: api.TaskCounts{}, Tasks: []api.TaskStanding{}}
	for _, t := range all {
		res.Counts[t.Kind]++
		if (args.Repo == "" || t.Repo == args.Repo) && (args.Kind == "" || t.Kind == args.Kind) {
			res.Tasks = append(res.Tasks, t)
		}
	}
	res.Tasks = res.Tasks[min(max(args.Offset, 0), len(res.Tasks)):]
	res.Tasks = res.Tasks[:min(api.ListLimit(args.Limit), len(res.Tasks))]
	res.Tasks, res.More = fitFrame(res.Tasks, false)
	return res
}

// standings are the standings of every task of view (the last
// observation), what needs a person first, then by workplan, priority and id.
func (sh *statusHandlers) standings(ctx context.Context, view *ExplainView) ([]api.TaskStanding, error) {
	if !view.Observed {
		return nil, nil
	}
	dialogs := map[string]string{}
	for _, d := range sh.leaseOps.atDialog(ctx) {
		dialogs[d.LeaseID] = d.Dialog
	}
	now := sh.clock.Now()
	out := make([]api.TaskStanding, 0, len(view.Tasks))
	for _, tv := range view.Tasks {
		f := standing.Facts{Task: tv, Dialogs: dialogs, Now: now, Held: sh.claimer.heldFacts(tv.ID, now)}
		trs, err := sh.store.Triggers.TriggersOfTask(ctx, tv.ID)
		if err != nil {
			return nil, err
		}
		f.Triggers = trs
		for _, tr := range trs {
			ls, err := sh.store.LeaseLists.LeasesOfTrigger(ctx, tr.ID)
			if err != nil {
				return nil, err
			}
			f.Leases = append(f.Leases, ls...)
		}
		t := taskStanding(f, standing.Of(f))
		t.URL = sh.opts.Hub.Link(t.ID)
		out = append(out, t)
	}
	sortStandings(out)
	return out, nil
}

// sortStandings orders standings by what needs a person first, then by
// workplan, priority and id.
func sortStandings(out []api.TaskStanding) {
	slices.SortFunc(out, func(a, b api.TaskStanding) int {
		return cmp.Or(cmp.Compare(standing.Kind(a.Kind).Rank(), standing.Kind(b.Kind).Rank()),
			cmp.Compare(a.Workplan, b.Workplan), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
}

// taskStanding is the wire form of a task and its standing.
func taskStanding(f standing.Facts, s standing.Standing) api.TaskStanding {
	t := f.Task
	out := api.TaskStanding{ID: t.ID, Repo: t.Repo, Workplan: t.Workplan, Status: t.Status, Priority: t.Priority,
		Kind: string(s.Kind), Words: s.Words, Gate: s.Gate, GateReason: s.GateReason, Skipped: s.Skipped, Wait: s.Wait, HeldBy: s.HeldBy, Dependency: s.Dependency,
		LeaseID: s.LeaseID, Attempt: s.Attempt, MaxAttempts: s.MaxAttempts, Dialog: s.Dialog, AckedBy: s.AckedBy,
		AckedAt: optionalTime(s.AckedAt), RenewedAt: optionalTime(s.RenewedAt), RetryAt: optionalTime(s.RetryAt)}
	for _, d := range t.Deps {
		out.DependsOn = append(out.DependsOn, d.ID)
	}
	return out
}
