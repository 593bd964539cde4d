package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

const leaseColumns = `lease_id, trigger_id, owner, target_repo, COALESCE(target_agent, ''), state, attempt, max_attempts,
	acquired_at, expires_at, COALESCE(next_retry_at, 0), COALESCE(last_checkpoint_at, 0), COALESCE(coordination_endpoint_id, ''),
	COALESCE(tamq_endpoint_id, ''), COALESCE(local_lease_id, ''), COALESCE(wake_outcome, ''), COALESCE(stop_reason, ''),
	policy_profile, config_version, updated_at, COALESCE(released, ''), COALESCE(acked_by, ''), COALESCE(acked_at, 0)`

func scanLease(row scanner) (lease.Lease, error) {
	var l lease.Lease
	var state, outcome, released string
	var acquired, expires, next, checkpoint, updated, acked int64
	err := row.Scan(&l.ID, &l.TriggerID, &l.Owner, &l.TargetRepo, &l.TargetAgent, &state, &l.Attempt, &l.MaxRetries,
		&acquired, &expires, &next, &checkpoint, &l.CoordinationEndpointID,
		&l.TamqEndpointID, &l.LocalLeaseID, &outcome, &l.StopReason,
		&l.PolicyProfile, &l.ConfigVersion, &updated, &released, &l.AckedBy, &acked)
	l.AckedAt = sqlitedb.TimeOrZero(acked)
	l.State, l.WakeOutcome, l.Released = lease.State(state), lease.WakeOutcome(outcome), lease.Result(released)
	l.AcquiredAt, l.ExpiresAt, l.UpdatedAt = sqlitedb.FromMillis(acquired), sqlitedb.FromMillis(expires), sqlitedb.FromMillis(updated)
	l.NextRetryAt, l.LastCheckpointAt = sqlitedb.TimeOrZero(next), sqlitedb.TimeOrZero(checkpoint)
	return l, err
}

func leaseMissing(err error, id string) error {
	return notFound(err, "lease "+id, "see `coordination-engine leases`")
}

// change is one transition of a lease inside a write transaction: it
// returns the new lease (the same one when nothing changed) and the
// receipts to write with it.
type change func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error)

// leaseReceipt is a receipt about l as it is now: its ids, state, attempt,
// next retry, endpoint, policy profile and config version.
func leaseReceipt(l lease.Lease, kind, reason string) receipt.Receipt {
	return receipt.Receipt{
		Kind: kind, TriggerID: l.TriggerID, LeaseID: l.ID, Status: string(l.State), Reason: reason,
		Attempt: l.Attempt, NextRetryAt: l.NextRetryAt, CoordinationEndpointID: l.CoordinationEndpointID,
		LocalMessageID: l.LocalLeaseID, PolicyProfile: l.PolicyProfile, ConfigVersion: l.ConfigVersion,
		Detail: map[string]any{"target_repo": l.TargetRepo},
	}
}

// stateKinds names the receipt of a move into each state.
var stateKinds = map[lease.State]string{
	lease.Offered:      KindLeaseReoffered, // a new lease's receipt is written by Offer
	lease.Acknowledged: KindLeaseAcknowledged,
	lease.Running:      KindLeaseRunning,
	lease.Checkpointed: KindCheckpointRecorded,
	lease.Completed:    KindLeaseCompleted,
	lease.RetryWait:    KindLeaseRetryWait,
	lease.Stopped:      KindLeaseStopped,
}

// transitionReceipt is the receipt of a move from one state to another.
// Its attempt is the lease's after the move: in retry_wait, the attempt
// that comes at next_retry_at (detail ended_attempt is the one that ended).
// Who is the caller a receipt names: by (broker, agent, operator, tamq,
// statehub) and, for an agent, its window's repo.
type Who struct {
	By, Repo string
}

func (w Who) into(d map[string]any) {
	if w.By != "" {
		d["by"] = w.By
	}
	if w.Repo != "" {
		d["by_repo"] = w.Repo
	}
}

func transitionReceipt(from, to lease.Lease, reason string) receipt.Receipt {
	r := leaseReceipt(to, stateKinds[to.State], reason)
	r.Detail["from"] = string(from.State)
	if to.Attempt != from.Attempt {
		r.Detail["ended_attempt"] = from.Attempt
	}
	return r
}

// WakeRecord is what became of the wake of one attempt: tamq's answer, or
// the error that kept it from answering.
type WakeRecord struct {
	Capability             string // resumed | started | unavailable
	MessageID              string // tamq's message id; empty when unavailable
	TamqEndpointID         string
	CoordinationEndpointID string
	Reason                 string // tamq's reason (why unavailable)
	Err                    string // the wake could not be sent: why
	// Wait and Until, for an unavailable answer: why the trigger waits
	// now, and when the withdrawn attempt's successor is judged again at
	// the latest (a window that opens first brings it forward).
	Wait  lease.Wait
	Until time.Time
}

// readLeases reads the leases a query returns (rows and err as QueryContext
// returns them).
func readLeases[R rowSet](rows R, err error) ([]lease.Lease, error) {
	return readAll(rows, err, scanLease)
}

// rowSet is what a query returns: *sql.Rows, or sqlitedb's that names its
// statement in errors.
type rowSet interface {
	scanner
	Next() bool
	Err() error
	Close() error
}

// readAll reads every row a query returns (rows and err as QueryContext
// returns them) with scan, and closes the rows.
func readAll[T any, R rowSet](rows R, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Leases) insertLeaseTx(tx *sql.Tx, l lease.Lease) error {
	_, err := s.DB.TxExec(tx, `INSERT INTO leases (lease_id, trigger_id, owner, target_repo, target_agent, state, attempt, max_attempts,
		acquired_at, expires_at, coordination_endpoint_id, policy_profile, config_version, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.ID, l.TriggerID, l.Owner, l.TargetRepo, sqlitedb.NullString(l.TargetAgent), string(l.State), l.Attempt, l.MaxRetries,
		sqlitedb.Millis(l.AcquiredAt), sqlitedb.Millis(l.ExpiresAt), sqlitedb.NullString(l.CoordinationEndpointID), l.PolicyProfile, l.ConfigVersion, sqlitedb.Millis(l.UpdatedAt))
	return err
}

// saveLeaseTx writes what a transition may change.
func (s *Leases) saveLeaseTx(tx *sql.Tx, l lease.Lease) error {
	_, err := s.DB.TxExec(tx, `UPDATE leases SET state = ?, attempt = ?, max_attempts = ?, acquired_at = ?, expires_at = ?, next_retry_at = ?,
		last_checkpoint_at = ?, coordination_endpoint_id = ?, tamq_endpoint_id = ?, local_lease_id = ?, wake_outcome = ?,
		stop_reason = ?, updated_at = ?, released = ?, acked_by = ?, acked_at = ? WHERE lease_id = ?`,
		string(l.State), l.Attempt, l.MaxRetries, sqlitedb.Millis(l.AcquiredAt), sqlitedb.Millis(l.ExpiresAt), sqlitedb.NullMillis(l.NextRetryAt),
		sqlitedb.NullMillis(l.LastCheckpointAt), sqlitedb.NullString(l.CoordinationEndpointID), sqlitedb.NullString(l.TamqEndpointID), sqlitedb.NullString(l.LocalLeaseID), sqlitedb.NullString(string(l.WakeOutcome)),
		sqlitedb.NullString(l.StopReason), sqlitedb.Millis(l.UpdatedAt), sqlitedb.NullString(string(l.Released)),
		sqlitedb.NullString(l.AckedBy), sqlitedb.NullMillis(l.AckedAt), l.ID)
	return err
}

// update applies ch to one lease in one write transaction.
func (s *Leases) update(ctx context.Context, id, op string, ch change) (lease.Lease, error) {
	now := s.Now()
	var out lease.Lease
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		l, err := scanLease(s.DB.TxQueryRow(tx, `SELECT `+leaseColumns+` FROM leases WHERE lease_id = ?`, id))
		if err != nil {
			return leaseMissing(err, id)
		}
		out, err = s.applyTx(tx, l, now, ch)
		return err
	})
	return out, storageErr(err, op+" lease "+id)
}

// applyTx runs ch and saves its outcome: the lease when it changed, its
// trigger when the lease ended (completed or stopped), and the receipts.
func (s *Leases) applyTx(tx *sql.Tx, from lease.Lease, now time.Time, ch change) (lease.Lease, error) {
	to, receipts, err := ch(tx, from, now)
	if err != nil {
		return from, err
	}
	if to != from {
		if err := s.saveLeaseTx(tx, to); err != nil {
			return from, err
		}
		if from.State == lease.Offered && to.State != lease.Offered && to.State != lease.RetryWait {
			// The agent took the attempt up (or it ended): what its wake
			// waited for is over.
			if _, err := s.triggers.waitTriggerTx(tx, to.TriggerID, "", "", now); err != nil {
				return from, err
			}
		}
		if from.State.Live() && !to.State.Live() {
			state := lease.TriggerStopped
			if to.State == lease.Completed {
				state = lease.TriggerCompleted
			}
			if err := s.triggers.setTriggerStateTx(tx, to.TriggerID, state, sqlitedb.Millis(now)); err != nil {
				return from, err
			}
		}
	}
	for _, r := range receipts {
		r.At = now
		if err := s.receipts.addReceiptTx(tx, r); err != nil {
			return from, err
		}
	}
	return to, nil
}

// Offer takes a new lease for a trigger (attempt 1, offered until the ack
// deadline) and marks the trigger leased, with a receipt. endpointID is the
// coordination endpoint the wake will go to; it may be empty. leaseID is
// the lease's id, made by NewID (the cluster claims the work under it
// before the lease exists); "" makes one. A trigger that has a live lease
// already: conflict.
func (s *Leases) Offer(ctx context.Context, triggerID, endpointID, leaseID string, t lease.Timing) (lease.Lease, error) {
	if leaseID == "" {
		leaseID = NewID()
	}
	now := s.Now()
	var out lease.Lease
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		tr, err := scanTrigger(s.DB.TxQueryRow(tx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, triggerID))
		if err != nil {
			return triggerMissing(err, triggerID)
		}
		live, state, err := s.triggers.liveLeaseTx(tx, triggerID)
		if err != nil {
			return err
		}
		if live != "" {
			return errs.New(errs.Conflict, "trigger %s already has lease %s (%s)", triggerID, live, state).
				WithHint("one live lease per trigger: wait for lease %s to end", live)
		}
		if err := s.endpoints.endpointKnownTx(tx, endpointID); err != nil {
			return err
		}
		l, err := lease.Offer(tr, leaseID, now, t)
		if err != nil {
			return err
		}
		l.CoordinationEndpointID, l.PolicyProfile, l.ConfigVersion = endpointID, s.PolicyProfile, s.ConfigVersion
		if err := s.insertLeaseTx(tx, l); err != nil {
			return err
		}
		if err := s.triggers.setTriggerStateTx(tx, triggerID, lease.TriggerLeased, sqlitedb.Millis(now)); err != nil {
			return err
		}
		if _, err := s.triggers.waitTriggerTx(tx, triggerID, "", "", now); err != nil {
			return err
		}
		r := leaseReceipt(l, KindLeaseOffered, string(tr.Reason))
		r.At, r.Detail["max_retries"] = now, l.MaxRetries
		out = l
		return s.receipts.addReceiptTx(tx, r)
	})
	return out, storageErr(err, "offer a lease for trigger "+triggerID)
}

// RecordWake records the wake of attempt: its outcome and tamq's message id
// on the lease (only while that attempt is the lease's current one: an
// answer for an earlier attempt changes nothing), with a receipt "wake.sent"
// (status the capability) or "wake.failed" (reason the error), either way.
// An unavailable wake withdraws the attempt (no window could take it; it
// costs nothing) and the trigger waits, with w.Wait, until w.Until or until
// a window opens.
func (s *Leases) RecordWake(ctx context.Context, leaseID string, attempt int, w WakeRecord) (lease.Lease, error) {
	return s.update(ctx, leaseID, "record the wake of", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to := l
		kind, status, reason := KindWakeSent, w.Capability, w.Reason
		if reason == "" {
			// Every list of receipts shows the reason beside the status:
			// say what "resumed" or "started" means there.
			reason = lease.WakeOutcome(w.Capability).Meaning()
		}
		if w.Err != "" {
			kind, status, reason = KindWakeFailed, "failed", w.Err
		} else {
			if err := s.endpoints.endpointKnownTx(tx, w.CoordinationEndpointID); err != nil {
				return l, nil, err
			}
			var err error
			if to, _, err = l.Woken(attempt, lease.WakeOutcome(w.Capability), w.MessageID, w.TamqEndpointID, w.CoordinationEndpointID, now); err != nil {
				return l, nil, err
			}
		}
		r := leaseReceipt(to, kind, reason)
		r.Status, r.Attempt, r.LocalMessageID = status, attempt, w.MessageID
		if w.CoordinationEndpointID != "" {
			r.CoordinationEndpointID = w.CoordinationEndpointID
		}
		if w.TamqEndpointID != "" {
			r.Detail["tamq_endpoint_id"] = w.TamqEndpointID
		}
		if attempt != l.Attempt {
			r.Detail["stale"] = true // the lease had moved on
		}
		out := []receipt.Receipt{r}
		if to.WakeOutcome == lease.WakeUnavailable && to.State == lease.Offered {
			withdrawn, _, err := to.Withdraw(now, w.Until)
			if err != nil {
				return l, nil, err
			}
			waiting, err := s.triggers.waitTriggerTx(tx, l.TriggerID, w.Wait, w.Reason, now)
			if err != nil {
				return l, nil, err
			}
			wr := transitionReceipt(to, withdrawn, "withdrawn: "+w.Reason)
			// The same attempt is offered again: the receipt still names
			// the one that ended here.
			wr.Detail["ended_attempt"] = to.Attempt
			out = append(out, wr)
			if waiting != nil {
				out = append(out, *waiting)
			}
			to = withdrawn
		}
		return to, out, nil
	})
}

// Ack records the agent's acknowledgement (offered → acknowledged). A
// repeated ack changes and writes nothing.
func (s *Leases) Ack(ctx context.Context, leaseID string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "acknowledge", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, changed, err := l.Ack(now, t, attempt)
		if err != nil || !changed {
			return to, nil, err
		}
		// Kept on the lease, not only in the receipt: receipts are purged,
		// and the lease listing says who took the attempt.
		to.AckedBy, to.AckedAt = by.By, now
		r := transitionReceipt(l, to, "")
		by.into(r.Detail)
		return to, []receipt.Receipt{r}, nil
	})
}

// acked is the lease acknowledged by who asked, with its receipt, when the
// request takes up the offered attempt (lease.TakesUp: it names it);
// else the lease as it is.
func acked(l lease.Lease, attempt int, by Who, now time.Time, t lease.Timing, action string) (lease.Lease, []receipt.Receipt, error) {
	if !l.TakesUp(attempt) {
		return l, nil, nil
	}
	to, _, err := l.Ack(now, t, attempt)
	if err != nil {
		return l, nil, err
	}
	to.AckedBy, to.AckedAt = by.By, now
	r := transitionReceipt(l, to, "taken up by its "+action)
	by.into(r.Detail)
	return to, []receipt.Receipt{r}, nil
}

// Renew extends a held lease. Only the first renewal (acknowledged →
// running) writes a receipt; the others move its deadline silently.
func (s *Leases) Renew(ctx context.Context, leaseID string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "renew", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		l, rs, err := acked(l, attempt, by, now, t, "renewal")
		if err != nil {
			return l, nil, err
		}
		to, _, err := l.Renew(now, t, attempt)
		if err != nil || to.State == l.State {
			return to, rs, err
		}
		r := transitionReceipt(l, to, "")
		by.into(r.Detail)
		return to, append(rs, r), nil
	})
}

// Checkpoint records a checkpoint on its lease (c.LeaseID) and extends the
// lease, with a receipt that holds no summary: the count of changed files,
// the task and the blocked reason. A checkpoint with a blocked reason stops
// the lease (blocked), with a receipt of that too. attempt is the attempt
// the agent names (0: none; a checkpoint observed in State Hub names none).
func (s *Leases) Checkpoint(ctx context.Context, c lease.Checkpoint, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, c.LeaseID, "checkpoint", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		if c.SourceID != "" {
			// A checkpoint posted to State Hub is recorded once, however
			// often it is observed.
			var n int
			if err := s.DB.TxQueryRow(tx, `SELECT count(*) FROM checkpoints WHERE statehub_id = ?`, c.SourceID).Scan(&n); err != nil || n > 0 {
				return l, nil, err
			}
		}
		if c.TaskID == "" {
			// The task the lease works on: a later lease of the task
			// resumes from this checkpoint.
			if err := s.DB.TxQueryRow(tx, `SELECT COALESCE(task_id, '') FROM triggers WHERE id = ?`, l.TriggerID).Scan(&c.TaskID); err != nil {
				return l, nil, err
			}
		}
		l, rs, err := acked(l, attempt, by, now, t, "checkpoint")
		if err != nil {
			return l, nil, err
		}
		to, rec, err := l.Checkpoint(c, now, t, attempt)
		if err != nil {
			return l, nil, err
		}
		blocked := to.State == lease.Stopped
		if blocked {
			// The checkpoint's own receipt first, then the stop.
			to.State = lease.Checkpointed
		}
		files, err := json.Marshal(append([]string{}, rec.FilesChanged...))
		if err != nil {
			return l, nil, errs.Wrap(errs.Internal, err, "encode changed files")
		}
		if _, err := s.DB.TxExec(tx, `INSERT INTO checkpoints (lease_id, task_id, summary, files_changed, next_action, blocked_reason, recorded_at, statehub_id, attempt)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, rec.LeaseID, sqlitedb.NullString(rec.TaskID), rec.Summary, string(files), sqlitedb.NullString(rec.NextAction),
			sqlitedb.NullString(string(rec.BlockedReason)), sqlitedb.Millis(rec.RecordedAt), sqlitedb.NullString(c.SourceID), l.Attempt); err != nil {
			return l, nil, err
		}
		r := transitionReceipt(l, to, string(rec.BlockedReason)) // checkpoint.recorded
		by.into(r.Detail)
		r.Detail["files_changed"] = len(rec.FilesChanged)
		if rec.TaskID != "" {
			r.Detail["task_id"] = rec.TaskID
		}
		if c.SourceID != "" {
			r.Detail["statehub_checkpoint_id"] = c.SourceID
		}
		if rec.BlockedReason != "" {
			r.Detail["blocked_reason"] = string(rec.BlockedReason)
		}
		out := append(rs, r)
		if blocked {
			stopped := to
			stopped.State = lease.Stopped
			stop := transitionReceipt(to, stopped, stopped.StopReason)
			stop.Detail["result"] = string(lease.ResultBlocked)
			out, to = append(out, stop), stopped
		}
		return to, out, nil
	})
}

// Release ends the agent's attempt with its result (completed, failed,
// blocked); see the lease rules. The trigger completes or stops with it.
func (s *Leases) Release(ctx context.Context, leaseID, result, reason string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "release", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		if err := lease.CheckRelease(lease.Result(result), reason); err != nil {
			return l, nil, err // nothing taken up by a release that cannot be made
		}
		l, rs, err := acked(l, attempt, by, now, t, "release")
		if err != nil {
			return l, nil, err
		}
		to, _, err := l.Release(lease.Result(result), reason, now, t, attempt)
		if err != nil {
			return l, nil, err
		}
		r := transitionReceipt(l, to, lease.ReleaseReason(lease.Result(result), reason))
		r.Detail["result"] = result
		by.into(r.Detail)
		return to, append(rs, r), nil
	})
}

// Reoffer offers a lease in retry_wait again, its next attempt due; its
// wake is then pending (see PendingWakes). The trigger waits no more.
// endpointID is the coordination endpoint the attempt's wake goes to, as
// the router found it now ("" keeps the lease's): an endpoint that went
// away does not keep the work.
func (s *Leases) Reoffer(ctx context.Context, leaseID, endpointID string, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "offer again", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Reoffer(now, t)
		if err != nil {
			return l, nil, err
		}
		if endpointID != "" && endpointID != to.CoordinationEndpointID {
			if err := s.endpoints.endpointKnownTx(tx, endpointID); err != nil {
				return l, nil, err
			}
			to.CoordinationEndpointID, to.TamqEndpointID = endpointID, ""
		}
		if _, err := s.triggers.waitTriggerTx(tx, l.TriggerID, "", "", now); err != nil {
			return l, nil, err
		}
		return to, []receipt.Receipt{transitionReceipt(l, to, "retry due")}, nil
	})
}

// HoldWake keeps an offered attempt whose wake tamq holds unwritten (a
// dialog, no agent in the window) from running out: its ack deadline
// starts again at until, and its trigger says what it waits for (a receipt
// when that changed). A lease that moved on meanwhile is left as it is.
func (s *Leases) HoldWake(ctx context.Context, leaseID string, attempt int, until time.Time, wait lease.Wait, detail string) (lease.Lease, error) {
	return s.update(ctx, leaseID, "hold the wake of", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		if l.Attempt != attempt || l.State != lease.Offered {
			return l, nil, nil
		}
		to, _, err := l.Hold(now, until)
		if err != nil {
			return l, nil, err
		}
		waiting, err := s.triggers.waitTriggerTx(tx, l.TriggerID, wait, detail, now)
		if err != nil || waiting == nil {
			return to, nil, err
		}
		return to, []receipt.Receipt{*waiting}, nil
	})
}

// WithdrawHeldWake takes back an offered attempt whose wake tamq holds
// where nothing will write it (its endpoint gone or forgotten): nothing is
// spent, and the next attempt, due at until, is routed afresh. A lease that
// moved on meanwhile is left as it is.
func (s *Leases) WithdrawHeldWake(ctx context.Context, leaseID string, attempt int, until time.Time, wait lease.Wait, detail string) (lease.Lease, error) {
	return s.update(ctx, leaseID, "withdraw the held wake of", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		if l.Attempt != attempt || l.State != lease.Offered {
			return l, nil, nil
		}
		to, _, err := l.WithdrawHeld(now, until)
		if err != nil {
			return l, nil, err
		}
		out := []receipt.Receipt{transitionReceipt(l, to, "withdrawn: "+detail)}
		waiting, err := s.triggers.waitTriggerTx(tx, l.TriggerID, wait, detail, now)
		if err != nil {
			return l, nil, err
		}
		if waiting != nil {
			out = append(out, *waiting)
		}
		return to, out, nil
	})
}

// Postpone moves the next attempt of a lease in retry_wait to until (it
// cannot be offered yet) and records why its trigger waits.
func (s *Leases) Postpone(ctx context.Context, leaseID string, until time.Time, wait lease.Wait, detail string) (lease.Lease, error) {
	return s.update(ctx, leaseID, "postpone", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Postpone(until, now)
		if err != nil {
			return l, nil, err
		}
		waiting, err := s.triggers.waitTriggerTx(tx, l.TriggerID, wait, detail, now)
		if err != nil || waiting == nil {
			return to, nil, err
		}
		return to, []receipt.Receipt{*waiting}, nil
	})
}

// StopLease stops a live lease for good with reason (and, when the stop is
// a gate, names the gate on its trigger), with a receipt. Its trigger stops
// with it.
func (s *Leases) StopLease(ctx context.Context, leaseID, gate, reason string) (lease.Lease, error) {
	return s.update(ctx, leaseID, "stop", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		why := reason
		if gate != "" {
			why = gate
			if reason != "" {
				why += ": " + reason
			}
		}
		to, _, err := l.Stop(why, now)
		if err != nil {
			return l, nil, err
		}
		if gate != "" {
			if _, err := s.DB.TxExec(tx, `UPDATE triggers SET gate_reason = ? WHERE id = ?`, gate, l.TriggerID); err != nil {
				return l, nil, err
			}
		}
		r := transitionReceipt(l, to, why)
		if gate != "" {
			r.Detail["gate"] = gate
		}
		return to, []receipt.Receipt{r}, nil
	})
}
