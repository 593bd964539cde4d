package store

import (
	"context"

	"github.com/tmux-amq/tamq/internal/lease"
)

// CheckpointsOfLease lists the checkpoints recorded on a lease, oldest
// first, as the database holds them: explain tells each one in the task's
// story (a receipt says one was recorded, never its summary).
func (s *Checkpoints) CheckpointsOfLease(ctx context.Context, leaseID string) ([]lease.Checkpoint, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE lease_id = ? ORDER BY id`, leaseID)
	out, err := readAll(rows, err, scanCheckpoint)
	return out, storageErr(err, "read the checkpoints of lease "+leaseID)
}
