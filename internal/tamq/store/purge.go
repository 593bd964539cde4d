package store

import (
	"context"
	"database/sql"
	"math"
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
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(sum(`+messageBytes+`), 0), count(*) FROM messages`).
		Scan(&p.HistoryBytes, &p.HistoryMessages); err != nil {
		return p, err
	}
	if r.Before.IsZero() && r.MaxBytes <= 0 {
		return p, nil
	}
	conds := []string{"+state IN " + finalStates} // + keeps SQLite off the state index: the walk is by creation
	var args []any
	if r.Repo != "" {
		conds, args = append(conds, "(+sender = ? OR +target_repo = ?)"), append(args, r.Repo, r.Repo)
	}
	if r.State != "" {
		conds, args = append(conds, "+state = ?"), append(args, r.State)
	}
	// Oldest first, in pages: with a LIMIT SQLite walks the creation index;
	// without one it would sort the whole table before the first row.
	q := `SELECT id, created_at, ` + messageBytes + ` FROM messages WHERE ` + strings.Join(conds, " AND ") +
		` AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 2000`
	left := p.HistoryBytes
	lastCreated, lastID := int64(math.MinInt64), ""
	for {
		rows, err := tx.QueryContext(ctx, q, append(args, lastCreated, lastID)...)
		if err != nil {
			return p, err
		}
		n, done := 0, false
		for rows.Next() {
			var id string
			var created, size int64
			if err := rows.Scan(&id, &created, &size); err != nil {
				rows.Close()
				return p, err
			}
			n++
			lastCreated, lastID = created, id
			old := !r.Before.IsZero() && created < msCeil(r.Before)
			over := r.MaxBytes > 0 && left > r.MaxBytes
			if !old && !over {
				done = true // oldest first: nothing later is older or needed for size
				break
			}
			p.IDs = append(p.IDs, id)
			p.Bytes += size
			left -= size
			if p.Oldest.IsZero() {
				p.Oldest = fromMS(created)
			}
			p.Newest = fromMS(created)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return p, err
		}
		if done || n < 2000 {
			return p, nil
		}
	}
}

// PurgeChunk is how many messages one purge transaction deletes: small
// enough that the service, writing at the same time, waits milliseconds.
const PurgeChunk = 1000

// Purge deletes the planned messages in short transactions, each checking
// again that the message is in a final state (one retried meanwhile stays),
// and returns how many went. progress, when set, hears the count after each
// transaction. Receipts stay: they hold no bodies and are the audit trail.
func (s *Store) Purge(ctx context.Context, ids []string, progress func(done int)) (int, error) {
	deleted := 0
	for start := 0; start < len(ids); start += PurgeChunk {
		chunk := ids[start:min(start+PurgeChunk, len(ids))]
		err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
			n := 0
			for _, id := range chunk {
				// One id at a time: an IN list next to the state test leads
				// SQLite to walk the state index instead of the primary key.
				res, err := s.DB.TxExec(tx, `DELETE FROM messages WHERE id = ? AND state IN `+finalStates, id)
				if err != nil {
					return err
				}
				k, err := res.RowsAffected()
				if err != nil {
					return err
				}
				n += int(k)
			}
			deleted += n
			return nil
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
func PurgeReceipt(id string, r PurgeRule, p PurgePlan, deleted int) receipt.Receipt {
	d := map[string]any{"planned": len(p.IDs), "deleted": deleted, "estimated_bytes": p.Bytes}
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
