package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
)

// wakeByKey reads a wake's message and its request hash by idempotency key.
const wakeByKey = `SELECT ` + messageColumns + `, COALESCE(request_hash, '') FROM message_rows WHERE idempotency_key = ?`

// EnqueueWake stores a wake's message unless one with its idempotency key is
// there already. It reads and inserts in one write transaction, so identical
// wakes racing each other leave one message: the first is inserted, the
// others get it back with the hash of the request that made it (the caller
// compares it with its own to tell a repeat from a conflicting reuse).
func (s *Queue) EnqueueWake(ctx context.Context, m *queue.Message, requestHash string) (existing *queue.Message, existingHash string, err error) {
	now := s.Now()
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var hash string
		old, err := scanMessage(withExtra{tx.QueryRowContext(ctx, wakeByKey, m.IdempotencyKey), []any{&hash}})
		switch {
		case err == nil:
			existing, existingHash = &old, hash
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		m.ID = NewID()
		m.BatchID = m.ID
		m.CreatedAt, m.UpdatedAt, m.NextAttemptAt = now, now, now
		m.State = queue.Queued
		if _, err := s.insertTx(tx, m, false); err != nil {
			return err
		}
		if _, err := s.DB.TxExec(tx, `UPDATE message_rows SET request_hash = ? WHERE id = ?`, requestHash, idValue(m.ID)); err != nil {
			return err
		}
		if err := s.receipts.insertReceiptTx(tx, transitionReceipt(m, "", "accepted"), m); err != nil {
			return err
		}
		return s.supersedeAttemptsTx(tx, m, now)
	})
	return existing, existingHash, err
}

// withExtra scans a message row followed by extra columns into extra.
type withExtra struct {
	row   scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.row.Scan(append(dest, w.extra...)...) }

// WakeByKey reads the message of a wake's idempotency key and the hash of
// the request that made it.
func WakeByKey(ctx context.Context, db *sql.DB, key string) (queue.Message, string, error) {
	var hash string
	m, err := scanMessage(withExtra{db.QueryRowContext(ctx, wakeByKey, key), []any{&hash}})
	if errors.Is(err, sql.ErrNoRows) {
		return m, "", errs.New(errs.NotFound, "no wake %s", key)
	}
	return m, hash, err
}

// supersedeAttemptsTx cancels the prompts of the lease's earlier attempts
// that still wait for delivery or for their ack: the engine has moved on to
// attempt m, so presenting an older one again (it would, at its ack
// deadline) would type a prompt whose lease commands can only be refused.
func (s *Queue) supersedeAttemptsTx(tx *sql.Tx, m *queue.Message, now time.Time) error {
	lease, attempt, ok := WakeKey(m.IdempotencyKey)
	if !ok || attempt == 1 {
		return nil
	}
	_, err := s.cancelWakesTx(tx, lease, attempt-1, "superseded by a newer attempt of its lease", map[string]any{"superseded_by": m.ID}, now)
	return err
}

// WakeKey reads a wake's idempotency key, "<lease id>#<attempt>" (the
// service makes it).
func WakeKey(key string) (leaseID string, attempt int, ok bool) {
	hash := strings.LastIndexByte(key, '#')
	if hash <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[hash+1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return key[:hash], n, true
}

// CancelWakes cancels the wakes of a lease's attempts up to upTo (0: every
// attempt) that are not written yet or wait for an ack tamq would present
// again, each with a receipt naming why, and returns the cancelled ones. A
// wake being delivered is cancelled too: its writer confirms the state
// right before the first byte and then writes nothing.
func (s *Queue) CancelWakes(ctx context.Context, leaseID string, upTo int, reason string) ([]queue.Message, error) {
	var out []queue.Message
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.cancelWakesTx(tx, leaseID, upTo, reason, nil, s.Now())
		return err
	})
	return out, err
}

func (s *Queue) cancelWakesTx(tx *sql.Tx, leaseID string, upTo int, reason string, detail map[string]any, now time.Time) ([]queue.Message, error) {
	// The keys "<lease>#<n>" sort between "<lease>#" and "<lease>$" ('$'
	// follows '#'): a range the idempotency key's index serves, where a
	// LIKE would read every message. A wake being delivered is cancelled
	// too: its writer has not written it yet, or it is too late anyway,
	// and either way nothing puts it back in the queue.
	ms, err := readMessages(tx.Query(`SELECT `+messageColumns+` FROM message_rows WHERE idempotency_key >= ? AND idempotency_key < ?
		AND state IN `+stateIn(queue.Queued, queue.Delivering, queue.AwaitingAck), leaseID+"#", leaseID+"$"))
	if err != nil {
		return nil, err
	}
	var out []queue.Message
	for _, m := range ms {
		l, attempt, ok := WakeKey(m.IdempotencyKey)
		if !ok || l != leaseID || (upTo > 0 && attempt > upTo) {
			continue
		}
		c, err := s.deliveries.transitionTx(tx, m.ID, reason, detail, func(x *queue.Message) error { return x.Cancel(now, reason) })
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
