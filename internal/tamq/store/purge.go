package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/receipt"
)

// finalStates are the states no delivery leaves on its own; only messages in
// them are ever purged. A failed message waits only for `tamq retry`.
const finalStates = `('injected', 'acknowledged', 'failed')`

// PurgeRule chooses what a purge removes. Among the final-state messages
// that Repo and State allow, a message goes when it was created before
// Before, or while the history (every message, pending ones included) is
// larger than MaxBytes, oldest first. Zero Before and MaxBytes choose nothing.
type PurgeRule struct {
	Before   time.Time
	MaxBytes int64
	Repo     string
	State    string
}

// PurgePlan is what a purge would remove.
type PurgePlan struct {
	IDs             []string
	Bytes           int64 // estimated, as history size counts them
	Oldest, Newest  time.Time
	HistoryBytes    int64 // the whole history before the purge
	HistoryMessages int
}

// PlanPurge reads, from one snapshot, which messages the rule removes.
func PlanPurge(ctx context.Context, db *sql.DB, r PurgeRule) (PurgePlan, error) {
	var p PurgePlan
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return p, err
	}
	defer tx.Rollback()
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(sum(`+messageBytes+`), 0), min(created_at), count(*) FROM messages`).
		Scan(&p.HistoryBytes, &oldest, &p.HistoryMessages); err != nil {
		return p, err
	}
	if r.Before.IsZero() && r.MaxBytes <= 0 {
		return p, nil
	}
	conds := []string{"state IN " + finalStates}
	var args []any
	if r.Repo != "" {
		conds, args = append(conds, "(sender = ? OR target_repo = ?)"), append(args, r.Repo, r.Repo)
	}
	if r.State != "" {
		conds, args = append(conds, "state = ?"), append(args, r.State)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, created_at, `+messageBytes+` FROM messages WHERE `+
		strings.Join(conds, " AND ")+` ORDER BY created_at, id`, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	left := p.HistoryBytes
	for rows.Next() {
		var id string
		var created, size int64
		if err := rows.Scan(&id, &created, &size); err != nil {
			return p, err
		}
		old := !r.Before.IsZero() && created < msCeil(r.Before)
		over := r.MaxBytes > 0 && left > r.MaxBytes
		if !old && !over {
			break // oldest first: nothing later is older or needed for size
		}
		p.IDs = append(p.IDs, id)
		p.Bytes += size
		left -= size
		if p.Oldest.IsZero() {
			p.Oldest = fromMS(created)
		}
		p.Newest = fromMS(created)
	}
	return p, rows.Err()
}

// PurgeChunk is how many messages one purge transaction deletes: small
// enough that the service, writing at the same time, waits milliseconds.
const PurgeChunk = 500

// Purge deletes the planned messages in short transactions, each checking
// again that the message is in a final state (one retried meanwhile stays),
// and returns how many went. progress, when set, hears the count after each
// transaction. Receipts stay: they hold no bodies and are the audit trail.
func (s *Store) Purge(ctx context.Context, ids []string, progress func(done int)) (int, error) {
	deleted := 0
	for start := 0; start < len(ids); start += PurgeChunk {
		chunk := ids[start:min(start+PurgeChunk, len(ids))]
		q := `DELETE FROM messages WHERE state IN ` + finalStates + ` AND id IN (?` + strings.Repeat(", ?", len(chunk)-1) + `)`
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			deleted += int(n)
			return err
		})
		if err != nil {
			return deleted, err
		}
		if progress != nil {
			progress(start + len(chunk))
		}
	}
	return deleted, nil
}

// KindPurged is the receipt of an executed purge.
const KindPurged = "history.purged"

// PurgeReceipt records an executed purge: its rule and counts, no bodies.
func PurgeReceipt(id string, r PurgeRule, planned, deleted int, bytes int64, p PurgePlan) receipt.Receipt {
	d := map[string]any{"planned": planned, "deleted": deleted, "estimated_bytes": bytes}
	if !r.Before.IsZero() {
		d["before"] = r.Before.UTC().Format(time.RFC3339)
	}
	if r.MaxBytes > 0 {
		d["max_bytes"] = r.MaxBytes
	}
	if r.Repo != "" {
		d["repo"] = r.Repo
	}
	if r.State != "" {
		d["state"] = r.State
	}
	if !p.Oldest.IsZero() {
		d["oldest"], d["newest"] = p.Oldest.Format(time.RFC3339), p.Newest.Format(time.RFC3339)
	}
	return receipt.Receipt{Kind: KindPurged, SubjectID: id, Status: "purged", Detail: d}
}
