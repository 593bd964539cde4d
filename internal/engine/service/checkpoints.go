package service

import (
	"context"
	"encoding/json"

	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func (sh *statusHandlers) checkpoints(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.CheckpointsArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return ListCheckpoints(ctx, sh.store, args)
}

// ListCheckpoints is the checkpoint listing of st: newest first, one page
// that fits a frame. The engine answers it (to the operator only: an
// agent's words about its work stay on this machine), and its commands read
// it offline.
func ListCheckpoints(ctx context.Context, st *store.Store, args api.CheckpointsArgs) (api.CheckpointsResult, error) {
	cs, err := st.Checkpoints.List(ctx, store.CheckpointFilter{TaskID: args.TaskID, LeaseID: args.LeaseID,
		Limit: api.ListLimit(args.Limit), Offset: max(args.Offset, 0)})
	if err != nil {
		return api.CheckpointsResult{}, err
	}
	res := api.CheckpointsResult{Checkpoints: []api.Checkpoint{}}
	for _, c := range cs {
		files := c.FilesChanged
		if files == nil {
			files = []string{}
		}
		res.Checkpoints = append(res.Checkpoints, fitCheckpoint(api.Checkpoint{
			LeaseID: c.LeaseID, TaskID: c.TaskID, Attempt: c.Attempt, RecordedAt: c.RecordedAt.UTC(),
			Summary: c.Summary, NextAction: c.NextAction, FilesChanged: files,
			BlockedReason: string(c.BlockedReason), StateHubID: c.SourceID,
		}))
	}
	res.Checkpoints, res.More = fitFrame(res.Checkpoints, false)
	return res, nil
}

// fitCheckpoint leaves out changed files at the end until the checkpoint
// takes at most half a frame, so every page holds at least one: a
// checkpoint at its limits (a summary and a next action of 4 KiB, 100 file
// names of 1 KiB) is larger than a frame, and one that fit no page would
// end the listing there.
func fitCheckpoint(c api.Checkpoint) api.Checkpoint {
	for len(c.FilesChanged) > 0 {
		b, _ := json.Marshal(c) // wire types always marshal
		if len(b) <= frameBudget/2 {
			break
		}
		c.FilesChanged = c.FilesChanged[:len(c.FilesChanged)-1]
		c.FilesOmitted++
	}
	return c
}
