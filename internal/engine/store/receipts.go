package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// Receipt kinds the engine writes: one per trigger, lease transition, wake
// attempt, checkpoint, retry, stop, completion and endpoint change.
const (
	KindTriggerObserved    = "trigger.observed"
	KindTriggerStopped     = "trigger.stopped"
	KindTriggerGated       = "trigger.gated"
	KindTriggerSuperseded  = "trigger.superseded"
	KindTriggerWaiting     = "trigger.waiting"
	KindGateOverridden     = "gate.overridden"
	KindHistoryPurged      = "history.purged"
	KindSourceInvalid      = "source.invalid"
	KindLeaseOffered       = "lease.offered"
	KindLeaseAcknowledged  = "lease.acknowledged"
	KindLeaseRunning       = "lease.running"
	KindCheckpointRecorded = "checkpoint.recorded"
	KindLeaseCompleted     = "lease.completed"
	KindLeaseRetryWait     = "lease.retry_wait"
	KindLeaseStopped       = "lease.stopped"
	KindLeaseReoffered     = "lease.reoffered"
	KindWakeSent           = "wake.sent"
	KindWakeFailed         = "wake.failed"
	KindEndpointAttached   = "endpoint.attached"
	KindEndpointRefused    = "endpoint.refused"
	KindEndpointDetached   = "endpoint.detached"
	// What an agent relays to State Hub through the engine.
	KindTaskSet         = "task.set"
	KindMessageRead     = "message.read"
	KindMessageWithheld = "message.withheld"
	KindTaskWithheld    = "task.withheld"
)

// ReceiptFilter selects receipts: of a lease, of a trigger, of a task, the
// latest Limit (0: all).
type ReceiptFilter struct {
	LeaseID   string
	TriggerID string
	// TaskID takes the receipts of the task's triggers and leases, and
	// those that name it in their detail (what an agent relayed about it).
	TaskID string
	// BeforeID, when set, takes only receipts older than that one (the
	// next page of a listing).
	BeforeID int64
	Limit    int
}

// cleanReason holds a reason to the rule of detail strings: no control
// characters, cut short. Reasons may come from agents and from errors.
func cleanReason(s string) string {
	v, _ := receipt.Sanitize(map[string]any{"reason": s})["reason"].(string)
	return v
}

// ReceiptsToPublish reads up to limit receipts not yet published, oldest
// first, in State Hub's form: source "coordination-engine", id
// "coordination-engine:<instance>:<row id>".
func (s *Receipts) ReceiptsToPublish(ctx context.Context, instance string, limit int) ([]contract.Receipt, []int64, error) {
	rows, err := s.DB.Query(ctx, `SELECT r.id, r.at, r.kind, COALESCE(r.trigger_id, ''), COALESCE(r.lease_id, ''), r.status, COALESCE(r.reason, ''),
		COALESCE(r.attempt, 0), COALESCE(r.next_retry_at, 0), COALESCE(r.coordination_endpoint_id, ''), COALESCE(r.local_message_id, ''),
		COALESCE(r.policy_profile, ''), COALESCE(r.config_version, ''), COALESCE(r.detail, ''), `+receiptTask+`, `+receiptRepo+`
		FROM receipts r LEFT JOIN triggers t ON t.id = r.trigger_id WHERE r.projected_at IS NULL ORDER BY r.id LIMIT ?`, limit)
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
			&r.CoordinationEndpointID, &r.LocalMessageID, &r.PolicyProfile, &r.ConfigVersion, &detail, &r.TaskID, &r.Repo); err != nil {
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
func (s *Receipts) MarkPublished(ctx context.Context, ids []int64) error {
	now := sqlitedb.Millis(s.Now())
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := s.DB.TxExec(tx, `UPDATE receipts SET projected_at = ? WHERE id = ? AND projected_at IS NULL`, now, id); err != nil {
				return err
			}
		}
		return nil
	}), "mark receipts published")
}

// AddReceipt writes one receipt in its own transaction.
func (s *Receipts) AddReceipt(ctx context.Context, r receipt.Receipt) error {
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error { return s.addReceiptTx(tx, r) }), "write a receipt")
}

// addReceiptTx writes a receipt inside the caller's transaction, so a
// transition and its receipt commit together. The time, policy profile and
// config version default to the store's.
func (s *Receipts) addReceiptTx(tx *sql.Tx, r receipt.Receipt) error {
	r.Stamp(s.Now(), s.PolicyProfile, s.ConfigVersion)
	var detail any
	if len(r.Detail) > 0 {
		b, err := json.Marshal(receipt.Sanitize(r.Detail))
		if err != nil {
			return errs.Wrap(errs.Internal, err, "encode receipt detail")
		}
		detail = string(b)
	}
	var attempt any
	if r.Attempt > 0 {
		attempt = r.Attempt
	}
	_, err := s.DB.TxExec(tx, `INSERT INTO receipts (at, kind, trigger_id, lease_id, status, reason, attempt, next_retry_at,
		coordination_endpoint_id, local_message_id, policy_profile, config_version, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sqlitedb.Millis(r.At), r.Kind, sqlitedb.NullString(r.TriggerID), sqlitedb.NullString(r.LeaseID), r.Status, sqlitedb.NullString(cleanReason(r.Reason)), attempt, sqlitedb.NullMillis(r.NextRetryAt),
		sqlitedb.NullString(r.CoordinationEndpointID), sqlitedb.NullString(r.LocalMessageID), sqlitedb.NullString(r.PolicyProfile), sqlitedb.NullString(r.ConfigVersion), detail)
	if err == nil && s.ReceiptAdded != nil {
		s.ReceiptAdded()
	}
	return err
}

// receiptTask and receiptRepo are what a receipt is about, as List reads
// them: its trigger's task and repo, else what its detail names (a relayed
// task status names its task; an endpoint's receipt its repo).
const (
	receiptTask = `COALESCE(t.task_id, json_extract(r.detail, '$.task_id'), '')`
	receiptRepo = `COALESCE(t.target_repo, json_extract(r.detail, '$.target_repo'), json_extract(r.detail, '$.repo'), '')`
)

// List lists receipts oldest first: all of them, or those of a lease, a
// trigger or a task; with a limit, the latest that many. Each names its
// task and repo when known.
func (s *Receipts) List(ctx context.Context, f ReceiptFilter) ([]receipt.Receipt, error) {
	q := `SELECT r.id, r.at, r.kind, COALESCE(r.trigger_id, ''), COALESCE(r.lease_id, ''), r.status, COALESCE(r.reason, ''),
		COALESCE(r.attempt, 0), COALESCE(r.next_retry_at, 0), COALESCE(r.coordination_endpoint_id, ''), COALESCE(r.local_message_id, ''),
		COALESCE(r.policy_profile, ''), COALESCE(r.config_version, ''), COALESCE(r.detail, ''), COALESCE(r.projected_at, 0),
		` + receiptTask + `, ` + receiptRepo + `
		FROM receipts r LEFT JOIN triggers t ON t.id = r.trigger_id WHERE 1 = 1`
	var args []any
	if f.LeaseID != "" {
		q += ` AND r.lease_id = ?`
		args = append(args, f.LeaseID)
	}
	if f.TriggerID != "" {
		q += ` AND r.trigger_id = ?`
		args = append(args, f.TriggerID)
	}
	if f.TaskID != "" {
		q += ` AND ` + receiptTask + ` = ?`
		args = append(args, f.TaskID)
	}
	if f.BeforeID > 0 {
		q += ` AND r.id < ?`
		args = append(args, f.BeforeID)
	}
	limit := -1 // SQLite: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.DB.Query(ctx, `SELECT * FROM (`+q+` ORDER BY r.id DESC LIMIT ?) ORDER BY 1`, append(args, limit)...)
	if err != nil {
		return nil, storageErr(err, "read receipts")
	}
	defer rows.Close()
	var out []receipt.Receipt
	for rows.Next() {
		var r receipt.Receipt
		var at, next, projected int64
		var detail string
		if err := rows.Scan(&r.ID, &at, &r.Kind, &r.TriggerID, &r.LeaseID, &r.Status, &r.Reason, &r.Attempt, &next,
			&r.CoordinationEndpointID, &r.LocalMessageID, &r.PolicyProfile, &r.ConfigVersion, &detail, &projected,
			&r.TaskID, &r.Repo); err != nil {
			return nil, storageErr(err, "read receipts")
		}
		r.At, r.NextRetryAt, r.ProjectedAt = sqlitedb.FromMillis(at), sqlitedb.TimeOrZero(next), sqlitedb.TimeOrZero(projected)
		if detail != "" {
			if err := json.Unmarshal([]byte(detail), &r.Detail); err != nil {
				return nil, errs.Wrap(errs.Storage, err, "read the detail of receipt %d", r.ID)
			}
		}
		out = append(out, r)
	}
	return out, storageErr(rows.Err(), "read receipts")
}

// OverriddenGate is the gate the operator woke a trigger's task through
// (its gate.overridden receipt), "" when none.
func (s *Receipts) OverriddenGate(ctx context.Context, triggerID string) (string, error) {
	var gate string
	err := s.DB.QueryRow(ctx, `SELECT status FROM receipts WHERE trigger_id = ? AND kind = ? ORDER BY id DESC LIMIT 1`,
		triggerID, KindGateOverridden).Scan(&gate)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return gate, storageErr(err, "read a gate override")
}

// UnpublishedReceipts counts the receipts not yet published to State Hub.
func (s *Receipts) UnpublishedReceipts(ctx context.Context) (int, error) {
	var n int
	err := s.DB.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE projected_at IS NULL`).Scan(&n)
	return n, storageErr(err, "count unpublished receipts")
}
