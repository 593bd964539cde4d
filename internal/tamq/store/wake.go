package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/queue"
)

// wakeByKey reads a wake's message and its request hash by idempotency key.
const wakeByKey = `SELECT ` + messageColumns + `, COALESCE(request_hash, '') FROM message_rows WHERE idempotency_key = ?`

// EnqueueWake stores a wake's message unless one with its idempotency key is
// there already. It reads and inserts in one write transaction, so identical
// wakes racing each other leave one message: the first is inserted, the
// others get it back with the hash of the request that made it (the caller
// compares it with its own to tell a repeat from a conflicting reuse).
func (s *Store) EnqueueWake(ctx context.Context, m *queue.Message, requestHash string) (existing *queue.Message, existingHash string, err error) {
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
		if err := s.insertReceiptTx(tx, transitionReceipt(m, "", "accepted"), m); err != nil {
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

// supersedeAttemptsTx settles the prompts of the lease's earlier attempts
// that still wait for delivery or for their ack: the engine has moved on to
// attempt m, so presenting an older one again (it would, at its ack
// deadline) holds the window for a prompt whose lease ack can only be
// refused. They are acknowledged, with a receipt saying why. The key is
// "<lease id>#<attempt>" (the service makes it); lease ids hold no LIKE
// wildcards.
func (s *Store) supersedeAttemptsTx(tx *sql.Tx, m *queue.Message, now time.Time) error {
	hash := strings.LastIndexByte(m.IdempotencyKey, '#')
	if hash < 0 {
		return nil
	}
	older, err := readMessages(tx.Query(`SELECT `+messageColumns+` FROM message_rows WHERE idempotency_key LIKE ? AND idempotency_key != ?
		AND state IN `+undelivered, m.IdempotencyKey[:hash+1]+"%", m.IdempotencyKey))
	if err != nil {
		return err
	}
	for i := range older {
		o := &older[i]
		from := o.State
		o.Ack(now)
		if err := s.saveTx(tx, o); err != nil {
			return err
		}
		r := transitionReceipt(o, from, "superseded by a newer attempt of its lease")
		r.Detail["superseded_by"] = m.ID
		if err := s.insertReceiptTx(tx, r, o); err != nil {
			return err
		}
	}
	return nil
}
