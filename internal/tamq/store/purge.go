package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// finalStates are the states no delivery leaves on its own; only messages in
// them are ever purged. A failed message waits only for `tamq retry`.
var finalStates = stateIn(queue.Injected, queue.Acknowledged, queue.Failed, queue.Cancelled, queue.Held)

// receiptBytes estimates what one receipt row holds, as messageBytes does
// for a message: its text columns plus 8 bytes per integer column.
// The row is receipt_rows' compact one (what the file holds): a code or a
// number counts its 8 bytes, like the other integer columns.
const receiptBytes = `octet_length(kind) + octet_length(status) + COALESCE(octet_length(subject), 0)
	+ COALESCE(octet_length(reason), 0) + COALESCE(octet_length(endpoint_id), 0)
	+ COALESCE(octet_length(coordination_endpoint_id), 0) + COALESCE(octet_length(policy_profile), 0)
	+ COALESCE(octet_length(config_version), 0) + COALESCE(octet_length(detail), 0) + 8 * 6`

// aboutAMessage selects the receipts about one message: those of the
// message.* kinds that name it. They go with it when it is purged.
func aboutAMessage() string {
	return `(kind IN ` + messageKinds() + ` OR typeof(kind) = 'text' AND kind GLOB 'message.*') AND subject IS NOT NULL`
}

// history is what the history holds, in estimated bytes.
type history struct {
	messageBytes, receiptBytes int64
	messageReceiptBytes        int64 // of the receipts about a message
	messages, receipts         int
	oldest                     time.Time // the oldest message; zero without messages
}

func (h history) bytes() int64 { return h.messageBytes + h.receiptBytes }

// receiptShare estimates the receipts one message takes with it when it is
// purged: their average per message. Finding each message's own would take a
// pass over every receipt, since receipts are not indexed by message.
func (h history) receiptShare() int64 {
	if h.messages == 0 {
		return 0
	}
	return h.messageReceiptBytes / int64(h.messages)
}

// measureHistory reads the history's figures in one statement, so from one
// snapshot; q is a database or a transaction.
func measureHistory(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (history, error) {
	var h history
	var oldest sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT m.bytes, m.oldest, m.n, r.bytes, r.message_bytes, r.n
		FROM (SELECT COALESCE(sum(`+messageBytes+`), 0) AS bytes, min(created_at) AS oldest, count(*) AS n FROM message_rows) AS m,
			(SELECT COALESCE(sum(`+receiptBytes+`), 0) AS bytes,
				COALESCE(sum(`+receiptBytes+`) FILTER (WHERE `+aboutAMessage()+`), 0) AS message_bytes, count(*) AS n FROM receipt_rows) AS r`).
		Scan(&h.messageBytes, &oldest, &h.messages, &h.receiptBytes, &h.messageReceiptBytes, &h.receipts)
	if oldest.Valid {
		h.oldest = sqlitedb.FromMillis(oldest.Int64)
	}
	return h, sqlitedb.Wrap(err, "measure the history")
}

// PurgeRule chooses what a purge removes. Among the final-state messages
// that Repo and State allow, a message goes when it was created before
// Before, or while the history (every message, pending ones included, and
// every receipt) is larger than MaxBytes, oldest first. Zero Before and
// MaxBytes choose nothing. Limit, when positive, takes at most that many,
// the oldest: the count an operator confirmed, so a purge planned again
// where it runs never removes more than was shown.
type PurgeRule struct {
	Before   time.Time
	MaxBytes int64
	Repo     string
	State    string
	Limit    int
}

// PurgePlan is what a purge would remove.
type PurgePlan struct {
	IDs []string
	// Bytes is estimated as history size counts them: the messages' own,
	// and for their receipts the history's average per message.
	Bytes           int64
	Oldest, Newest  time.Time
	HistoryBytes    int64 // the whole history before the purge, receipts included
	HistoryMessages int
	HistoryReceipts int
}

// PlanPurge reads, from one snapshot, which messages the rule removes.
func PlanPurge(ctx context.Context, db *sql.DB, r PurgeRule) (PurgePlan, error) {
	p, err := planPurge(ctx, db, r)
	return p, sqlitedb.Wrap(err, "plan the purge")
}

func planPurge(ctx context.Context, db *sql.DB, r PurgeRule) (PurgePlan, error) {
	var p PurgePlan
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return p, err
	}
	defer tx.Rollback()
	h, err := measureHistory(ctx, tx)
	if err != nil {
		return p, err
	}
	p.HistoryBytes, p.HistoryMessages, p.HistoryReceipts = h.bytes(), h.messages, h.receipts
	if r.Before.IsZero() && r.MaxBytes <= 0 {
		return p, nil
	}
	share := h.receiptShare()
	conds := []string{"+state IN " + finalStates} // + keeps SQLite off the state index: the walk is by creation
	var args []any
	if r.Repo != "" {
		conds, args = append(conds, "(+sender = "+textCode+" OR +target_repo = "+textCode+")"), append(args, r.Repo, r.Repo)
	}
	if r.State != "" {
		conds, args = append(conds, "+state = ?"), append(args, codeIn(stateCodes, r.State))
	}
	// Oldest first, in pages: with a LIMIT SQLite walks the creation index;
	// without one it would sort the whole table before the first row.
	q := `SELECT id, created_at, ` + messageBytes + ` FROM message_rows WHERE ` + strings.Join(conds, " AND ") +
		` AND created_at >= ? AND (created_at > ? OR id > ?) ORDER BY created_at, id LIMIT 2000`
	left := p.HistoryBytes
	lastCreated, lastID := int64(math.MinInt64), ""
	for {
		rows, err := tx.QueryContext(ctx, q, append(args, lastCreated, lastCreated, idValue(lastID))...)
		if err != nil {
			return p, err
		}
		n, done := 0, false
		for rows.Next() {
			var mid msgID
			var created, size int64
			if err := rows.Scan(&mid, &created, &size); err != nil {
				rows.Close()
				return p, err
			}
			id := string(mid)
			n++
			lastCreated, lastID = created, id
			old := !r.Before.IsZero() && created < msCeil(r.Before)
			over := r.MaxBytes > 0 && left > r.MaxBytes
			if !old && !over || r.Limit > 0 && len(p.IDs) >= r.Limit {
				done = true // oldest first: nothing later is older or needed for size
				break
			}
			p.IDs = append(p.IDs, id)
			p.Bytes += size + share
			left -= size + share
			if p.Oldest.IsZero() {
				p.Oldest = sqlitedb.FromMillis(created)
			}
			p.Newest = sqlitedb.FromMillis(created)
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

// Purged is what a purge deleted.
type Purged struct {
	Messages, Receipts int
}

// testHookPurgeChunk, when a test sets it, runs inside each purge
// transaction after its messages are deleted and before the receipts
// written since the purge looked for them are: where a test makes the
// transaction fail or adds such a receipt.
var testHookPurgeChunk func(tx *sql.Tx) error

// Purge deletes the planned messages in short transactions, each checking
// again that the message is in a final state (one retried meanwhile stays),
// together with the receipts about each message it deletes, so a message and
// its receipts go in one transaction. Every other receipt stays, the purge's
// own included. progress, when set, hears the count after each transaction.
// The counts are those of committed transactions only: one retried after a
// busy database counts once.
func (s *Purger) Purge(ctx context.Context, ids []string, progress func(done int)) (Purged, error) {
	var total Purged
	// Receipts are not indexed by message: one pass over them, beside the
	// service, finds those of the planned messages; each transaction then
	// also removes any written for its messages after that pass.
	receipts, seen, err := s.receiptsAbout(ctx, ids)
	if err != nil {
		return total, err
	}
	for start := 0; start < len(ids); start += PurgeChunk {
		chunk := ids[start:min(start+PurgeChunk, len(ids))]
		var done Purged
		err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
			done = Purged{}
			var gone []string
			for _, id := range chunk {
				// One id at a time: an IN list next to the state test leads
				// SQLite to walk the state index instead of the id index.
				n, err := affected(s.DB.TxExec(tx, `DELETE FROM message_rows WHERE id = ? AND state IN `+finalStates, idValue(id)))
				if err != nil {
					return err
				}
				if n == 0 {
					continue
				}
				done.Messages++
				gone = append(gone, id)
				for _, rowid := range receipts[id] {
					n, err := affected(s.DB.TxExec(tx, `DELETE FROM receipt_rows WHERE rowid = ? AND subject = ?`, rowid, subjectValue(id)))
					if err != nil {
						return err
					}
					done.Receipts += n
				}
			}
			if testHookPurgeChunk != nil {
				if err := testHookPurgeChunk(tx); err != nil {
					return err
				}
			}
			if len(gone) == 0 {
				return nil
			}
			list, _ := json.Marshal(gone)
			n, err := affected(s.DB.TxExec(tx, `DELETE FROM receipt_rows WHERE rowid > ? AND `+aboutAMessage()+`
				AND subject IN (SELECT `+subjectSQL("value")+` FROM json_each(?))`, seen, string(list)))
			done.Receipts += n
			return err
		})
		if err != nil {
			return total, err
		}
		total.Messages += done.Messages
		total.Receipts += done.Receipts
		if progress != nil {
			progress(start + len(chunk))
		}
	}
	return total, nil
}

// receiptsAbout finds, from one snapshot of the reader, the receipts about
// the given messages (their rowids by message) and the last receipt rowid
// there was.
func (s *Purger) receiptsAbout(ctx context.Context, ids []string) (map[string][]int64, int64, error) {
	out := map[string][]int64{}
	if len(ids) == 0 {
		return out, 0, nil
	}
	tx, err := s.DB.Reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, sqlitedb.Wrap(err, "find the receipts of the purged messages")
	}
	defer tx.Rollback()
	var seen int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(max(rowid), 0) FROM receipt_rows`).Scan(&seen); err != nil {
		return nil, 0, sqlitedb.Wrap(err, "find the receipts of the purged messages")
	}
	list, _ := json.Marshal(ids)
	rows, err := tx.QueryContext(ctx, `SELECT rowid, `+subjectTextSQL("subject")+` FROM receipt_rows WHERE `+aboutAMessage()+`
		AND subject IN (SELECT `+subjectSQL("value")+` FROM json_each(?))`, string(list))
	if err != nil {
		return nil, 0, sqlitedb.Wrap(err, "find the receipts of the purged messages")
	}
	defer rows.Close()
	for rows.Next() {
		var rowid int64
		var id string
		if err := rows.Scan(&rowid, &id); err != nil {
			return nil, 0, sqlitedb.Wrap(err, "find the receipts of the purged messages")
		}
		out[id] = append(out[id], rowid)
	}
	return out, seen, sqlitedb.Wrap(rows.Err(), "find the receipts of the purged messages")
}

func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// PurgeProgress hears how an executed purge goes; either may be nil.
type PurgeProgress struct {
	Deleted   func(done int)        // planned messages handled, after each transaction
	Reclaimed func(pagesLeft int64) // free pages left, after each vacuum step
}

// PurgeDone is what an executed purge did.
type PurgeDone struct {
	Purged
	ID string // its receipt's subject; "" when nothing was deleted
	// FreePagesKept says the space was not given back: the database predates
	// incremental auto-vacuum and the purge could not convert it (see
	// sqlitedb.Reclaim). SQLite reuses the pages for new rows.
	FreePagesKept bool
}

// ExecutePurge deletes the planned messages (Purge), writes the purge's
// receipt, even for a purge cut short (for what it did delete), and gives
// the space back (sqlitedb.Reclaim, with convert). The one writer of a
// database does this: the service, or tamq purge holding the service's lock.
func (s *Purger) ExecutePurge(ctx context.Context, r PurgeRule, p PurgePlan, convert bool, progress PurgeProgress) (PurgeDone, error) {
	var done PurgeDone
	var err error
	done.Purged, err = s.Purge(ctx, p.IDs, progress.Deleted)
	if done.Messages > 0 {
		done.ID = NewID()
		// Written even when ctx ended the deletion: what was deleted is
		// recorded.
		if rerr := s.receipts.AddReceipt(context.WithoutCancel(ctx), PurgeReceipt(done.ID, r, p, done.Purged)); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return done, err
	}
	done.FreePagesKept, err = s.DB.Reclaim(ctx, convert, progress.Reclaimed)
	return done, err
}

// FileBytes is the size of the database at path with its WAL.
func FileBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// KindPurged is the receipt of an executed purge.
const KindPurged = "history.purged"

// PurgeReceipt records an executed purge: its rule and counts, no bodies.
func PurgeReceipt(id string, r PurgeRule, p PurgePlan, done Purged) receipt.Receipt {
	d := map[string]any{"planned": len(p.IDs), "deleted": done.Messages, "receipts_deleted": done.Receipts, "estimated_bytes": p.Bytes}
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
	if r.Limit > 0 {
		d["limit"] = r.Limit
	}
	if !p.Oldest.IsZero() {
		d["oldest"], d["newest"] = p.Oldest.Format(time.RFC3339), p.Newest.Format(time.RFC3339)
	}
	return receipt.Receipt{Kind: KindPurged, SubjectID: id, Status: "purged", Detail: d}
}
