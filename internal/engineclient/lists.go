package engineclient

import (
	"context"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// Checkpoints lists the checkpoints the engine recorded, newest first, page
// by page: the engine cuts an answer to fit one protocol frame.
func (c *Client) Checkpoints(ctx context.Context, args api.CheckpointsArgs) (api.CheckpointsResult, error) {
	var err error
	out := api.CheckpointsResult{}
	out.Checkpoints, err = api.Gather(args.Offset, args.Limit, func(offset, limit int) ([]api.Checkpoint, bool, error) {
		args.Offset, args.Limit = offset, limit
		var res api.CheckpointsResult
		err := c.Call(ctx, look, api.OpCheckpoints, args, &res)
		return res.Checkpoints, res.More, err
	})
	return out, err
}
