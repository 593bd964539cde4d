package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/sqlitedb/schematest"
)

func setup(t *testing.T) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{
		Path: filepath.Join(t.TempDir(), "tamq.sqlite3"), Migrations: Migrations,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sqlitedb.DB, q string, args ...any) error {
	t.Helper()
	return db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	})
}

const insertMessage = `INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
	max_attempts, idempotency_key, policy_profile, config_version, created_at, updated_at)
	VALUES (?, 'b1', 'operator', 'operator', 'net-kingdom', ?, 'injected', ?, 4, ?, 'default@1', 'cfg', 1, 1)`

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	db := setup(t)
	schematest.AtLatest(t, db, Migrations)
	schematest.Must(t, exec(t, db, insertMessage, "m1", "hello", "queued", "k1"))
	schematest.Must(t, exec(t, db, insertMessage, "m2", strings.Repeat("é", 4096), "queued", nil)) // exactly 8 KiB of UTF-8

	schematest.ExpectRefused(t, db,
		schematest.Refuse("body over 8 KiB", insertMessage, "m3", strings.Repeat("x", 8193), "queued", nil),
		schematest.Refuse("unknown state", insertMessage, "m4", "x", "lost", nil),
		schematest.Refuse("reused idempotency key", insertMessage, "m5", "x", "queued", "k1"),
		schematest.Refuse("duplicate id", insertMessage, "m1", "x", "queued", nil),
		schematest.Refuse("lease for unknown message", `INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
			VALUES ('ghost', 'l1', 1, 'svc', 1, 2)`),
		schematest.Refuse("second lease on a message", `INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
			VALUES ('m1', 'l1', 1, 'svc', 1, 2), ('m1', 'l2', 1, 'svc', 1, 2)`),
		schematest.Refuse("attempts above 9", `INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
			max_attempts, policy_profile, config_version, created_at, updated_at)
			VALUES ('m7', 'b1', 'o', 'operator', 'r', 'x', 'injected', 'queued', 10, 'p', 'c', 1, 1)`),
		schematest.Refuse("window mode", `INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES ('tmux-amq-1', '/s', 1, 's', 'connected', 1, 1);
			INSERT INTO windows (endpoint_id, repo, repo_path, mode, created_at, updated_at)
			VALUES ('tmux-amq-1', 'r', '/p', 'auto', 1, 1)`),
		schematest.Refuse("text in an integer column", `UPDATE message_rows SET attempts = 'many' WHERE id = 'm1'`),
	)
	var n int
	if err := db.Reader.QueryRow(`SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 2 {
		t.Errorf("messages = %d, %v; a refused statement left rows behind", n, err)
	}
}

// TestSchemaChecksMatchTheDomain: every enum column's CHECK, as the migrated
// database has it, allows exactly the domain's values of that enum, so the
// Go constants and the schema cannot drift apart.
func TestSchemaChecksMatchTheDomain(t *testing.T) {
	t.Parallel()
	db := setup(t)
	schematest.CheckEnum(t, db, "endpoints", "state", queue.Names(queue.EndpointStates))
	schematest.CheckEnum(t, db, "windows", "mode", queue.Names(queue.WindowModes))
	schematest.CheckEnum(t, db, "windows", "agent_end", queue.Names(queue.AgentEnds))
	// A message's enums are codes (schema version 6): each list holds every
	// value of the domain once, and the CHECK allows exactly its codes.
	codes := []struct {
		column string
		codes  []string
		want   []string
	}{
		{"state", stateCodes, queue.Names(queue.States)},
		{"ack_mode", ackModeCodes, ackmode.Names()},
		{"sender_kind", senderKindCodes, queue.Names(queue.SenderKinds)},
	}
	ddl := schematest.TableSQL(t, db, "message_rows")
	for _, c := range codes {
		if got, want := slices.Sorted(slices.Values(c.codes)), slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
			t.Errorf("%s: codes for %q, the domain has %q", c.column, got, want)
		}
		check := `\b` + c.column + `\s+INTEGER NOT NULL CHECK \(` + c.column + ` BETWEEN 0 AND ` + strconv.Itoa(len(c.want)-1) + `\)`
		if !regexp.MustCompile(check).MatchString(ddl) {
			t.Errorf("message_rows: no %s in\n%s", check, ddl)
		}
	}
}
