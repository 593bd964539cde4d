package store

import (
	"context"
	"encoding/json"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// CheckpointsOfLease lists the checkpoints recorded on a lease, oldest
// first, as the database holds them: explain tells each one in the task's
// story (a receipt says one was recorded, never its summary).
func (s *Checkpoints) CheckpointsOfLease(ctx context.Context, leaseID string) ([]lease.Checkpoint, error) {
	rows, err := s.DB.Query(ctx, `SELECT lease_id, COALESCE(task_id, ''), summary, files_changed, COALESCE(next_action, ''),
		COALESCE(blocked_reason, ''), recorded_at FROM checkpoints WHERE lease_id = ? ORDER BY id`, leaseID)
	if err != nil {
		return nil, storageErr(err, "read the checkpoints of lease "+leaseID)
	}
	defer rows.Close()
	var out []lease.Checkpoint
	for rows.Next() {
		var c lease.Checkpoint
		var files, blocked string
		var recorded int64
		if err := rows.Scan(&c.LeaseID, &c.TaskID, &c.Summary, &files, &c.NextAction, &blocked, &recorded); err != nil {
			return nil, storageErr(err, "read the checkpoints of lease "+leaseID)
		}
		if err := json.Unmarshal([]byte(files), &c.FilesChanged); err != nil {
			return nil, errs.Wrap(errs.Storage, err, "read the changed files of a checkpoint of %s", leaseID)
		}
		c.BlockedReason, c.RecordedAt = lease.BlockedReason(blocked), sqlitedb.FromMillis(recorded)
		out = append(out, c)
	}
	return out, storageErr(rows.Err(), "read the checkpoints of lease "+leaseID)
}
