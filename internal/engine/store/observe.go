package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// What the observer and the outbox need of the store: triggers by task,
// gated triggers due for a check, a lease stopped at a gate, the observer's
// cursors and the receipts still to publish.

// TriggersOfTask lists the triggers about a task, oldest first.
func (s *Store) TriggersOfTask(ctx context.Context, taskID string) ([]lease.Trigger, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE task_id = ? ORDER BY observed_at, rowid`, taskID)
	if err != nil {
		return nil, storageErr(err, "read the triggers of task "+taskID)
	}
	defer rows.Close()
	var out []lease.Trigger
	for rows.Next() {
		tr, err := scanTrigger(rows)
		if err != nil {
			return nil, storageErr(err, "read the triggers of task "+taskID)
		}
		out = append(out, tr)
	}
	return out, storageErr(rows.Err(), "read the triggers of task "+taskID)
}

// LiveLeaseOfTask is the live lease of any trigger about taskID: a task is
// worked on by one agent at a time, whatever revision woke it.
func (s *Store) LiveLeaseOfTask(ctx context.Context, taskID string) (lease.Lease, bool, error) {
	l, err := scanLease(s.DB.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE trigger_id IN (SELECT id FROM triggers WHERE task_id = ?) AND state IN `+liveStates+` LIMIT 1`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, false, nil
	}
	return l, err == nil, storageErr(err, "read the live lease of task "+taskID)
}

// LeasesOfTrigger lists a trigger's leases, oldest first.
func (s *Store) LeasesOfTrigger(ctx context.Context, triggerID string) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases WHERE trigger_id = ? ORDER BY rowid`, triggerID))
	return ls, storageErr(err, "read the leases of trigger "+triggerID)
}

// WaitingTriggers lists the triggers that wait (pending: for a window, or
// for another lease of their task to end; gated: for a check again),
// oldest first.
func (s *Store) WaitingTriggers(ctx context.Context) ([]lease.Trigger, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE state IN ('pending', 'gated') ORDER BY observed_at, rowid`)
	if err != nil {
		return nil, storageErr(err, "read waiting triggers")
	}
	defer rows.Close()
	var out []lease.Trigger
	for rows.Next() {
		tr, err := scanTrigger(rows)
		if err != nil {
			return nil, storageErr(err, "read waiting triggers")
		}
		out = append(out, tr)
	}
	return out, storageErr(rows.Err(), "read waiting triggers")
}

// Supersede ends a waiting trigger whose source moved on (its task has a
// newer revision that is not actionable, its message was read), with a
// receipt. A trigger no longer waiting is left as it is.
func (s *Store) Supersede(ctx context.Context, triggerID, reason string) error {
	now := s.Clock.Now()
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE triggers SET state = 'superseded', updated_at = ? WHERE id = ? AND state IN ('pending', 'gated')`,
			sqlitedb.Millis(now), triggerID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindTriggerSuperseded, TriggerID: triggerID,
			Status: string(lease.TriggerSuperseded), Reason: reason})
	}), "supersede trigger "+triggerID)
}

// NextGateCheck is the earliest time a gated trigger is checked again.
func (s *Store) NextGateCheck(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT min(next_check_at) FROM triggers WHERE state = 'gated'`).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, false, storageErr(err, "read the next gate check")
	}
	return sqlitedb.FromMillis(due.Int64), true, nil
}

// CheckpointRecorded reports whether State Hub's checkpoint id was recorded.
func (s *Store) CheckpointRecorded(ctx context.Context, statehubID string) (bool, error) {
	var n int
	err := s.DB.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE statehub_id = ?`, statehubID).Scan(&n)
	return n > 0, storageErr(err, "look up checkpoint "+statehubID)
}

// ObserverValue reads what the observer kept under key ("" when nothing).
func (s *Store) ObserverValue(ctx context.Context, key string) (string, error) {
	var v string
	err := s.DB.QueryRow(ctx, `SELECT value FROM observer_state WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, storageErr(err, "read observer state "+key)
}

// SetObserverValue keeps value under key.
func (s *Store) SetObserverValue(ctx context.Context, key, value string) error {
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := s.DB.TxExec(tx, `INSERT INTO observer_state (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, sqlitedb.Millis(s.Clock.Now()))
		return err
	}), "keep observer state "+key)
}

// Instance is this database's own id, made once: it namespaces the ids of
// the receipts published from it, so they stay unique across machines and
// the same across restarts.
func (s *Store) Instance(ctx context.Context) (string, error) {
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := s.DB.TxExec(tx, `INSERT INTO observer_state (key, value, updated_at) VALUES ('instance', ?, ?)
			ON CONFLICT (key) DO NOTHING`, NewID(), sqlitedb.Millis(s.Clock.Now()))
		return err
	})
	if err != nil {
		return "", storageErr(err, "make the database's instance id")
	}
	return s.ObserverValue(ctx, "instance")
}

// ReceiptsToPublish reads up to limit receipts not yet published, oldest
// first, in State Hub's form: source "coordination-engine", id
// "coordination-engine:<instance>:<row id>".
func (s *Store) ReceiptsToPublish(ctx context.Context, instance string, limit int) ([]contract.Receipt, []int64, error) {
	rows, err := s.DB.Query(ctx, `SELECT id, at, kind, COALESCE(trigger_id, ''), COALESCE(lease_id, ''), status, COALESCE(reason, ''),
		COALESCE(attempt, 0), COALESCE(next_retry_at, 0), COALESCE(coordination_endpoint_id, ''), COALESCE(local_message_id, ''),
		COALESCE(policy_profile, ''), COALESCE(config_version, ''), COALESCE(detail, '')
		FROM receipts WHERE projected_at IS NULL ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, nil, storageErr(err, "read receipts to publish")
	}
	defer rows.Close()
	var out []contract.Receipt
	var ids []int64
	for rows.Next() {
		var r contract.Receipt
		var id, at, next int64
		var detail string
		if err := rows.Scan(&id, &at, &r.Kind, &r.TriggerID, &r.LeaseID, &r.Status, &r.Reason, &r.Attempt, &next,
			&r.CoordinationEndpointID, &r.LocalMessageID, &r.PolicyProfile, &r.ConfigVersion, &detail); err != nil {
			return nil, nil, storageErr(err, "read receipts to publish")
		}
		r.ID, r.Source, r.At = "coordination-engine:"+instance+":"+strconv.FormatInt(id, 10), "coordination-engine", sqlitedb.FromMillis(at)
		if next != 0 {
			t := sqlitedb.FromMillis(next)
			r.NextRetryAt = &t
		}
		if detail != "" {
			if err := json.Unmarshal([]byte(detail), &r.Detail); err != nil {
				return nil, nil, storageErr(err, "read the detail of receipt "+strconv.FormatInt(id, 10))
			}
		}
		out, ids = append(out, r), append(ids, id)
	}
	return out, ids, storageErr(rows.Err(), "read receipts to publish")
}

// MarkPublished records that State Hub has the receipts.
func (s *Store) MarkPublished(ctx context.Context, ids []int64) error {
	now := sqlitedb.Millis(s.Clock.Now())
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := s.DB.TxExec(tx, `UPDATE receipts SET projected_at = ? WHERE id = ? AND projected_at IS NULL`, now, id); err != nil {
				return err
			}
		}
		return nil
	}), "mark receipts published")
}

// WaitingWork lists up to limit triggers that wait (pending, or leased with
// their lease's next attempt postponed), oldest first, and counts them all
// by what they wait for.
func (s *Store) WaitingWork(ctx context.Context, limit int) ([]lease.Trigger, map[lease.Wait]int, error) {
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
	if err != nil {
		return nil, nil, storageErr(err, "read the waiting work")
	}
	defer rows.Close()
	var out []lease.Trigger
	for rows.Next() {
		tr, err := scanTrigger(rows)
		if err != nil {
			return nil, nil, storageErr(err, "read the waiting work")
		}
		out = append(out, tr)
	}
	return out, counts, storageErr(rows.Err(), "read the waiting work")
}
