package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Filter selects messages for history, export and purge. Zero fields match
// everything.
type Filter struct {
	Repo    string // as sender or as target
	State   string
	Since   time.Time // created at or after
	Until   time.Time // created before
	BatchID string
	ID      string
}

// textCode is a text's code in message_texts, as a query's parameter:
// NULL, matching nothing, for a text no message holds.
const textCode = `(SELECT code FROM message_texts WHERE text = ?)`

// where is the filter as SQL conditions on message_rows; withRepo false
// leaves the repo out, for a query that places it itself.
func (f Filter) where(withRepo bool) (conds []string, args []any) {
	if withRepo && f.Repo != "" {
		conds, args = append(conds, "(sender = "+textCode+" OR target_repo = "+textCode+")"), append(args, f.Repo, f.Repo)
	}
	if f.State != "" {
		conds, args = append(conds, "state = ?"), append(args, codeIn(stateCodes, f.State))
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "created_at >= ?"), append(args, msCeil(f.Since))
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, "created_at < ?"), append(args, msCeil(f.Until))
	}
	if f.BatchID != "" {
		// batch_id is NULL for a message that is its own batch (a send).
		conds, args = append(conds, "(batch_id = ? OR id = ? AND batch_id IS NULL)"), append(args, idValue(f.BatchID), idValue(f.BatchID))
	}
	if f.ID != "" {
		conds, args = append(conds, "id = ?"), append(args, idValue(f.ID))
	}
	return conds, args
}

// msCeil is t in whole milliseconds, rounded up: stored times are whole
// milliseconds, so created_at >= msCeil(t) means created at or after t.
func msCeil(t time.Time) int64 {
	v := t.UnixMilli()
	if t.Sub(time.UnixMilli(v)) > 0 {
		v++
	}
	return v
}

// Page asks for one page of history, newest first.
type Page struct {
	Filter
	// After continues a listing: only messages older than this one.
	After string
	Limit int
}

// DefaultPageLimit is the page size when none is given.
const DefaultPageLimit = 50

// History lists one page of messages, newest first (by creation, then id).
// Paging is by key, never by offset, so a page costs the same however deep
// it is and messages arriving meanwhile never shift the pages.
func History(ctx context.Context, db *sql.DB, p Page) ([]queue.Message, error) {
	page, err := historyPage(ctx, db, p)
	return page, sqlitedb.Wrap(err, "read the history")
}

func historyPage(ctx context.Context, db *sql.DB, p Page) ([]queue.Message, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	conds, args := p.where(false)
	if p.After != "" {
		var created int64
		err := db.QueryRowContext(ctx, `SELECT created_at FROM message_rows WHERE id = ?`, idValue(p.After)).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errs.New(errs.NotFound, "no message %s to continue after (purged?)", p.After).
				WithHint("start again without --after")
		}
		if err != nil {
			return nil, err
		}
		// Not (created_at, id) < (?, ?): the indexes hold created_at alone,
		// and this form lets a walk start at the cursor's time.
		conds, args = append(conds, "created_at <= ? AND (created_at < ? OR id < ?)"), append(args, created, created, idValue(p.After))
	}
	and := func(extra ...string) string {
		all := append(extra, conds...)
		if len(all) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(all, " AND ")
	}
	const order = " ORDER BY created_at DESC, id DESC LIMIT ?"
	var q string
	var qargs []any
	if p.Repo == "" {
		q = `SELECT ` + messageColumns + ` FROM message_rows` + and() + order
		qargs = append(args, p.Limit)
	} else {
		// One index walk per role, each stopping after a page; the page is
		// the newest of the two. An OR would read every message of the repo.
		q = `SELECT ` + messageColumns + ` FROM message_rows WHERE rowid IN (
			SELECT rowid FROM (SELECT rowid FROM message_rows` + and("sender = "+textCode) + order + `)
			UNION
			SELECT rowid FROM (SELECT rowid FROM message_rows` + and("target_repo = "+textCode) + order + `))` + order
		qargs = append(qargs, p.Repo)
		qargs = append(qargs, args...)
		qargs = append(qargs, p.Limit, p.Repo)
		qargs = append(qargs, args...)
		qargs = append(qargs, p.Limit, p.Limit)
	}
	return readMessages(db.QueryContext(ctx, q, qargs...))
}

// Count is how many messages the filter matches.
func Count(ctx context.Context, db *sql.DB, f Filter) (int, error) {
	q, args := f.selectFrom("count(*)")
	var n int
	err := db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, sqlitedb.Wrap(err, "count messages")
}

// selectFrom is SELECT cols FROM message_rows with the filter as its WHERE.
func (f Filter) selectFrom(cols string) (string, []any) {
	conds, args := f.where(true)
	q := `SELECT ` + cols + ` FROM message_rows`
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	return q, args
}

// envelopeSQL builds a message's JSONL export line (the format of package
// jsonl, which owns it), all but its start (version, id, batch id), times
// and closing brace, inside SQLite: the driver fetches each column under a
// lock, so one text column instead of two dozen is what lets an export keep
// pace with reading the file, and concatenating json_quote'd values is
// several times quicker there than json_object. The ids (exportIDs) and
// times are spelled out in Go (strftime, and hex with substr, cost more than
// the rest of the line).
// ExportVersion is the version of the JSONL lines the store writes: the line
// format is internal/jsonl's (jsonl.Version), which the store does not
// import, as it imports no wire type; TestEnvelopeSQLMatchesTheRecord holds
// the two equal.
const ExportVersion = 1

// TestEnvelopeSQLMatchesTheRecord keeps the line equal to what the service
// builds from the same row, its version included. Built on first use: every
// tamq command, ping and send too, would otherwise pay for it at start.
var envelopeSQL = sync.OnceValue(func() string {
	return `''` +
		optional("endpoint_id", "endpoint_id") +
		` || ',"sender":' || json_quote(s.text) || ',"sender_kind":' || ` + jsonCaseSQL(senderKindCodes, "sender_kind") +
		` || ',"provenance":' || CASE sender_kind WHEN ` + strconv.Itoa(codeIn(senderKindCodes, string(queue.FromOperator))) + ` THEN '"o"' ELSE '""' END` +
		` || ',"target":' || json_quote(t.text) || ',"body":' || json_quote(body)` +
		` || ',"ack_mode":' || ` + jsonCaseSQL(ackModeCodes, "ack_mode") + ` || ',"state":' || ` + jsonCaseSQL(stateCodes, "state") +
		` || ',"attempts":' || attempts || ',"max_retries":' || max_attempts || ',"max_attempts":' || max_attempts` +
		` || ',"policy_profile":' || json_quote(p.text) || ',"config_version":' || json_quote(c.text)` +
		optional("idempotency_key", "idempotency_key") + optional("correlation_id", "correlation_id") +
		optional("coordination_endpoint_id", "coordination_endpoint_id") +
		optional("replay_of", subjectTextSQL("replay_of")) + optional("last_error", "last_error")
})

// exportFrom reads the message rows with their texts (envelopeSQL's s, t,
// p and c): joined, as a lookup per row costs more than the rest of a line.
// CROSS JOIN keeps message_rows the outer loop, read in storage order.
const exportFrom = `message_rows CROSS JOIN message_texts s ON s.code = sender CROSS JOIN message_texts t ON t.code = target_repo
	CROSS JOIN message_texts p ON p.code = policy_profile CROSS JOIN message_texts c ON c.code = config_version`

// exportIDs are a line's id and batch id, which start it: a UUID as its 16
// bytes, which Go spells out several times quicker than SQL, and any other
// id as JSON text; the batch id is NULL for a message that is its own batch.
const exportIDs = `CASE WHEN typeof(id) = 'blob' THEN id ELSE json_quote(id) END,
	CASE typeof(batch_id) WHEN 'blob' THEN batch_id WHEN 'null' THEN NULL ELSE json_quote(batch_id) END`

// exportID holds an id of exportIDs as scanned.
type exportID struct {
	b          []byte
	uuid, null bool
}

func (e *exportID) Scan(src any) error {
	e.b, e.uuid, e.null = e.b[:0], false, false
	switch v := src.(type) {
	case nil:
		e.null = true
	case []byte:
		if len(v) != 16 {
			return errs.New(errs.Internal, "a message id of %d bytes", len(v))
		}
		e.b, e.uuid = append(e.b, v...), true
	case string:
		e.b = append(e.b, v...)
	default:
		return errs.New(errs.Internal, "a message id of type %T", src)
	}
	return nil
}

// appendJSON appends the id as a JSON string, as json_quote spells it.
func (e *exportID) appendJSON(line []byte) []byte {
	if !e.uuid {
		return append(line, e.b...)
	}
	var t [38]byte
	t[0], t[9], t[14], t[19], t[24], t[37] = '"', '-', '-', '-', '-', '"'
	hex.Encode(t[1:9], e.b[0:4])
	hex.Encode(t[10:14], e.b[4:6])
	hex.Encode(t[15:19], e.b[6:8])
	hex.Encode(t[20:24], e.b[8:10])
	hex.Encode(t[25:37], e.b[10:16])
	return append(line, t[:]...)
}

// exportHead starts every line.
var exportHead = `{"v":` + strconv.Itoa(ExportVersion) + `,"id":`

// optional appends ,"name":"value" unless the value is NULL or empty
// (omitempty, as encoding/json does).
func optional(name, expr string) string {
	return ` || CASE WHEN ` + expr + ` IS NULL OR ` + expr + ` = '' THEN '' ELSE ',"` + name + `":' || json_quote(` + expr + `) END`
}

// jsonCaseSQL reads a code column back as its text, JSON-quoted (the codes'
// texts need no escaping).
func jsonCaseSQL(codes []string, col string) string {
	quoted := make([]string, len(codes))
	for i, c := range codes {
		quoted[i] = `"` + c + `"`
	}
	return caseSQL(quoted, col)
}

// exportTimes are the time columns appended to a line, in this order.
var exportTimes = []string{"created_at", "updated_at", "next_attempt_at", "ack_deadline_at", "injected_at", "acked_at", "failed_at"}

// ExportLines calls fn with the JSONL line (without newline) of every message
// the filter matches, in the order they were stored (oldest first), from one
// consistent snapshot. The
// line is only valid during the call.
func ExportLines(ctx context.Context, db *sql.DB, f Filter, fn func(line []byte) error) error {
	// fn's own errors carry no SQLite code and pass through Wrap unchanged.
	return sqlitedb.Wrap(exportLines(ctx, db, f, fn), "export messages")
}

func exportLines(ctx context.Context, db *sql.DB, f Filter, fn func(line []byte) error) error {
	// Storage order is the table's own: reading it needs no index, so a
	// whole-history export reads the file front to back.
	conds, args := f.where(true)
	q := `SELECT ` + exportIDs + `, ` + envelopeSQL() + `, ` + strings.Join(exportTimes, ", ") + ` FROM ` + exportFrom
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	rows, err := db.QueryContext(ctx, q+" ORDER BY message_rows.rowid", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var id, batch exportID
	var head sql.RawBytes
	times := make([]sql.NullInt64, len(exportTimes))
	dest := []any{&id, &batch, &head}
	for i := range times {
		dest = append(dest, &times[i])
	}
	var line []byte
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		line = id.appendJSON(append(line[:0], exportHead...))
		line = append(line, `,"batch_id":`...)
		if batch.null {
			line = id.appendJSON(line) // its own batch
		} else {
			line = batch.appendJSON(line)
		}
		line = append(line, head...)
		for i, t := range times {
			if !t.Valid {
				continue
			}
			line = append(line, `,"`...)
			line = append(line, exportTimes[i]...)
			line = append(line, `":"`...)
			line = sqlitedb.FromMillis(t.Int64).AppendFormat(line, time.RFC3339Nano)
			line = append(line, '"')
		}
		if err := fn(append(line, '}')); err != nil {
			return err
		}
	}
	return rows.Err()
}
