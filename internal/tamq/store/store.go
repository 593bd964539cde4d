package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// MessageStates lists every message state, in lifecycle order, as the
// database and the command line spell them.
var MessageStates = queue.Names(queue.States)

// sqlLit is a domain value as an SQL string literal. Queries name states
// and modes as literals rather than bind them as parameters, so SQLite can
// use the partial indexes written with the same literals; the values are the
// domain's constants, never input. A message's state is a code (stateLit).
func sqlLit[T ~string](v T) string { return "'" + string(v) + "'" }

var (
	// pendingStates are the states of a message not yet delivered for good.
	pendingStates = stateIn(queue.Queued, queue.Delivering, queue.AwaitingAck)
	// undelivered are the states of a message waiting on its endpoint: for
	// a delivery or for an ack. A delivery under way belongs to the
	// service writing it.
	undelivered = stateIn(queue.Queued, queue.AwaitingAck)
)

// Store is tamq's durable state: one database, and a type per concept that
// writes its tables (each small enough to read whole). They share the
// database handle and the clock; the service's single-writer rule (new
// messages through its committer's group commit, Queue.EnqueueEach) is kept
// by who calls them, not by them. Reads that any process may make are the
// package's functions over a *sql.DB (Endpoints, History, Stats, ...).
type Store struct {
	DB *sqlitedb.DB
	// Queue takes new messages in: sends, replays, wakes.
	Queue *Queue
	// Deliveries moves queued messages through their lives: claims,
	// transitions, ack deadlines, the notes of why a window's messages wait.
	Deliveries *Deliveries
	// Endpoints records tmux servers and their windows.
	Endpoints *EndpointTable
	// Receipts writes the receipts every change leaves, and marks them
	// published.
	Receipts *ReceiptLog
	// Purges deletes history.
	Purges *Purger
}

// tables is what every part of the store shares (sqlitedb.Tables).
type tables = sqlitedb.Tables

// Queue writes new messages, each with its "accepted" receipt.
type Queue struct {
	tables
	receipts   *ReceiptLog
	deliveries *Deliveries
}

// Deliveries writes the changes of a queued message's state, each with its
// receipt, and reads what the dispatcher and the ack expirer need next.
type Deliveries struct {
	tables
	receipts *ReceiptLog
}

// EndpointTable writes the endpoints and their windows.
type EndpointTable struct {
	tables
	receipts   *ReceiptLog
	deliveries *Deliveries
}

// Purger deletes messages of history with their receipts.
type Purger struct {
	tables
	receipts *ReceiptLog
}

// ReceiptLog writes receipts and marks them published.
type ReceiptLog struct {
	tables
	// PolicyProfile (name@version) and ConfigVersion are in force for this
	// process: every receipt carries them (spec section 6.1), so a receipt
	// written without its own gets these.
	PolicyProfile string
	ConfigVersion string
	// Added, when set, is told of every receipt written: the publisher's
	// kick. It runs inside the receipt's transaction, before the commit, so
	// it must only signal (the publisher waits a moment before it reads); it
	// never blocks the write.
	Added func()
}

// New is the store of an open database; now stamps what it writes.
func New(db *sqlitedb.DB, now func() time.Time) *Store {
	t := tables{DB: db, Now: now}
	receipts := &ReceiptLog{tables: t}
	deliveries := &Deliveries{tables: t, receipts: receipts}
	return &Store{
		DB:         db,
		Queue:      &Queue{tables: t, receipts: receipts, deliveries: deliveries},
		Deliveries: deliveries,
		Endpoints:  &EndpointTable{tables: t, receipts: receipts, deliveries: deliveries},
		Receipts:   receipts,
		Purges:     &Purger{tables: t, receipts: receipts},
	}
}

// Open opens (creating and migrating as needed) tamq's database at p, for
// the service and for the commands that write to it beside the service.
func Open(ctx context.Context, p paths.Paths, busy time.Duration, now func() time.Time) (*Store, error) {
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{
		Path: p.Database, BackupDir: p.BackupDir, BusyTimeout: busy, Migrations: Migrations, Now: now,
	})
	if err != nil {
		return nil, err
	}
	return New(db, now), nil
}

// AddReceipt writes one sanitized receipt in its own transaction.
func (s *ReceiptLog) AddReceipt(ctx context.Context, r receipt.Receipt) error {
	return s.DB.WriteTx(ctx, func(tx *sql.Tx) error { return s.AddReceiptTx(tx, r) })
}

// AddReceiptTx writes a receipt inside the caller's transaction, so a
// transition and its receipt commit together.
func (s *ReceiptLog) AddReceiptTx(tx *sql.Tx, r receipt.Receipt) error {
	return s.insertReceiptTx(tx, r, nil)
}

// storageErr names the store operation that failed: an SQLite error says
// what went wrong, not what tamq was doing. Errors that already carry a code
// (a refused transition, a missing message) pass unchanged.
func storageErr(err error, op string) error { return errs.During(errs.Storage, err, op) }

// Receipts returns the receipts of a kind, oldest first.
func Receipts(ctx context.Context, db *sql.DB, kind string) ([]receipt.Receipt, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, at, kind, COALESCE(subject_id, ''), status, COALESCE(reason, ''), COALESCE(detail, '')
		FROM receipts WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []receipt.Receipt
	for rows.Next() {
		var r receipt.Receipt
		var at int64
		var detail string
		if err := rows.Scan(&r.ID, &at, &r.Kind, &r.SubjectID, &r.Status, &r.Reason, &detail); err != nil {
			return nil, err
		}
		r.At = sqlitedb.FromMillis(at)
		if detail != "" {
			if err := json.Unmarshal([]byte(detail), &r.Detail); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// QueueStats is what status shows of the queue and the delivery leases.
type QueueStats struct {
	Counts              map[string]int
	OldestPendingAt     time.Time // zero when nothing is pending
	ActiveLeases        int
	ExpiredLeases       int
	UnpublishedReceipts int
	HistoryBytes        int64
	HistorySince        time.Time
	HistoryMessages     int
}

// Stats reads queue, lease and receipt figures; db may be a read-only handle.
func Stats(ctx context.Context, db *sql.DB, now time.Time) (QueueStats, error) {
	st := QueueStats{Counts: map[string]int{}}
	for _, s := range MessageStates {
		st.Counts[s] = 0
	}
	rows, err := db.QueryContext(ctx, `SELECT state, count(*) FROM message_rows GROUP BY state`)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var code int64
		var n int
		if err := rows.Scan(&code, &n); err != nil {
			rows.Close()
			return st, err
		}
		state, err := decodeCode(stateCodes, "state", code)
		if err != nil {
			rows.Close()
			return st, err
		}
		st.Counts[state] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	var oldest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT min(created_at) FROM message_rows WHERE state IN `+pendingStates).Scan(&oldest); err != nil {
		return st, err
	}
	if oldest.Valid {
		st.OldestPendingAt = sqlitedb.FromMillis(oldest.Int64)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE expires_at > ?), count(*) FILTER (WHERE expires_at <= ?) FROM delivery_leases`,
		sqlitedb.Millis(now), sqlitedb.Millis(now)).Scan(&st.ActiveLeases, &st.ExpiredLeases); err != nil {
		return st, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM receipt_rows WHERE projected_after IS NULL`).Scan(&st.UnpublishedReceipts); err != nil {
		return st, err
	}
	st.HistoryBytes, st.HistorySince, st.HistoryMessages, err = HistorySize(ctx, db)
	return st, err
}

// messageBytes estimates what one message row holds, as stored: its text
// and id columns plus 8 bytes per integer column (the codes of its repeated
// texts and enums included). Purge reports the same estimate. octet_length
// reads a value's size from the row header without loading the value.
const messageBytes = `octet_length(body) + octet_length(id) + COALESCE(octet_length(batch_id), 0)
	+ COALESCE(octet_length(endpoint_id), 0) + COALESCE(octet_length(coordination_endpoint_id), 0)
	+ COALESCE(octet_length(idempotency_key), 0) + COALESCE(octet_length(request_hash), 0)
	+ COALESCE(octet_length(correlation_id), 0) + COALESCE(octet_length(replay_of), 0)
	+ COALESCE(octet_length(last_error), 0) + 8 * 17`

// HistorySize estimates the bytes of history, messages and receipts alike
// (receipts take about as much of the file as messages), and gives its
// oldest message and the number of messages.
func HistorySize(ctx context.Context, db *sql.DB) (bytes int64, since time.Time, count int, err error) {
	h, err := measureHistory(ctx, db)
	return h.bytes(), h.oldest, h.messages, err
}

// NewestTime is the latest time tamq wrote into the database (a message,
// a receipt, an endpoint), or the zero time when it holds none: a clock that
// reads earlier has gone backwards. Each part is read through an index or
// from a small table, so it stays quick on a large history.
func NewestTime(ctx context.Context, db *sql.DB) (time.Time, error) {
	return sqlitedb.NewestTime(ctx, db, `SELECT max(v) FROM (
		SELECT (SELECT at FROM receipt_rows ORDER BY id DESC LIMIT 1) AS v
		UNION ALL SELECT max(created_at) FROM message_rows
		UNION ALL SELECT max(updated_at) FROM endpoints)`)
}
