package engineclient

import (
	"context"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// Checkpoints lists the checkpoints the engine recorded, newest first, page
// by page: the engine cuts an answer to fit one protocol frame.
func (c *Client) Checkpoints(ctx context.Context, args api.CheckpointsArgs) (api.CheckpointsResult, error) {
	out := api.CheckpointsResult{Checkpoints: []api.Checkpoint{}}
	want := limit(args.Limit)
	for {
		var res api.CheckpointsResult
		if err := c.Call(ctx, look, api.OpCheckpoints, args, &res); err != nil {
			return out, err
		}
		out.Checkpoints = append(out.Checkpoints, res.Checkpoints...)
		if !res.More || len(res.Checkpoints) == 0 || len(out.Checkpoints) >= want {
			return out, nil
		}
		args.Offset += len(res.Checkpoints)
		args.Limit = want - len(out.Checkpoints)
	}
}
