package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

const leaseColumns = `lease_id, trigger_id, owner, target_repo, COALESCE(target_agent, ''), state, attempt, max_attempts,
	acquired_at, expires_at, COALESCE(next_retry_at, 0), COALESCE(last_checkpoint_at, 0), COALESCE(coordination_endpoint_id, ''),
	COALESCE(tamq_endpoint_id, ''), COALESCE(local_lease_id, ''), COALESCE(wake_outcome, ''), COALESCE(stop_reason, ''),
	policy_profile, config_version, updated_at, COALESCE(released, '')`

func scanLease(row scanner) (lease.Lease, error) {
	var l lease.Lease
	var state, outcome, released string
	var acquired, expires, next, checkpoint, updated int64
	err := row.Scan(&l.ID, &l.TriggerID, &l.Owner, &l.TargetRepo, &l.TargetAgent, &state, &l.Attempt, &l.MaxAttempts,
		&acquired, &expires, &next, &checkpoint, &l.CoordinationEndpointID,
		&l.TamqEndpointID, &l.LocalLeaseID, &outcome, &l.StopReason,
		&l.PolicyProfile, &l.ConfigVersion, &updated, &released)
	l.State, l.WakeOutcome, l.Released = lease.State(state), lease.WakeOutcome(outcome), lease.Result(released)
	l.AcquiredAt, l.ExpiresAt, l.UpdatedAt = sqlitedb.FromMillis(acquired), sqlitedb.FromMillis(expires), sqlitedb.FromMillis(updated)
	l.NextRetryAt, l.LastCheckpointAt = sqlitedb.TimeOrZero(next), sqlitedb.TimeOrZero(checkpoint)
	return l, err
}

func leaseMissing(err error, id string) error {
	return notFound(err, "lease "+id, "see `coordination-engine leases`")
}

func (s *Store) insertLeaseTx(tx *sql.Tx, l lease.Lease) error {
	_, err := s.DB.TxExec(tx, `INSERT INTO leases (lease_id, trigger_id, owner, target_repo, target_agent, state, attempt, max_attempts,
		acquired_at, expires_at, coordination_endpoint_id, policy_profile, config_version, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.ID, l.TriggerID, l.Owner, l.TargetRepo, sqlitedb.NullString(l.TargetAgent), string(l.State), l.Attempt, l.MaxAttempts,
		sqlitedb.Millis(l.AcquiredAt), sqlitedb.Millis(l.ExpiresAt), sqlitedb.NullString(l.CoordinationEndpointID), l.PolicyProfile, l.ConfigVersion, sqlitedb.Millis(l.UpdatedAt))
	return err
}

// saveLeaseTx writes what a transition may change.
func (s *Store) saveLeaseTx(tx *sql.Tx, l lease.Lease) error {
	_, err := s.DB.TxExec(tx, `UPDATE leases SET state = ?, attempt = ?, max_attempts = ?, acquired_at = ?, expires_at = ?, next_retry_at = ?,
		last_checkpoint_at = ?, coordination_endpoint_id = ?, tamq_endpoint_id = ?, local_lease_id = ?, wake_outcome = ?,
		stop_reason = ?, updated_at = ?, released = ? WHERE lease_id = ?`,
		string(l.State), l.Attempt, l.MaxAttempts, sqlitedb.Millis(l.AcquiredAt), sqlitedb.Millis(l.ExpiresAt), sqlitedb.NullMillis(l.NextRetryAt),
		sqlitedb.NullMillis(l.LastCheckpointAt), sqlitedb.NullString(l.CoordinationEndpointID), sqlitedb.NullString(l.TamqEndpointID), sqlitedb.NullString(l.LocalLeaseID), sqlitedb.NullString(string(l.WakeOutcome)),
		sqlitedb.NullString(l.StopReason), sqlitedb.Millis(l.UpdatedAt), sqlitedb.NullString(string(l.Released)), l.ID)
	return err
}

// change is one transition of a lease inside a write transaction: it
// returns the new lease (the same one when nothing changed) and the
// receipts to write with it.
type change func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error)

// update applies ch to one lease in one write transaction.
func (s *Store) update(ctx context.Context, id, op string, ch change) (lease.Lease, error) {
	now := s.Clock.Now()
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
func (s *Store) applyTx(tx *sql.Tx, from lease.Lease, now time.Time, ch change) (lease.Lease, error) {
	to, receipts, err := ch(tx, from, now)
	if err != nil {
		return from, err
	}
	if to != from {
		if err := s.saveLeaseTx(tx, to); err != nil {
			return from, err
		}
		if from.State.Live() && !to.State.Live() {
			state := lease.TriggerStopped
			if to.State == lease.Completed {
				state = lease.TriggerCompleted
			}
			if err := s.setTriggerStateTx(tx, to.TriggerID, state, sqlitedb.Millis(now)); err != nil {
				return from, err
			}
		}
	}
	for _, r := range receipts {
		r.At = now
		if err := s.addReceiptTx(tx, r); err != nil {
			return from, err
		}
	}
	return to, nil
}

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

// Offer takes a new lease for a trigger (attempt 1, offered until the ack
// deadline) and marks the trigger leased, with a receipt. endpointID is the
// coordination endpoint the wake will go to; it may be empty. A trigger
// that has a live lease already: conflict.
func (s *Store) Offer(ctx context.Context, triggerID, endpointID string, t lease.Timing) (lease.Lease, error) {
	now := s.Clock.Now()
	var out lease.Lease
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		tr, err := scanTrigger(s.DB.TxQueryRow(tx, `SELECT `+triggerColumns+` FROM triggers WHERE id = ?`, triggerID))
		if err != nil {
			return triggerMissing(err, triggerID)
		}
		live, state, err := s.liveLeaseTx(tx, triggerID)
		if err != nil {
			return err
		}
		if live != "" {
			return errs.New(errs.Conflict, "trigger %s already has lease %s (%s)", triggerID, live, state).
				WithHint("one live lease per trigger: wait for lease %s to end", live)
		}
		if err := s.endpointKnownTx(tx, endpointID); err != nil {
			return err
		}
		l, err := lease.Offer(tr, NewID(), now, t)
		if err != nil {
			return err
		}
		l.CoordinationEndpointID, l.PolicyProfile, l.ConfigVersion = endpointID, s.PolicyProfile, s.ConfigVersion
		if err := s.insertLeaseTx(tx, l); err != nil {
			return err
		}
		if err := s.setTriggerStateTx(tx, triggerID, lease.TriggerLeased, sqlitedb.Millis(now)); err != nil {
			return err
		}
		if _, err := s.waitTriggerTx(tx, triggerID, "", "", now); err != nil {
			return err
		}
		r := leaseReceipt(l, KindLeaseOffered, string(tr.Reason))
		r.At, r.Detail["max_attempts"] = now, l.MaxAttempts
		out = l
		return s.addReceiptTx(tx, r)
	})
	return out, storageErr(err, "offer a lease for trigger "+triggerID)
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

// RecordWake records the wake of attempt: its outcome and tamq's message id
// on the lease (only while that attempt is the lease's current one: an
// answer for an earlier attempt changes nothing), with a receipt "wake.sent"
// (status the capability) or "wake.failed" (reason the error), either way.
// An unavailable wake withdraws the attempt (no window could take it; it
// costs nothing) and the trigger waits, with w.Wait, until w.Until or until
// a window opens.
func (s *Store) RecordWake(ctx context.Context, leaseID string, attempt int, w WakeRecord) (lease.Lease, error) {
	return s.update(ctx, leaseID, "record the wake of", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to := l
		kind, status, reason := KindWakeSent, w.Capability, w.Reason
		if w.Err != "" {
			kind, status, reason = KindWakeFailed, "failed", w.Err
		} else {
			if err := s.endpointKnownTx(tx, w.CoordinationEndpointID); err != nil {
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
			waiting, err := s.waitTriggerTx(tx, l.TriggerID, w.Wait, w.Reason, now)
			if err != nil {
				return l, nil, err
			}
			out = append(out, transitionReceipt(to, withdrawn, "withdrawn: "+w.Reason))
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
func (s *Store) Ack(ctx context.Context, leaseID string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "acknowledge", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, changed, err := l.Ack(now, t, attempt)
		if err != nil || !changed {
			return to, nil, err
		}
		r := transitionReceipt(l, to, "")
		by.into(r.Detail)
		return to, []receipt.Receipt{r}, nil
	})
}

// Renew extends a held lease. Only the first renewal (acknowledged →
// running) writes a receipt; the others move its deadline silently.
func (s *Store) Renew(ctx context.Context, leaseID string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "renew", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Renew(now, t, attempt)
		if err != nil || to.State == l.State {
			return to, nil, err
		}
		r := transitionReceipt(l, to, "")
		by.into(r.Detail)
		return to, []receipt.Receipt{r}, nil
	})
}

// Checkpoint records a checkpoint on its lease (c.LeaseID) and extends the
// lease, with a receipt that holds no summary: the count of changed files,
// the task and the blocked reason. A checkpoint with a blocked reason stops
// the lease (blocked), with a receipt of that too. attempt is the attempt
// the agent names (0: none; a checkpoint observed in State Hub names none).
func (s *Store) Checkpoint(ctx context.Context, c lease.Checkpoint, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
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
		if _, err := s.DB.TxExec(tx, `INSERT INTO checkpoints (lease_id, task_id, summary, files_changed, next_action, blocked_reason, recorded_at, statehub_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rec.LeaseID, sqlitedb.NullString(rec.TaskID), rec.Summary, string(files), sqlitedb.NullString(rec.NextAction),
			sqlitedb.NullString(string(rec.BlockedReason)), sqlitedb.Millis(rec.RecordedAt), sqlitedb.NullString(c.SourceID)); err != nil {
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
		out := []receipt.Receipt{r}
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
func (s *Store) Release(ctx context.Context, leaseID, result, reason string, attempt int, by Who, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "release", func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Release(lease.Result(result), reason, now, t, attempt)
		if err != nil {
			return l, nil, err
		}
		r := transitionReceipt(l, to, lease.ReleaseReason(lease.Result(result), reason))
		r.Detail["result"] = result
		by.into(r.Detail)
		return to, []receipt.Receipt{r}, nil
	})
}

// sweep applies ch to every lease the where clause (with now as its one
// argument) selects, in one write transaction, and returns them changed.
func (s *Store) sweep(ctx context.Context, now time.Time, op, where string, ch change) ([]lease.Lease, error) {
	var out []lease.Lease
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		out = nil
		due, err := readLeases(tx.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE `+where+` ORDER BY rowid`, sqlitedb.Millis(now)))
		if err != nil {
			return err
		}
		for _, l := range due {
			to, err := s.applyTx(tx, l, now, ch)
			if err != nil {
				return err
			}
			out = append(out, to)
		}
		return nil
	})
	return out, storageErr(err, op)
}

// ExpireDue ends every attempt whose deadline has come by now: the lease
// waits in retry_wait for its next attempt, or stops when its attempts are
// used up ("exhausted").
func (s *Store) ExpireDue(ctx context.Context, now time.Time, t lease.Timing) ([]lease.Lease, error) {
	return s.sweep(ctx, now, "expire leases", `state IN `+runningOut+` AND expires_at <= ?`,
		func(_ *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
			to, _, err := l.Expire(now, t)
			if err != nil {
				return l, nil, err
			}
			r := transitionReceipt(l, to, lease.ExpiryReason(l.State))
			switch {
			case lease.Withdrawn(l, to):
				r.Reason = "withdrawn: the wake never reached tamq"
			case to.State == lease.Stopped:
				r.Reason, r.Detail["expiry"] = to.StopReason, lease.ExpiryReason(l.State)
			}
			return to, []receipt.Receipt{r}, nil
		})
}

// DueRetries lists the leases in retry_wait whose next attempt is due by
// now, oldest first: the service judges each before it is offered again.
func (s *Store) DueRetries(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE state = 'retry_wait' AND next_retry_at <= ? ORDER BY next_retry_at, rowid`, sqlitedb.Millis(now)))
	return ls, storageErr(err, "read the leases due for their next attempt")
}

// Reoffer offers a lease in retry_wait again, its next attempt due; its
// wake is then pending (see PendingWakes). The trigger waits no more.
func (s *Store) Reoffer(ctx context.Context, leaseID string, t lease.Timing) (lease.Lease, error) {
	return s.update(ctx, leaseID, "offer again", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Reoffer(now, t)
		if err != nil {
			return l, nil, err
		}
		if _, err := s.waitTriggerTx(tx, l.TriggerID, "", "", now); err != nil {
			return l, nil, err
		}
		return to, []receipt.Receipt{transitionReceipt(l, to, "retry due")}, nil
	})
}

// Postpone moves the next attempt of a lease in retry_wait to until (it
// cannot be offered yet) and records why its trigger waits.
func (s *Store) Postpone(ctx context.Context, leaseID string, until time.Time, wait lease.Wait, detail string) (lease.Lease, error) {
	return s.update(ctx, leaseID, "postpone", func(tx *sql.Tx, l lease.Lease, now time.Time) (lease.Lease, []receipt.Receipt, error) {
		to, _, err := l.Postpone(until, now)
		if err != nil {
			return l, nil, err
		}
		waiting, err := s.waitTriggerTx(tx, l.TriggerID, wait, detail, now)
		if err != nil || waiting == nil {
			return to, nil, err
		}
		return to, []receipt.Receipt{*waiting}, nil
	})
}

// BringForward makes the postponed next attempts due now: what they waited
// for (a window, an agent) may be there. It returns how many.
func (s *Store) BringForward(ctx context.Context) (int, error) {
	var n int64
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE leases SET next_retry_at = ? WHERE state = 'retry_wait' AND next_retry_at > ?
			AND trigger_id IN (SELECT id FROM triggers WHERE wait_reason IS NOT NULL)`, sqlitedb.Millis(s.Clock.Now()), sqlitedb.Millis(s.Clock.Now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), storageErr(err, "bring waiting attempts forward")
}

// StopLease stops a live lease for good with reason (and, when the stop is
// a gate, names the gate on its trigger), with a receipt. Its trigger stops
// with it.
func (s *Store) StopLease(ctx context.Context, leaseID, gate, reason string) (lease.Lease, error) {
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

// LiveLeasesOfRepo lists the live leases for repo, oldest first: a repo's
// agent works on one at a time.
func (s *Store) LiveLeasesOfRepo(ctx context.Context, repo string) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE target_repo = ? AND state NOT IN ('completed', 'stopped') ORDER BY rowid`, repo))
	return ls, storageErr(err, "read the live leases of "+repo)
}

// readLeases reads the leases a query returns (rows and err as QueryContext
// returns them).
func readLeases[R interface {
	scanner
	Next() bool
	Err() error
	Close() error
}](rows R, err error) ([]lease.Lease, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lease.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// PendingWakes lists the offered leases whose current attempt has no wake
// answer yet, oldest offer first: the wakes to send, or to send again after
// a crash (tamq's wake is idempotent on lease id and attempt).
func (s *Store) PendingWakes(ctx context.Context) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE state = 'offered' AND wake_outcome IS NULL ORDER BY acquired_at, rowid`))
	return ls, storageErr(err, "read pending wakes")
}

// NextDue is the earliest time a lease needs the sweeper: the deadline of a
// live lease or the next attempt of one in retry_wait. ok is false when no
// lease is waiting on a time.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT min(due) FROM (
		SELECT min(expires_at) AS due FROM leases WHERE state IN `+runningOut+`
		UNION ALL SELECT min(next_retry_at) FROM leases WHERE state = 'retry_wait')`).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, false, storageErr(err, "read the next lease deadline")
	}
	return sqlitedb.FromMillis(due.Int64), true, nil
}

// Lease reads one lease.
func (s *Store) Lease(ctx context.Context, id string) (lease.Lease, error) {
	l, err := scanLease(s.DB.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE lease_id = ?`, id))
	return l, storageErr(leaseMissing(err, id), "read lease "+id)
}

// Leases lists leases newest first, of one state ("" for all), at most
// limit (0: all), skipping the first offset (the next page of a listing).
func (s *Store) Leases(ctx context.Context, state string, limit, offset int) ([]lease.Lease, error) {
	if state != "" && !slices.Contains(lease.States, lease.State(state)) {
		return nil, errs.New(errs.BadRequest, "unknown lease state %q", state)
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE ?1 = '' OR state = ?1 ORDER BY rowid DESC LIMIT ?2 OFFSET ?3`, state, limit, offset))
	return ls, storageErr(err, "read leases")
}

// LeaseCounts counts leases by state; every state is present.
func (s *Store) LeaseCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, st := range lease.States {
		out[string(st)] = 0
	}
	rows, err := s.DB.Query(ctx, `SELECT state, count(*) FROM leases GROUP BY state`)
	if err != nil {
		return out, storageErr(err, "count leases")
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return out, storageErr(err, "count leases")
		}
		out[state] = n
	}
	return out, storageErr(rows.Err(), "count leases")
}

// LatestCheckpoint reads the last checkpoint recorded on a lease; nil when
// it has none.
func (s *Store) LatestCheckpoint(ctx context.Context, leaseID string) (*lease.Checkpoint, error) {
	return s.latestCheckpoint(ctx, `lease_id = ?`, leaseID)
}

// LatestTaskCheckpoint reads the last checkpoint recorded about a task,
// whatever lease it was recorded on; nil when there is none. A new lease of
// the task (its agent blocked, and a person set the task back to todo)
// resumes from it.
func (s *Store) LatestTaskCheckpoint(ctx context.Context, taskID string) (*lease.Checkpoint, error) {
	return s.latestCheckpoint(ctx, `task_id = ?`, taskID)
}

func (s *Store) latestCheckpoint(ctx context.Context, where string, arg string) (*lease.Checkpoint, error) {
	var c lease.Checkpoint
	var files string
	var blocked string
	var recorded int64
	err := s.DB.QueryRow(ctx, `SELECT lease_id, COALESCE(task_id, ''), summary, files_changed, COALESCE(next_action, ''),
		COALESCE(blocked_reason, ''), recorded_at FROM checkpoints WHERE `+where+` ORDER BY id DESC LIMIT 1`, arg).
		Scan(&c.LeaseID, &c.TaskID, &c.Summary, &files, &c.NextAction, &blocked, &recorded)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storageErr(err, "read the latest checkpoint of "+arg)
	}
	if err := json.Unmarshal([]byte(files), &c.FilesChanged); err != nil {
		return nil, errs.Wrap(errs.Storage, err, "read the changed files of a checkpoint of %s", arg)
	}
	c.BlockedReason, c.RecordedAt = lease.BlockedReason(blocked), sqlitedb.FromMillis(recorded)
	return &c, nil
}

// LatestCheckpointOfTask is when the engine last recorded a checkpoint about
// task (zero when never): a checkpoint observed in State Hub that is older
// resumes nothing.
func (s *Store) LatestCheckpointOfTask(ctx context.Context, task string) (time.Time, error) {
	var at sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT max(recorded_at) FROM checkpoints WHERE task_id = ?`, task).Scan(&at)
	if err != nil || !at.Valid {
		return time.Time{}, storageErr(err, "read the checkpoints of task "+task)
	}
	return sqlitedb.FromMillis(at.Int64), nil
}
