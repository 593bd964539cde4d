package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// tableLines reads every row a query returns, one line per row.
func tableLines(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%#v", v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrationCompactsMessages: messages of every kind and state, as
// version 5 held them, are converted in place by migration 6 and read back
// through the view messages exactly as the table held them, and through
// the store; their leases and receipts stay with them. The migration backs
// the database up first.
func TestMigrationCompactsMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.sqlite3")
	old, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations[:5]})
	if err != nil {
		t.Fatal(err)
	}
	const (
		send     = "0190a1b2-c3d4-7e5f-8a6b-000000000001"
		batch    = "0190a1b2-c3d4-7e5f-8a6b-0000000000b0"
		replay1  = "0190a1b2-c3d4-7e5f-8a6b-000000000002"
		replay2  = "0190a1b2-c3d4-7e5f-8a6b-000000000003"
		wake     = "0190a1b2-c3d4-7e5f-8a6b-000000000004"
		claimed  = "0190a1b2-c3d4-7e5f-8a6b-000000000005"
		upper    = "0190A1B2-C3D4-7E5F-8A6B-000000000006" // not canonical: kept as text
		failed   = "0190a1b2-c3d4-7e5f-8a6b-000000000007"
		handMade = "m-by-hand"
	)
	transition, queued, delivering, injected := codeOf()[KindTransition], codeOf()["queued"], codeOf()["delivering"], codeOf()["injected"]
	for _, q := range []string{
		`INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES ('tmux-amq-7', '/s', 7, 's', 'connected', 1, 1)`,
		`INSERT INTO messages (id, batch_id, endpoint_id, coordination_endpoint_id, sender, sender_kind, target_repo, body,
			ack_mode, state, attempts, max_attempts, idempotency_key, request_hash, correlation_id, replay_of, policy_profile,
			config_version, created_at, updated_at, next_attempt_at, ack_deadline_at, injected_at, acked_at, failed_at,
			last_error, replay_endpoint_id) VALUES
		('` + send + `', '` + send + `', 'tmux-amq-7', NULL, 'net-kingdom', 'worker', 'railiance', 'hi', 'injected', 'injected',
			1, 3, NULL, NULL, NULL, NULL, 'default@1', 'cfg1', 1000, 1005, 1000, NULL, 1005, NULL, NULL, NULL, NULL),
		('` + replay1 + `', '` + batch + `', 'tmux-amq-7', NULL, 'operator', 'replay', 'railiance', 'hi', 'acknowledged', 'acknowledged',
			1, 3, NULL, NULL, NULL, '` + send + `', 'default@1', 'cfg2', 2000, 2900, 2000, NULL, 2005, 2900, NULL, NULL, 'tmux-amq-7'),
		('` + replay2 + `', '` + batch + `', 'tmux-amq-7', NULL, 'operator', 'replay', 'net-kingdom', 'there', 'injected', 'queued',
			0, 3, NULL, NULL, NULL, '` + failed + `', 'default@1', 'cfg2', 2000, 2000, 2500, NULL, NULL, NULL, NULL, 'agent exited', 'tmux-amq-7'),
		('` + wake + `', '` + wake + `', 'tmux-amq-7', 'ce-1', 'coordination-engine', 'coordination', 'railiance', 'wake up',
			'acknowledged', 'awaiting_ack', 2, 5, 'lease-1#2', 'hash', 'rev-3', NULL, 'default@1', 'cfg1', 3000, 3100, 3000, 9000,
			3100, NULL, NULL, NULL, NULL),
		('` + claimed + `', '` + claimed + `', 'tmux-amq-7', NULL, 'operator', 'operator', 'railiance', 'now', 'injected', 'delivering',
			1, 3, NULL, NULL, NULL, NULL, '', '', 4000, 4001, 4000, NULL, NULL, NULL, NULL, NULL, NULL),
		('` + upper + `', 'odd batch', NULL, NULL, 'net-kingdom', 'worker', 'net-kingdom', 'self', 'injected', 'injected',
			1, 3, NULL, NULL, NULL, NULL, 'default@1', 'cfg1', 5000, 5000, 5000, NULL, 5000, NULL, NULL, NULL, NULL),
		('` + failed + `', '` + failed + `', 'tmux-amq-7', NULL, 'net-kingdom', 'worker', 'railiance', 'lost', 'injected', 'failed',
			3, 3, NULL, NULL, NULL, NULL, 'default@1', 'cfg1', 500, 900, 900, NULL, NULL, NULL, 900, 'write failed', NULL),
		('` + handMade + `', 'b-by-hand', NULL, NULL, 'a', 'worker', 'b', '', 'injected', 'injected',
			0, 0, NULL, NULL, NULL, NULL, 'p', 'c', 6000, 6000, NULL, NULL, NULL, NULL, NULL, '', NULL)`,
		`INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
			VALUES ('` + claimed + `', 'lease-a', 1, 'svc', 4001, 4002)`,
	} {
		if err := exec(t, old, q); err != nil {
			t.Fatal(err)
		}
	}
	// Receipts as version 5 writes them: the send's transitions repeat its
	// row (of_message), one more names it in full.
	for i, status := range []int{queued, delivering, injected} {
		var from any
		if i > 0 {
			from = []int{queued, delivering}[i-1]
		}
		if err := exec(t, old, `INSERT INTO receipt_rows (at, kind, subject, status, reason, from_state, attempt, endpoint_id,
			detail, projected_after, of_message) VALUES (?, ?, ?, ?, ?, ?, 1, 'tmux-amq-7', ?, NULL, 1)`,
			1000+i, transition, subjectValue(send), status, codeOf()["accepted"], from, []any{nil, nil, `{"batch_size":2}`}[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec(t, old, `INSERT INTO receipt_rows (at, kind, subject, status, reason, policy_profile, config_version, detail)
		VALUES (1500, ?, ?, ?, 'by hand', 'default@1', 'cfg1', '{"to":"queued"}')`, transition, subjectValue(replay2), queued); err != nil {
		t.Fatal(err)
	}
	const (
		allMessages = `SELECT * FROM messages ORDER BY created_at, id`
		allLeases   = `SELECT message_id, lease_id, attempt, holder, acquired_at, expires_at FROM delivery_leases`
	)
	wantMessages := tableLines(t, old.Reader, allMessages)
	wantReceipts := receiptTable(t, old.Reader)
	wantLeases := tableLines(t, old.Reader, allLeases)
	wantOrder := tableLines(t, old.Reader, `SELECT id FROM messages ORDER BY rowid`)
	old.Close()

	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, BackupDir: filepath.Join(dir, "backups"), Migrations: Migrations})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(ctx); v != sqlitedb.LatestVersion(Migrations) {
		t.Fatalf("schema version %d after migrating", v)
	}
	if _, err := os.Stat(db.BackupPath); db.BackupPath == "" || err != nil {
		t.Errorf("no backup before the migration: %q, %v", db.BackupPath, err)
	}
	if got := tableLines(t, db.Reader, allMessages); !slices.Equal(got, wantMessages) {
		t.Errorf("messages after migrating:\n%v\nwant\n%v", got, wantMessages)
	}
	// The storage order (export's) is kept.
	if got := tableLines(t, db.Reader, `SELECT `+subjectTextSQL("id")+` FROM message_rows ORDER BY rowid`); !slices.Equal(got, wantOrder) {
		t.Errorf("stored in the order %v, want %v", got, wantOrder)
	}
	if got := receiptTable(t, db.Reader); !slices.Equal(got, wantReceipts) {
		t.Errorf("receipts after migrating:\n%v\nwant\n%v", got, wantReceipts)
	}
	if got := tableLines(t, db.Reader, `SELECT `+subjectTextSQL("message_id")+`, lease_id, attempt, holder, acquired_at, expires_at
		FROM delivery_leases`); !slices.Equal(got, wantLeases) {
		t.Errorf("leases after migrating:\n%v\nwant\n%v", got, wantLeases)
	}
	var compact int
	if err := db.Reader.QueryRow(`SELECT count(*) FROM message_rows WHERE typeof(id) = 'blob' AND batch_id IS NULL`).Scan(&compact); err != nil || compact != 4 {
		t.Errorf("%d messages stored as their own batch with a 16-byte id, %v; want 4", compact, err)
	}

	// The store reads them as the domain has them.
	s := New(db, func() time.Time { return time.UnixMilli(10000) })
	m, err := s.Deliveries.Get(ctx, replay1)
	if err != nil || m.BatchID != batch || m.ReplayOf != send || m.SenderKind != queue.FromReplay || m.State != queue.Acknowledged ||
		m.PolicyProfile != "default@1" || m.ConfigVersion != "cfg2" || m.Sender != "operator" || m.Target != "railiance" {
		t.Errorf("replay reads back as %+v, %v", m, err)
	}
	if m, err := s.Deliveries.Get(ctx, upper); err != nil || m.ID != upper || m.BatchID != "odd batch" {
		t.Errorf("a text id reads back as %+v, %v", m, err)
	}
	w, hash, err := WakeByKey(ctx, db.Reader, "lease-1#2")
	if err != nil || w.ID != wake || hash != "hash" || w.CorrelationID != "rev-3" || w.CoordinationEndpointID != "ce-1" ||
		w.State != queue.AwaitingAck || !w.AckDeadlineAt.Equal(time.UnixMilli(9000)) {
		t.Errorf("wake reads back as %+v %q, %v", w, hash, err)
	}
	page, err := History(ctx, db.Reader, Page{Filter: Filter{BatchID: batch}})
	if err != nil || len(page) != 2 || page[0].ID != replay1 && page[0].ID != replay2 {
		t.Errorf("the replayed batch: %+v, %v", page, err)
	}
	page, err = History(ctx, db.Reader, Page{Filter: Filter{BatchID: send}})
	if err != nil || len(page) != 1 || page[0].ID != send {
		t.Errorf("a send's batch: %+v, %v", page, err)
	}
	page, err = History(ctx, db.Reader, Page{Filter: Filter{Repo: "net-kingdom", State: "injected"}})
	if err != nil || len(page) != 2 || page[0].ID != upper || page[1].ID != send {
		t.Errorf("net-kingdom's injected messages: %+v, %v", page, err)
	}
	expired, err := s.Deliveries.ExpiredLeases(ctx, "svc")
	if err != nil || !slices.Equal(expired, []string{claimed}) {
		t.Errorf("expired leases %v, %v", expired, err)
	}
	st, err := Stats(ctx, db.Reader, time.UnixMilli(10000))
	if err != nil || st.Counts["injected"] != 3 || st.Counts["queued"] != 1 || st.Counts["delivering"] != 1 ||
		st.Counts["awaiting_ack"] != 1 || st.Counts["acknowledged"] != 1 || st.Counts["failed"] != 1 || st.HistoryMessages != 8 {
		t.Errorf("stats %+v, %v", st, err)
	}
	// Version 7's state: a wake cancelled in place, read back through the
	// store and the view, the file still whole.
	if c, err := s.Deliveries.Transition(ctx, wake, "lease ended", func(m *queue.Message) error { return m.Cancel(time.UnixMilli(9500), "lease ended") }); err != nil ||
		c.State != queue.Cancelled {
		t.Fatalf("cancel the wake: %+v, %v", c, err)
	}
	if got := tableLines(t, db.Reader, `SELECT state FROM messages WHERE id = '`+wake+`'`); !slices.Equal(got, []string{`[]interface {}{"cancelled"}`}) {
		t.Errorf("the view reads the cancelled wake as %v", got)
	}
	if err := exec(t, db, `INSERT INTO message_rows (`+messageRowColumns+`) SELECT `+messageRowColumns+` FROM message_rows WHERE 0`); err != nil {
		t.Fatal(err)
	}
	if got := tableLines(t, db.Reader, `PRAGMA integrity_check`); !slices.Equal(got, []string{`[]interface {}{"ok"}`}) {
		t.Errorf("integrity_check after the migration: %v", got)
	}
	// Version 8's state: a delivery held back, read back through the view.
	if _, err := db.Writer.ExecContext(ctx, `UPDATE message_rows SET state = 7 WHERE id = ?`, idValue(wake)); err != nil {
		t.Errorf("the widened CHECK refuses held: %v", err)
	}
	if got := tableLines(t, db.Reader, `SELECT state FROM messages WHERE id = '`+wake+`'`); !slices.Equal(got, []string{`[]interface {}{"held"}`}) {
		t.Errorf("the view reads the held wake as %v", got)
	}
	if _, err := db.Writer.ExecContext(ctx, `UPDATE message_rows SET state = 8 WHERE id = ?`, idValue(wake)); err == nil {
		t.Error("the widened CHECK takes a state no code has")
	}
	// A message the store writes now goes beside them, its texts coded once.
	n := &queue.Message{Sender: "net-kingdom", SenderKind: queue.FromWorker, Target: "railiance", Body: "new",
		AckMode: "injected", MaxRetries: 3, PolicyProfile: "default@1", ConfigVersion: "cfg1"}
	if err := s.Queue.Enqueue(ctx, []*queue.Message{n}); err != nil {
		t.Fatal(err)
	}
	var texts int
	if err := db.Reader.QueryRow(`SELECT count(*) FROM message_texts`).Scan(&texts); err != nil || texts != 12 {
		t.Errorf("%d texts, %v; want 12", texts, err)
	}
}
