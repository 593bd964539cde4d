package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// sweep applies ch to every lease the where clause (with now as its one
// argument) selects, in one write transaction, and returns them changed.
func (s *Deadlines) sweep(ctx context.Context, now time.Time, op, where string, ch change) ([]lease.Lease, error) {
	var out []lease.Lease
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		out = nil
		due, err := readLeases(tx.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE `+where+` ORDER BY rowid`, sqlitedb.Millis(now)))
		if err != nil {
			return err
		}
		for _, l := range due {
			to, err := s.leases.applyTx(tx, l, now, ch)
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
func (s *Deadlines) ExpireDue(ctx context.Context, now time.Time, t lease.Timing) ([]lease.Lease, error) {
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

// HeldWakesDue lists the offered leases whose ack deadline has come by
// now and whose wake tamq took (resumed or started), oldest first: before
// such an attempt is spent, tamq is asked whether its wake was ever
// written.
func (s *Deadlines) HeldWakesDue(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE state = 'offered' AND wake_outcome IN ('resumed', 'started') AND expires_at <= ? ORDER BY expires_at, rowid`, sqlitedb.Millis(now)))
	return ls, storageErr(err, "read the offered leases due")
}

// DueRetries lists the leases in retry_wait whose next attempt is due by
// now, oldest first: the service judges each before it is offered again.
func (s *Deadlines) DueRetries(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE state = 'retry_wait' AND next_retry_at <= ? ORDER BY next_retry_at, rowid`, sqlitedb.Millis(now)))
	return ls, storageErr(err, "read the leases due for their next attempt")
}

// BringForward makes the postponed next attempts due now: what they waited
// for (a window, an agent) may be there. It returns how many.
func (s *Deadlines) BringForward(ctx context.Context) (int, error) {
	var n int64
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE leases SET next_retry_at = ? WHERE state = 'retry_wait' AND next_retry_at > ?
			AND trigger_id IN (SELECT id FROM triggers WHERE wait_reason IS NOT NULL)`, sqlitedb.Millis(s.Now()), sqlitedb.Millis(s.Now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), storageErr(err, "bring waiting attempts forward")
}

// PendingWakes lists the offered leases whose current attempt has no wake
// answer yet, oldest offer first: the wakes to send, or to send again after
// a crash (tamq's wake is idempotent on lease id and attempt).
func (s *Deadlines) PendingWakes(ctx context.Context) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE state = 'offered' AND wake_outcome IS NULL ORDER BY acquired_at, rowid`))
	return ls, storageErr(err, "read pending wakes")
}

// NextDue is the earliest time a lease needs the sweeper: the deadline of a
// live lease or the next attempt of one in retry_wait. ok is false when no
// lease is waiting on a time.
func (s *Deadlines) NextDue(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT min(due) FROM (
		SELECT min(expires_at) AS due FROM leases WHERE state IN `+runningOut+`
		UNION ALL SELECT min(next_retry_at) FROM leases WHERE state = 'retry_wait')`).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, false, storageErr(err, "read the next lease deadline")
	}
	return sqlitedb.FromMillis(due.Int64), true, nil
}
