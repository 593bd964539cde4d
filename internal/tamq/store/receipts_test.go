package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// receiptTable reads every receipt through the receipts view (version 5)
// or table (version 4), one line per row; the detail is compared as JSON
// (its keys may come back in another order).
func receiptTable(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT id, at, kind, subject_id, status, reason, attempt, next_retry_at, endpoint_id,
		coordination_endpoint_id, policy_profile, config_version, detail, projected_at FROM receipts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v := make([]any, 14)
		p := make([]any, 14)
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		if d, ok := v[12].(string); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("receipt %v: detail %q: %v", v[0], d, err)
			}
			b, _ := json.Marshal(m)
			v[12] = string(b)
		}
		out = append(out, fmt.Sprintf("%#v", v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrationCompactsReceipts: a version 4 database's receipts, converted
// by migration 5, read back through the view exactly as the table held them,
// keep their ids (and so their published names), and the next receipt never
// takes the id of one purged before the migration. The migration backs the
// database up first.
func TestMigrationCompactsReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.sqlite3")
	old, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations[:4]})
	if err != nil {
		t.Fatal(err)
	}
	const m1, m2, gone = "0190a1b2-c3d4-7e5f-8a6b-1c2d3e4f5a6b", "0190a1b2-c3d4-7e5f-8a6b-1c2d3e4f5a6c", "0190a1b2-c3d4-7e5f-8a6b-000000000000"
	for _, q := range []string{
		`INSERT INTO messages (id, batch_id, endpoint_id, sender, sender_kind, target_repo, body, ack_mode, state, max_attempts,
			policy_profile, config_version, created_at, updated_at) VALUES
			('` + m1 + `', '` + m1 + `', NULL, 'operator', 'operator', 'net-kingdom', 'hi', 'injected', 'injected', 3, 'default@1', 'cfg1', 1, 1),
			('` + m2 + `', 'batch', NULL, 'repo-a', 'worker', 'repo-b', 'hi', 'acknowledged', 'awaiting_ack', 3, 'default@1', 'cfg1', 1, 1)`,
		// As version 4's AddReceiptTx wrote them (detail keys sorted).
		`INSERT INTO receipts (at, kind, subject_id, status, reason, attempt, next_retry_at, endpoint_id, coordination_endpoint_id,
			policy_profile, config_version, detail, projected_at) VALUES
		(1000, 'message.transition', '` + m1 + `', 'queued', 'accepted', NULL, 1000, NULL, NULL, 'default@1', 'cfg1',
			'{"ack_mode":"injected","sender_kind":"operator","target":"net-kingdom","to":"queued"}', 1500),
		(1001, 'message.transition', '` + m1 + `', 'delivering', 'claimed for delivery', 1, NULL, 'tmux-amq-7', NULL, 'default@1', 'cfg1',
			'{"ack_mode":"injected","from":"queued","sender_kind":"operator","target":"net-kingdom","to":"delivering"}', NULL),
		(1002, 'message.transition', '` + m1 + `', 'injected', 'written to terminal', 1, NULL, 'tmux-amq-7', 'ce-1', 'default@1', 'cfg1',
			'{"ack_mode":"injected","batch_size":2,"from":"delivering","sender_kind":"operator","target":"net-kingdom","to":"injected","took_ms":1.5}', NULL),
		(1003, 'message.transition', '` + m2 + `', 'awaiting_ack', 'a reason of its own', 2, NULL, NULL, NULL, 'other@2', 'cfg1',
			'{"ack_mode":"acknowledged","from":"lost","sender_kind":"worker","target":"repo-b","to":"awaiting_ack"}', NULL),
		(1004, 'message.transition', '` + m2 + `', 'awaiting_ack', 'x', NULL, NULL, NULL, NULL, 'default@1', 'cfg1',
			'{"ack_mode":"acknowledged","from":"a-state-of-its-own","sender_kind":"worker","target":"repo-b","to":"awaiting_ack"}', NULL),
		(1005, 'message.rejected', '` + gone + `', 'rejected', 'body_invalid', NULL, NULL, NULL, NULL, 'default@1', 'cfg1', '{}', NULL),
		(1006, 'endpoint.register', 'tmux-amq-7', 'connected', NULL, NULL, NULL, 'tmux-amq-7', NULL, NULL, NULL, '{"windows":2}', 2000),
		(1007, 'some.new.kind', 'X0190A1B2', 'odd status', NULL, NULL, NULL, NULL, NULL, 'default@1', NULL, NULL, NULL),
		(1008, 'service.start', NULL, 'started', NULL, NULL, NULL, NULL, NULL, 'default@1', 'cfg1', NULL, NULL)`,
		// The newest receipt was purged: its id must never come back.
		`DELETE FROM receipts WHERE id = 9`,
	} {
		if err := exec(t, old, q); err != nil {
			t.Fatal(err)
		}
	}
	want := receiptTable(t, old.Reader)
	var instance string
	if err := old.Reader.QueryRow(`SELECT value FROM meta WHERE key = 'instance'`).Scan(&instance); err != nil {
		t.Fatal(err)
	}
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
	if got := receiptTable(t, db.Reader); !slices.Equal(got, want) {
		t.Errorf("receipts after migrating:\n%v\nwant\n%v", got, want)
	}
	var compact int
	if err := db.Reader.QueryRow(`SELECT count(*) FROM receipt_rows WHERE of_message = 1 AND policy_profile IS NULL
		AND typeof(subject) = 'blob' AND typeof(kind) = 'integer'`).Scan(&compact); err != nil || compact != 4 {
		t.Errorf("%d receipts stored compactly, %v; want the 4 transitions that repeat their message", compact, err)
	}

	s := New(db, func() time.Time { return time.UnixMilli(3000) })
	pending, err := s.Receipts.UnpublishedReceipts(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range pending {
		names = append(names, u.Receipt.ID)
	}
	wantNames := []string{}
	for _, id := range []int{2, 3, 4, 5, 6, 8} {
		wantNames = append(wantNames, "tamq:"+instance+":"+strconv.Itoa(id))
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("published as %v, want %v", names, wantNames)
	}
	if d := pending[1].Receipt.Detail; pending[1].Receipt.LocalMessageID != m1 || d["batch_size"] != 2.0 || d["from"] != "delivering" ||
		d["target"] != "net-kingdom" || d["to"] != "injected" || d["endpoint_id"] != "tmux-amq-7" {
		t.Errorf("receipt 3 publishes as %+v", pending[1].Receipt)
	}
	if err := s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: receipt.KindServiceStart, Status: "started"}); err != nil {
		t.Fatal(err)
	}
	var last int64
	if err := db.Reader.QueryRow(`SELECT max(id) FROM receipts`).Scan(&last); err != nil || last != 10 {
		t.Errorf("the next receipt has id %d, %v; want 10 (9 was used before the migration)", last, err)
	}
}

// TestNewerSchemaStillRefused: a database of a schema newer than this
// binary's is left untouched.
func TestNewerSchemaStillRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations})
	if err != nil {
		t.Fatal(err)
	}
	newer := sqlitedb.LatestVersion(Migrations) + 1
	if err := exec(t, db, `PRAGMA user_version = `+strconv.Itoa(newer)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations}); !errs.Is(err, errs.SchemaTooNew) {
		t.Fatalf("opening schema %d: %v, want schema_too_new", newer, err)
	}
}

// TestReceiptsReadBackAsWritten: receipts the store writes now, compact or
// not, read back with the detail and versions they were given.
func TestReceiptsReadBackAsWritten(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	s.Receipts.PolicyProfile, s.Receipts.ConfigVersion = "default@9", "cfg9"
	ctx := context.Background()
	m := &queue.Message{Sender: "operator", SenderKind: queue.FromOperator, Target: "net-kingdom", Body: "hello",
		AckMode: ackmode.Injected, MaxRetries: 3, PolicyProfile: "p@1", ConfigVersion: "c1"}
	if err := s.Queue.Enqueue(ctx, []*queue.Message{m}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliveries.TransitionDetail(ctx, m.ID, "an unusual reason", map[string]any{"batch_size": 2, "body": "never stored"},
		func(m *queue.Message) error { return m.Claim(s.Queue.Now()) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "endpoint.register", SubjectID: "tmux-amq-1", Status: "connected",
		Detail: map[string]any{"windows": 1}}); err != nil {
		t.Fatal(err)
	}
	got, err := Receipts(ctx, s.DB.Reader, KindTransition)
	if err != nil || len(got) != 2 {
		t.Fatalf("%d transition receipts, %v", len(got), err)
	}
	want := []map[string]any{
		{"to": "queued", "target": "net-kingdom", "sender_kind": "operator", "ack_mode": "injected"},
		{"to": "delivering", "from": "queued", "target": "net-kingdom", "sender_kind": "operator", "ack_mode": "injected", "batch_size": 2.0},
	}
	for i, r := range got {
		if fmt.Sprint(r.Detail) != fmt.Sprint(want[i]) || r.SubjectID != m.ID {
			t.Errorf("receipt %d: %s %+v, want detail %v", i, r.SubjectID, r.Detail, want[i])
		}
	}
	if got[1].Reason != "an unusual reason" || got[1].Status != "delivering" {
		t.Errorf("second receipt %+v", got[1])
	}
	var policy, config string
	if err := s.DB.Reader.QueryRow(`SELECT group_concat(policy_profile), group_concat(config_version) FROM receipts`).Scan(&policy, &config); err != nil ||
		policy != "p@1,p@1,default@9" || config != "c1,c1,cfg9" {
		t.Errorf("versions %q %q, %v", policy, config, err)
	}
	var compact int
	if err := s.DB.Reader.QueryRow(`SELECT count(*) FROM receipt_rows WHERE of_message = 1 AND detail IS NULL OR detail = '{"batch_size":2}'`).
		Scan(&compact); err != nil || compact != 2 {
		t.Errorf("%d transitions stored compactly, %v", compact, err)
	}
}
