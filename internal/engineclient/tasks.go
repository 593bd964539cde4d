package engineclient

import (
	"context"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// Tasks lists the tasks of the engine's last observation with where each
// stands, what needs a person first, page by page: the engine cuts an answer
// to fit one protocol frame.
func (c *Client) Tasks(ctx context.Context, args api.TasksArgs) (api.TasksResult, error) {
	out := api.TasksResult{Tasks: []api.TaskStanding{}}
	want := limit(args.Limit)
	for {
		var res api.TasksResult
		if err := c.Call(ctx, look, api.OpTasks, args, &res); err != nil {
			return out, err
		}
		out.ObservedAt, out.Counts = res.ObservedAt, res.Counts
		out.Tasks = append(out.Tasks, res.Tasks...)
		if !res.More || len(res.Tasks) == 0 || len(out.Tasks) >= want {
			return out, nil
		}
		args.Offset += len(res.Tasks)
		args.Limit = want - len(out.Tasks)
	}
}
