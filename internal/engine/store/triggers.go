package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

const triggerColumns = `id, source, source_id, source_revision, target_repo, COALESCE(target_agent, ''), COALESCE(task_id, ''),
	COALESCE(workplan_id, ''), COALESCE(title, ''), COALESCE(sender, ''),
	reason, state, COALESCE(gate_reason, ''), gate_checks, COALESCE(next_check_at, 0), observed_at, updated_at,
	COALESCE(wait_reason, ''), COALESCE(wait_detail, ''), COALESCE(checkpoint, '')`

type scanner interface{ Scan(...any) error }

func scanTrigger(row scanner) (lease.Trigger, error) {
	var tr lease.Trigger
	var source, reason, state, wait, resume string
	var observed, updated, nextCheck int64
	err := row.Scan(&tr.ID, &source, &tr.SourceID, &tr.SourceRevision, &tr.TargetRepo, &tr.TargetAgent, &tr.TaskID,
		&tr.WorkplanID, &tr.Title, &tr.Sender,
		&reason, &state, &tr.GateReason, &tr.GateChecks, &nextCheck, &observed, &updated,
		&wait, &tr.WaitDetail, &resume)
	if err != nil {
		return tr, err
	}
	tr.Source, tr.Reason, tr.State, tr.Wait = lease.Source(source), lease.Reason(reason), lease.TriggerState(state), lease.Wait(wait)
	tr.ObservedAt, tr.UpdatedAt, tr.NextCheckAt = sqlitedb.FromMillis(observed), sqlitedb.FromMillis(updated), sqlitedb.TimeOrZero(nextCheck)
	if resume != "" {
		var cp storedCheckpoint
		if err := json.Unmarshal([]byte(resume), &cp); err != nil {
			return tr, errs.Wrap(errs.Storage, err, "read the checkpoint trigger %s resumes from", tr.ID)
		}
		tr.Resume = cp.domain()
	}
	return tr, nil
}

// storedCheckpoint is the checkpoint a checkpoint_resume trigger keeps, as
// JSON in its row.
type storedCheckpoint struct {
	LeaseID       string    `json:"lease_id,omitempty"`
	TaskID        string    `json:"task_id,omitempty"`
	Summary       string    `json:"summary"`
	FilesChanged  []string  `json:"files_changed,omitempty"`
	NextAction    string    `json:"next_action,omitempty"`
	BlockedReason string    `json:"blocked_reason,omitempty"`
	RecordedAt    time.Time `json:"recorded_at"`
}

func (c storedCheckpoint) domain() *lease.Checkpoint {
	return &lease.Checkpoint{LeaseID: c.LeaseID, TaskID: c.TaskID, Summary: c.Summary, FilesChanged: c.FilesChanged,
		NextAction: c.NextAction, BlockedReason: lease.BlockedReason(c.BlockedReason), RecordedAt: c.RecordedAt}
}

// resumeJSON is the column value of a trigger's resumed checkpoint.
func resumeJSON(c *lease.Checkpoint) (any, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(storedCheckpoint{LeaseID: c.LeaseID, TaskID: c.TaskID, Summary: c.Summary, FilesChanged: c.FilesChanged,
		NextAction: c.NextAction, BlockedReason: string(c.BlockedReason), RecordedAt: c.RecordedAt.UTC()})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "encode a resumed checkpoint")
	}
	return string(b), nil
}

func triggerMissing(err error, id string) error {
	return notFound(err, "trigger "+id, "see `coordination-engine leases`")
}

// AddTrigger records a trigger as pending, with a receipt. A trigger whose
// key (source, source id, revision, repo) was observed before is not
// added again: the existing one is returned, with inserted false.
func (s *Triggers) AddTrigger(ctx context.Context, tr lease.Trigger) (lease.Trigger, bool, error) {
	if err := tr.Check(); err != nil {
		return tr, false, err
	}
	now := s.Now()
	if tr.ID == "" {
		tr.ID = NewID()
	}
	if tr.ObservedAt.IsZero() {
		tr.ObservedAt = now
	}
	tr.State, tr.GateReason, tr.Wait, tr.WaitDetail, tr.UpdatedAt = lease.TriggerPending, "", "", "", now
	resume, err := resumeJSON(tr.Resume)
	if err != nil {
		return tr, false, err
	}
	var out lease.Trigger
	var inserted bool
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, target_agent, task_id,
			workplan_id, title, sender, reason, state, observed_at, updated_at, checkpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (source, source_id, source_revision, target_repo) DO NOTHING`,
			tr.ID, string(tr.Source), tr.SourceID, tr.SourceRevision, tr.TargetRepo, sqlitedb.NullString(tr.TargetAgent), sqlitedb.NullString(tr.TaskID),
			sqlitedb.NullString(tr.WorkplanID), sqlitedb.NullString(tr.Title), sqlitedb.NullString(tr.Sender), string(tr.Reason), string(tr.State), sqlitedb.Millis(tr.ObservedAt), sqlitedb.Millis(tr.UpdatedAt), resume)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			inserted = false
			out, err = scanTrigger(s.DB.TxQueryRow(tx, `SELECT `+triggerColumns+` FROM triggers
				WHERE source = ? AND source_id = ? AND source_revision = ? AND target_repo = ?`,
				string(tr.Source), tr.SourceID, tr.SourceRevision, tr.TargetRepo))
			return err
		}
		out, inserted = tr, true
		// A new revision of a source replaces its older triggers still
		// waiting (pending or gated); one already leased runs its course.
		if err := s.supersedeTx(tx, tr, now); err != nil {
			return err
		}
		return s.receipts.addReceiptTx(tx, receipt.Receipt{
			At: now, Kind: KindTriggerObserved, TriggerID: tr.ID, Status: string(tr.State), Reason: string(tr.Reason),
			Detail: map[string]any{"source": string(tr.Source), "source_id": tr.SourceID, "source_revision": tr.SourceRevision,
				"target_repo": tr.TargetRepo, "target_agent": tr.TargetAgent, "task_id": tr.TaskID, "workplan_id": tr.WorkplanID},
		})
	})
	return out, inserted, storageErr(err, "record a trigger")
}

// Trigger reads one trigger.
func (s *Triggers) Trigger(ctx context.Context, id string) (lease.Trigger, error) {
	tr, err := scanTrigger(s.DB.QueryRow(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, id))
	return tr, storageErr(triggerMissing(err, id), "read trigger "+id)
}

// liveLeaseTx returns the id and state of the trigger's live lease, if it
// has one.
func (s *Triggers) liveLeaseTx(tx *sql.Tx, triggerID string) (id, state string, err error) {
	err = s.DB.TxQueryRow(tx, `SELECT lease_id, state FROM leases WHERE trigger_id = ? AND state IN `+liveStates, triggerID).Scan(&id, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return id, state, err
}

// supersedeTx marks the waiting triggers of tr's source and repo with an
// older revision superseded, with a receipt each.
func (s *Triggers) supersedeTx(tx *sql.Tx, tr lease.Trigger, now time.Time) error {
	rows, err := tx.Query(`SELECT id FROM triggers WHERE source = ? AND source_id = ? AND target_repo = ? AND id != ?
		AND state IN ('pending', 'gated')`, string(tr.Source), tr.SourceID, tr.TargetRepo, tr.ID)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.setTriggerStateTx(tx, id, lease.TriggerSuperseded, sqlitedb.Millis(now)); err != nil {
			return err
		}
		if err := s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindTriggerSuperseded, TriggerID: id, Status: string(lease.TriggerSuperseded),
			Reason: "revision " + tr.SourceRevision + " observed", Detail: map[string]any{"by": tr.ID}}); err != nil {
			return err
		}
	}
	return nil
}

// StopTrigger stops a trigger at a gate (no lease, no wake), with a receipt
// whose reason is "<gate>: <reason>". A completed trigger, or one with a
// live lease, cannot be stopped this way (the lease is released instead).
func (s *Triggers) StopTrigger(ctx context.Context, triggerID, gate, reason string) error {
	return s.gateTrigger(ctx, triggerID, gate, reason, time.Time{})
}

// HoldTrigger holds a trigger at a gate that is checked again at recheck
// (the profile allows gated work to be retried): state gated, its checks
// counted, with a receipt.
func (s *Triggers) HoldTrigger(ctx context.Context, triggerID, gate, reason string, recheck time.Time) error {
	return s.gateTrigger(ctx, triggerID, gate, reason, recheck)
}

// gateTrigger stops a trigger (recheck zero) or holds it until recheck.
func (s *Triggers) gateTrigger(ctx context.Context, triggerID, gate, reason string, recheck time.Time) error {
	now := s.Now()
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		tr, err := scanTrigger(s.DB.TxQueryRow(tx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, triggerID))
		if err != nil {
			return triggerMissing(err, triggerID)
		}
		if tr.State == lease.TriggerCompleted {
			return errs.New(errs.Conflict, "trigger %s is completed; it cannot be stopped", triggerID)
		}
		leaseID, leaseState, err := s.liveLeaseTx(tx, triggerID)
		if err != nil {
			return err
		}
		if leaseID != "" {
			return errs.New(errs.Conflict, "trigger %s has lease %s (%s); release the lease rather than stop the trigger", triggerID, leaseID, leaseState)
		}
		state, kind, checks := lease.TriggerStopped, KindTriggerStopped, tr.GateChecks
		if !recheck.IsZero() {
			state, kind = lease.TriggerGated, KindTriggerGated
		}
		if tr.State == lease.TriggerGated {
			checks++ // this was a check again
		}
		if _, err := s.DB.TxExec(tx, `UPDATE triggers SET state = ?, gate_reason = ?, gate_checks = ?, next_check_at = ?, updated_at = ? WHERE id = ?`,
			string(state), sqlitedb.NullString(gate), checks, sqlitedb.NullMillis(recheck), sqlitedb.Millis(now), triggerID); err != nil {
			return err
		}
		why := gate
		if reason != "" {
			why += ": " + reason
		}
		detail := map[string]any{"gate": gate, "target_repo": tr.TargetRepo, "task_id": tr.TaskID, "gate_checks": checks}
		return s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: kind, TriggerID: triggerID, Status: string(state),
			Reason: why, NextRetryAt: recheck, Detail: detail})
	})
	return storageErr(err, "stop trigger "+triggerID)
}

// setTriggerStateTx moves a trigger along with its lease.
func (s *Triggers) setTriggerStateTx(tx *sql.Tx, id string, state lease.TriggerState, now int64) error {
	_, err := s.DB.TxExec(tx, `UPDATE triggers SET state = ?, updated_at = ? WHERE id = ?`, string(state), now, id)
	return err
}

// WaitTrigger records why a trigger waits (pending, or leased with its next
// attempt postponed): wait and detail, with a receipt "trigger.waiting" only
// when the reason changed, so a trigger judged at every look leaves one
// receipt per reason, not one per look. An empty wait clears it (no
// receipt: what follows says what became of it).
func (s *Triggers) WaitTrigger(ctx context.Context, triggerID string, wait lease.Wait, detail string) error {
	now := s.Now()
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		r, err := s.waitTriggerTx(tx, triggerID, wait, detail, now)
		if err != nil || r == nil {
			return err
		}
		return s.receipts.addReceiptTx(tx, *r)
	})
	return storageErr(err, "record why trigger "+triggerID+" waits")
}

// waitTriggerTx records why a trigger waits and returns the receipt to write
// when the reason changed (nil otherwise), for the caller to write after
// its own.
func (s *Triggers) waitTriggerTx(tx *sql.Tx, triggerID string, wait lease.Wait, detail string, now time.Time) (*receipt.Receipt, error) {
	var old, oldDetail, repo, task string
	if err := s.DB.TxQueryRow(tx, `SELECT COALESCE(wait_reason, ''), COALESCE(wait_detail, ''), target_repo, COALESCE(task_id, '')
		FROM triggers WHERE id = ?`, triggerID).Scan(&old, &oldDetail, &repo, &task); err != nil {
		return nil, triggerMissing(err, triggerID)
	}
	if old == string(wait) && oldDetail == detail {
		return nil, nil
	}
	if _, err := s.DB.TxExec(tx, `UPDATE triggers SET wait_reason = ?, wait_detail = ?, updated_at = ? WHERE id = ?`,
		sqlitedb.NullString(string(wait)), sqlitedb.NullString(detail), sqlitedb.Millis(now), triggerID); err != nil {
		return nil, err
	}
	if wait == "" || old == string(wait) {
		return nil, nil
	}
	return &receipt.Receipt{At: now, Kind: KindTriggerWaiting, TriggerID: triggerID, Status: "waiting", Reason: string(wait),
		Detail: map[string]any{"target_repo": repo, "task_id": task, "waiting": detail}}, nil
}

// TriggersOfTask lists the triggers about a task, oldest first.
func (s *Triggers) TriggersOfTask(ctx context.Context, taskID string) ([]lease.Trigger, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE task_id = ? ORDER BY observed_at, rowid`, taskID)
	out, err := readAll(rows, err, scanTrigger)
	return out, storageErr(err, "read the triggers of task "+taskID)
}

// TaskTriggers lists every trigger about a task, oldest first: what the
// engine recorded of the tasks it was woken for or gated, which `tasks`
// reads while the engine is not running.
func (s *Triggers) TaskTriggers(ctx context.Context) ([]lease.Trigger, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE task_id IS NOT NULL ORDER BY observed_at, rowid`)
	out, err := readAll(rows, err, scanTrigger)
	return out, storageErr(err, "read the triggers of tasks")
}

// WaitingTriggers lists the triggers that wait (pending: for a window, or
// for another lease of their task to end; gated: for a check again),
// oldest first.
func (s *Triggers) WaitingTriggers(ctx context.Context) ([]lease.Trigger, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE state IN ('pending', 'gated') ORDER BY observed_at, rowid`)
	out, err := readAll(rows, err, scanTrigger)
	return out, storageErr(err, "read waiting triggers")
}

// Supersede ends a waiting trigger whose source moved on (its task has a
// newer revision that is not actionable, its message was read), with a
// receipt. A trigger no longer waiting is left as it is.
func (s *Triggers) Supersede(ctx context.Context, triggerID, reason string) error {
	now := s.Now()
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE triggers SET state = 'superseded', updated_at = ? WHERE id = ? AND state IN ('pending', 'gated')`,
			sqlitedb.Millis(now), triggerID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindTriggerSuperseded, TriggerID: triggerID,
			Status: string(lease.TriggerSuperseded), Reason: reason})
	}), "supersede trigger "+triggerID)
}

// NextGateCheck is the earliest time a gated trigger is checked again.
func (s *Triggers) NextGateCheck(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT min(next_check_at) FROM triggers WHERE state = 'gated'`).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, false, storageErr(err, "read the next gate check")
	}
	return sqlitedb.FromMillis(due.Int64), true, nil
}

// WaitingWork lists up to limit triggers that wait (pending, or leased with
// their lease's next attempt postponed), oldest first, and counts them all
// by what they wait for.
func (s *Triggers) WaitingWork(ctx context.Context, limit int) ([]lease.Trigger, map[lease.Wait]int, error) {
	counts := map[lease.Wait]int{}
	rows, err := s.DB.Query(ctx, `SELECT wait_reason, count(*) FROM triggers WHERE wait_reason IS NOT NULL
		AND state IN ('pending', 'leased') GROUP BY wait_reason`)
	if err != nil {
		return nil, nil, storageErr(err, "count the waiting work")
	}
	for rows.Next() {
		var w string
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			rows.Close()
			return nil, nil, storageErr(err, "count the waiting work")
		}
		counts[lease.Wait(w)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, storageErr(err, "count the waiting work")
	}
	rows, err = s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE wait_reason IS NOT NULL
		AND state IN ('pending', 'leased') ORDER BY updated_at, rowid LIMIT ?`, limit)
	out, err := readAll(rows, err, scanTrigger)
	return out, counts, storageErr(err, "read the waiting work")
}
