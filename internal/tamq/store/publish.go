package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// ReceiptSource is the source State Hub knows tamq's receipts by.
const ReceiptSource = "tamq"

// Unpublished is a receipt State Hub does not have yet: its row, for
// MarkPublished, and the form State Hub receives.
type Unpublished struct {
	RowID   int64
	Receipt contract.Receipt
}

// UnpublishedReceipts returns up to limit receipts not yet published, oldest
// first. The partial index receipt_rows_pending holds exactly these, so the
// query does not walk the receipts already published, however many.
func (s *ReceiptLog) UnpublishedReceipts(ctx context.Context, limit int) ([]Unpublished, error) {
	instance, err := s.instance(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB.Query(ctx, `SELECT id, at, kind, COALESCE(subject_id, ''), status, COALESCE(reason, ''), COALESCE(attempt, 0),
		COALESCE(next_retry_at, 0), COALESCE(endpoint_id, ''), COALESCE(coordination_endpoint_id, ''),
		COALESCE(policy_profile, ''), COALESCE(config_version, ''), COALESCE(detail, '')
		FROM receipts WHERE id IN (SELECT id FROM receipt_rows INDEXED BY receipt_rows_pending
			WHERE projected_after IS NULL ORDER BY id LIMIT ?) ORDER BY id`, limit)
	if err != nil {
		return nil, storageErr(err, "read unpublished receipts")
	}
	defer rows.Close()
	var out []Unpublished
	for rows.Next() {
		var u Unpublished
		var at, nextRetry int64
		var subject, endpoint, detail string
		r := &u.Receipt
		if err := rows.Scan(&u.RowID, &at, &r.Kind, &subject, &r.Status, &r.Reason, &r.Attempt, &nextRetry, &endpoint,
			&r.CoordinationEndpointID, &r.PolicyProfile, &r.ConfigVersion, &detail); err != nil {
			return nil, storageErr(err, "read unpublished receipts")
		}
		r.ID = ReceiptSource + ":" + instance + ":" + strconv.FormatInt(u.RowID, 10)
		r.Source = ReceiptSource
		r.At = sqlitedb.FromMillis(at)
		if nextRetry != 0 {
			t := sqlitedb.FromMillis(nextRetry)
			r.NextRetryAt = &t
		}
		if detail != "" {
			// Sanitized when it was written (receipt.Sanitize); a row that
			// does not parse goes without its detail rather than block
			// every receipt after it.
			if json.Unmarshal([]byte(detail), &r.Detail) != nil {
				r.Detail = nil
			}
		}
		// A message's receipts name it as the local message id; other
		// subjects (an endpoint, a repo, a purge) and tamq's endpoint have
		// no field of their own in the contract, so they go in the detail.
		switch {
		case strings.HasPrefix(r.Kind, "message.") && subject != "":
			r.LocalMessageID = subject
		case subject != "":
			r.Detail = withDetail(r.Detail, "subject_id", subject)
		}
		if endpoint != "" {
			r.Detail = withDetail(r.Detail, "endpoint_id", endpoint)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, storageErr(err, "read unpublished receipts")
	}
	return out, nil
}

func withDetail(d map[string]any, k string, v any) map[string]any {
	if d == nil {
		d = map[string]any{}
	}
	d[k] = v
	return d
}

// instance is the database's random id (schema version 4).
func (s *ReceiptLog) instance(ctx context.Context) (string, error) {
	var id string
	if err := s.DB.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'instance'`).Scan(&id); err != nil {
		return "", storageErr(err, "read the database instance id")
	}
	return id, nil
}

// MarkPublished records that State Hub has the receipts of these rows. A
// row already marked keeps its first time.
func (s *ReceiptLog) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := s.DB.TxExec(tx, `UPDATE receipt_rows SET projected_after = ? - at WHERE id = ? AND projected_after IS NULL`, sqlitedb.Millis(at), id); err != nil {
				return err
			}
		}
		return nil
	})
	return storageErr(err, "mark receipts published")
}

// PendingReceipts counts the receipts not yet published.
func (s *ReceiptLog) PendingReceipts(ctx context.Context) (int, error) {
	var n int
	err := s.DB.QueryRow(ctx, `SELECT count(*) FROM receipt_rows INDEXED BY receipt_rows_pending WHERE projected_after IS NULL`).Scan(&n)
	return n, storageErr(err, "count unpublished receipts")
}
