package engineclient

import (
	"context"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// Tasks lists the tasks of the engine's last observation with where each
// stands, what needs a person first, page by page: the engine cuts an answer
// to fit one protocol frame.
func (c *Client) Tasks(ctx context.Context, args api.TasksArgs) (api.TasksResult, error) {
	var out api.TasksResult
	var err error
	out.Tasks, err = api.Gather(args.Offset, args.Limit, func(offset, limit int) ([]api.TaskStanding, bool, error) {
		args.Offset, args.Limit = offset, limit
		var res api.TasksResult
		err := c.Call(ctx, look, api.OpTasks, args, &res)
		out.ObservedAt, out.Counts, out.StateHubUnreachableSince = res.ObservedAt, res.Counts, res.StateHubUnreachableSince
		return res.Tasks, res.More, err
	})
	return out, err
}
