package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// ObserverValue reads what the observer kept under key ("" when nothing).
func (s *ObserverState) ObserverValue(ctx context.Context, key string) (string, error) {
	var v string
	err := s.DB.QueryRow(ctx, `SELECT value FROM observer_state WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, storageErr(err, "read observer state "+key)
}

// SetObserverValue keeps value under key.
func (s *ObserverState) SetObserverValue(ctx context.Context, key, value string) error {
	return storageErr(s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := s.DB.TxExec(tx, `INSERT INTO observer_state (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, sqlitedb.Millis(s.Now()))
		return err
	}), "keep observer state "+key)
}

// Instance is this database's own id, made once: it namespaces the ids of
// the receipts published from it, so they stay unique across machines and
// the same across restarts.
func (s *ObserverState) Instance(ctx context.Context) (string, error) {
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := s.DB.TxExec(tx, `INSERT INTO observer_state (key, value, updated_at) VALUES ('instance', ?, ?)
			ON CONFLICT (key) DO NOTHING`, NewID(), sqlitedb.Millis(s.Now()))
		return err
	})
	if err != nil {
		return "", storageErr(err, "make the database's instance id")
	}
	return s.ObserverValue(ctx, "instance")
}
