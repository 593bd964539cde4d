package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// LatestCheckpoint reads the last checkpoint recorded on a lease; nil when
// it has none.
func (s *Checkpoints) LatestCheckpoint(ctx context.Context, leaseID string) (*lease.Checkpoint, error) {
	return s.latestCheckpoint(ctx, `lease_id = ?`, leaseID)
}

// LatestTaskCheckpoint reads the last checkpoint recorded about a task,
// whatever lease it was recorded on; nil when there is none. A new lease of
// the task (its agent blocked, and a person set the task back to todo)
// resumes from it.
func (s *Checkpoints) LatestTaskCheckpoint(ctx context.Context, taskID string) (*lease.Checkpoint, error) {
	return s.latestCheckpoint(ctx, `task_id = ?`, taskID)
}

const checkpointColumns = `lease_id, COALESCE(task_id, ''), summary, files_changed, COALESCE(next_action, ''),
	COALESCE(blocked_reason, ''), recorded_at, COALESCE(attempt, 0), COALESCE(statehub_id, '')`

func scanCheckpoint(row scanner) (lease.Checkpoint, error) {
	var c lease.Checkpoint
	var files, blocked string
	var recorded int64
	if err := row.Scan(&c.LeaseID, &c.TaskID, &c.Summary, &files, &c.NextAction, &blocked, &recorded, &c.Attempt, &c.SourceID); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(files), &c.FilesChanged); err != nil {
		return c, errs.Wrap(errs.Storage, err, "read the changed files of a checkpoint of lease %s", c.LeaseID)
	}
	c.BlockedReason, c.RecordedAt = lease.BlockedReason(blocked), sqlitedb.FromMillis(recorded)
	return c, nil
}

func (s *Checkpoints) latestCheckpoint(ctx context.Context, where string, arg string) (*lease.Checkpoint, error) {
	c, err := scanCheckpoint(s.DB.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE `+where+` ORDER BY id DESC LIMIT 1`, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storageErr(err, "read the latest checkpoint of "+arg)
	}
	return &c, nil
}

// CheckpointFilter selects checkpoints: of a task, of a lease, at most
// Limit (0: all), skipping the newest Offset (the next page).
type CheckpointFilter struct {
	TaskID  string
	LeaseID string
	Limit   int
	Offset  int
}

// List lists the checkpoints recorded, newest first. They stay local: what
// an agent wrote in them is never published.
func (s *Checkpoints) List(ctx context.Context, f CheckpointFilter) ([]lease.Checkpoint, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.DB.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE (?1 = '' OR task_id = ?1) AND (?2 = '' OR lease_id = ?2) ORDER BY id DESC LIMIT ?3 OFFSET ?4`,
		f.TaskID, f.LeaseID, limit, max(f.Offset, 0))
	out, err := readAll(rows, err, scanCheckpoint)
	return out, storageErr(err, "read checkpoints")
}

// LatestCheckpointOfTask is when the engine last recorded a checkpoint about
// task (zero when never): a checkpoint observed in State Hub that is older
// resumes nothing.
func (s *Checkpoints) LatestCheckpointOfTask(ctx context.Context, task string) (time.Time, error) {
	var at sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT max(recorded_at) FROM checkpoints WHERE task_id = ?`, task).Scan(&at)
	if err != nil || !at.Valid {
		return time.Time{}, storageErr(err, "read the checkpoints of task "+task)
	}
	return sqlitedb.FromMillis(at.Int64), nil
}

// CheckpointRecorded reports whether State Hub's checkpoint id was recorded.
func (s *Checkpoints) CheckpointRecorded(ctx context.Context, statehubID string) (bool, error) {
	var n int
	err := s.DB.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE statehub_id = ?`, statehubID).Scan(&n)
	return n > 0, storageErr(err, "look up checkpoint "+statehubID)
}
