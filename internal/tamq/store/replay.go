package store

import (
	"context"
	"database/sql"

	"github.com/tmux-amq/tamq/internal/queue"
)

// Replay stores checked replayed messages in one transaction, as new queued
// messages of one batch. inserted[i] is false for a message already replayed
// into the same endpoint (or whose idempotency key is taken): it is skipped,
// and nothing existing is ever changed.
func (s *Queue) Replay(ctx context.Context, batchID string, msgs []*queue.Message) (inserted []bool, err error) {
	now := s.Now()
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		inserted = make([]bool, len(msgs))
		for i, m := range msgs {
			m.ID, m.BatchID = NewID(), batchID
			m.State, m.CreatedAt, m.UpdatedAt, m.NextAttemptAt = queue.Queued, now, now, now
			ok, err := s.insertTx(tx, m, true)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			inserted[i] = true
			if err := s.receipts.insertReceiptTx(tx, transitionReceipt(m, "", "replayed"), m); err != nil {
				return err
			}
		}
		return nil
	})
	return inserted, err
}
