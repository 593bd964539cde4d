package cluster

import (
	"context"
	"net/url"

	"github.com/tmux-amq/tamq/internal/errs"
)

// checkpointsDir holds the latest checkpoint of each task, written by the
// host whose agent made it: the host that takes the task after that one
// died resumes from it. It outlives claims (no TTL): a checkpoint is what
// the next attempt starts from, whoever makes it.
const checkpointsDir = "/checkpoints/"

// maxCheckpoint bounds a stored checkpoint: the engine's are a summary,
// a next action and file names, far below etcd's request limit (1.5 MiB).
const maxCheckpoint = 64 << 10

func checkpointKey(prefix, taskID string) (string, error) {
	if _, err := taskKey(prefix, taskID); err != nil {
		return "", err
	}
	return prefix + checkpointsDir + url.PathEscape(taskID), nil
}

// PutCheckpoint stores data as the latest checkpoint of taskID.
func (c *Claims) PutCheckpoint(ctx context.Context, taskID string, data []byte) error {
	key, err := checkpointKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	if len(data) > maxCheckpoint {
		return errs.New(errs.BadRequest, "cluster: the checkpoint of task %s is %d bytes, over %d", taskID, len(data), maxCheckpoint)
	}
	cctx, cancel := c.call(ctx)
	_, err = c.cli.Put(cctx, key, string(data))
	cancel()
	return c.failed(ctx, err, "store the checkpoint of task "+taskID)
}

// Checkpoint is the latest checkpoint stored for taskID; false when none is.
func (c *Claims) Checkpoint(ctx context.Context, taskID string) ([]byte, bool, error) {
	key, err := checkpointKey(c.cfg.Prefix, taskID)
	if err != nil {
		return nil, false, err
	}
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, key)
	cancel()
	if err != nil {
		return nil, false, c.failed(ctx, err, "read the checkpoint of task "+taskID)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}
