package service

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
)

// OfflineTasks answers tasks from the engine's database while the engine is
// not running: every task it has a trigger of, where its triggers and
// leases leave it (a gate, a lease live or waiting to retry, retries
// exhausted, work released blocked). State Hub is observed only while the
// engine runs, so a task's status there is unknown ("") and a task the
// engine never had a trigger of is not listed.
func OfflineTasks(ctx context.Context, st *store.Store, args api.TasksArgs, now time.Time) (api.TasksResult, error) {
	trs, err := st.Triggers.TaskTriggers(ctx)
	if err != nil {
		return api.TasksResult{}, err
	}
	byTask := map[string][]lease.Trigger{}
	var order []string
	for _, tr := range trs {
		if _, ok := byTask[tr.TaskID]; !ok {
			order = append(order, tr.TaskID)
		}
		byTask[tr.TaskID] = append(byTask[tr.TaskID], tr)
	}
	all := make([]api.TaskStanding, 0, len(order))
	for _, id := range order {
		f := standing.Facts{Triggers: byTask[id], Now: now}
		latest := f.Triggers[len(f.Triggers)-1]
		f.Task = observe.TaskView{ID: id, Repo: latest.TargetRepo, Workplan: latest.WorkplanID,
			Waiting: "State Hub is not observed while the engine is stopped; its latest trigger is " + string(latest.State)}
		for _, tr := range f.Triggers {
			ls, err := st.LeaseLists.LeasesOfTrigger(ctx, tr.ID)
			if err != nil {
				return api.TasksResult{}, err
			}
			f.Leases = append(f.Leases, ls...)
		}
		all = append(all, taskStanding(f, standing.Of(f)))
	}
	sortStandings(all)
	res := taskList(all, args)
	res.Offline = true
	return res, nil
}
