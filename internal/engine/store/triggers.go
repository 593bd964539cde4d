package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/tmux-amq/tamq/internal/engine/lease"
	"github.com/tmux-amq/tamq/internal/errs"
)

const triggerColumns = `id, source, source_id, source_revision, target_repo, COALESCE(target_agent, ''), COALESCE(task_id, ''),
	reason, state, COALESCE(gate_reason, ''), observed_at, updated_at`

type scanner interface{ Scan(...any) error }

func scanTrigger(row scanner) (lease.Trigger, error) {
	var tr lease.Trigger
	var source, reason, state string
	var observed, updated int64
	err := row.Scan(&tr.ID, &source, &tr.SourceID, &tr.SourceRevision, &tr.TargetRepo, &tr.TargetAgent, &tr.TaskID,
		&reason, &state, &tr.GateReason, &observed, &updated)
	tr.Source, tr.Reason, tr.State = lease.Source(source), lease.Reason(reason), lease.TriggerState(state)
	tr.ObservedAt, tr.UpdatedAt = fromMS(observed), fromMS(updated)
	return tr, err
}

func triggerMissing(err error, id string) error {
	return notFound(err, "trigger "+id, "see `coordination-engine leases`")
}

// AddTrigger records a trigger as pending, with a receipt. A trigger whose
// key (source, source id, revision, repo) was observed before is not
// added again: the existing one is returned, with inserted false.
func (s *Store) AddTrigger(ctx context.Context, tr lease.Trigger) (lease.Trigger, bool, error) {
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
	tr.State, tr.GateReason, tr.UpdatedAt = lease.TriggerPending, "", now
	var out lease.Trigger
	var inserted bool
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, target_agent, task_id,
			reason, state, observed_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (source, source_id, source_revision, target_repo) DO NOTHING`,
			tr.ID, string(tr.Source), tr.SourceID, tr.SourceRevision, tr.TargetRepo, nullStr(tr.TargetAgent), nullStr(tr.TaskID),
			string(tr.Reason), string(tr.State), ms(tr.ObservedAt), ms(tr.UpdatedAt))
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
		return s.addReceiptTx(tx, Receipt{
			At: now, Kind: KindTriggerObserved, TriggerID: tr.ID, Status: string(tr.State), Reason: string(tr.Reason),
			Detail: map[string]any{"source": string(tr.Source), "source_id": tr.SourceID, "source_revision": tr.SourceRevision,
				"target_repo": tr.TargetRepo, "target_agent": tr.TargetAgent, "task_id": tr.TaskID},
		})
	})
	return out, inserted, storageErr(err, "record a trigger")
}

// Trigger reads one trigger.
func (s *Store) Trigger(ctx context.Context, id string) (lease.Trigger, error) {
	tr, err := scanTrigger(s.DB.QueryRow(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, id))
	return tr, storageErr(triggerMissing(err, id), "read trigger "+id)
}

// liveLeaseTx returns the id and state of the trigger's live lease, if it
// has one.
func (s *Store) liveLeaseTx(tx *sql.Tx, triggerID string) (id, state string, err error) {
	err = s.DB.TxQueryRow(tx, `SELECT lease_id, state FROM leases WHERE trigger_id = ? AND state IN `+liveStates, triggerID).Scan(&id, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return id, state, err
}

// StopTrigger stops a trigger at a gate (no lease, no wake), with a receipt
// whose reason is "<gate>: <reason>". A completed trigger, or one with a
// live lease, cannot be stopped this way (the lease is released instead).
func (s *Store) StopTrigger(ctx context.Context, triggerID, gate, reason string) error {
	now := s.Now()
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		tr, err := scanTrigger(s.DB.TxQueryRow(tx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, triggerID))
		if err != nil {
			return triggerMissing(err, triggerID)
		}
		if tr.State == lease.TriggerCompleted {
			return errs.New(errs.Conflict, "trigger %s is completed; it cannot be stopped", triggerID)
		}
		leaseID, state, err := s.liveLeaseTx(tx, triggerID)
		if err != nil {
			return err
		}
		if leaseID != "" {
			return errs.New(errs.Conflict, "trigger %s has lease %s (%s); release the lease rather than stop the trigger", triggerID, leaseID, state)
		}
		if _, err := s.DB.TxExec(tx, `UPDATE triggers SET state = ?, gate_reason = ?, updated_at = ? WHERE id = ?`,
			string(lease.TriggerStopped), nullStr(gate), ms(now), triggerID); err != nil {
			return err
		}
		why := gate
		if reason != "" {
			why += ": " + reason
		}
		return s.addReceiptTx(tx, Receipt{At: now, Kind: KindTriggerStopped, TriggerID: triggerID, Status: string(lease.TriggerStopped),
			Reason: why, Detail: map[string]any{"gate": gate, "target_repo": tr.TargetRepo}})
	})
	return storageErr(err, "stop trigger "+triggerID)
}

// setTriggerStateTx moves a trigger along with its lease.
func (s *Store) setTriggerStateTx(tx *sql.Tx, id string, state lease.TriggerState, now int64) error {
	_, err := s.DB.TxExec(tx, `UPDATE triggers SET state = ?, updated_at = ? WHERE id = ?`, string(state), now, id)
	return err
}
