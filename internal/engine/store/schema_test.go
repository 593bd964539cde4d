package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// migrated is a database file with every migration applied, made once and
// copied by setup: migrating a new database costs about 0.1 s under -race,
// copying one a millisecond. TestStoreRecovery migrates one of its own.
var migrated = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "engine-store-test-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "coordination.sqlite3")
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{Path: path, Migrations: Migrations})
	if err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil { // the last close checkpoints the WAL into the file
		return nil, err
	}
	return os.ReadFile(path)
})

// setup opens a fresh migrated database of the test's own.
func setup(t *testing.T) *sqlitedb.DB {
	t.Helper()
	image, err := migrated()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "coordination.sqlite3")
	if err := os.WriteFile(path, image, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{Path: path, Migrations: Migrations, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(db *sqlitedb.DB, q string, args ...any) error {
	return db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	})
}

const (
	insertTrigger = `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, reason, state, observed_at, updated_at)
		VALUES (?, 'task', 'T-1', ?, 'net-kingdom', 'task_actionable', 'pending', 1, 1)`
	insertLease = `INSERT INTO leases (lease_id, trigger_id, target_repo, state, attempt, acquired_at, expires_at,
		policy_profile, config_version, updated_at) VALUES (?, ?, 'net-kingdom', ?, 1, 1, 2, 'default@1', 'cfg', 1)`
)

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	db := setup(t)
	if v, err := db.SchemaVersion(context.Background()); err != nil || v != sqlitedb.LatestVersion(Migrations) {
		t.Fatalf("schema version %d, %v", v, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(exec(db, insertTrigger, "t1", "rev1"))
	must(exec(db, insertTrigger, "t2", "rev2")) // a new revision is a new trigger
	must(exec(db, insertLease, "L1", "t1", "stopped"))
	must(exec(db, insertLease, "L2", "t1", "offered")) // one live lease beside a finished one

	refused := []struct {
		name string
		q    string
		args []any
	}{
		{"repeated observation", insertTrigger, []any{"t3", "rev1"}},
		{"second live lease for a trigger", insertLease, []any{"L3", "t1", "retry_wait"}},
		{"lease for unknown trigger", insertLease, []any{"L4", "ghost", "offered"}},
		{"unknown lease state", insertLease, []any{"L5", "t2", "sleeping"}},
		{"foreign owner", `INSERT INTO leases (lease_id, trigger_id, owner, target_repo, state, attempt, acquired_at, expires_at,
			policy_profile, config_version, updated_at) VALUES ('L6', 't2', 'someone-else', 'r', 'offered', 1, 1, 2, 'p', 'c', 1)`, nil},
		{"unknown trigger source", `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, reason, state, observed_at, updated_at)
			VALUES ('t9', 'email', 'x', '1', 'r', 'task_actionable', 'pending', 1, 1)`, nil},
		{"unknown blocked reason", `INSERT INTO checkpoints (lease_id, summary, blocked_reason, recorded_at) VALUES ('L2', 's', 'bored', 1)`, nil},
		{"checkpoint for unknown lease", `INSERT INTO checkpoints (lease_id, summary, recorded_at) VALUES ('ghost', 's', 1)`, nil},
		{"unknown wake outcome", `UPDATE leases SET wake_outcome = 'typed' WHERE lease_id = 'L2'`, nil},
		{"negative max attempts", `UPDATE leases SET max_attempts = -1 WHERE lease_id = 'L2'`, nil},
		{"lease on an endpoint never granted", `UPDATE leases SET coordination_endpoint_id = 'ce-ghost' WHERE lease_id = 'L2'`, nil},
		{"text in an integer column", `UPDATE leases SET max_attempts = 'many' WHERE lease_id = 'L2'`, nil},
	}
	for _, r := range refused {
		if err := exec(db, r.q, r.args...); err == nil {
			t.Errorf("%s: accepted", r.name)
		}
	}
	must(exec(db, `INSERT INTO checkpoints (lease_id, summary, blocked_reason, recorded_at) VALUES ('L2', 'did x', 'dependency', 1)`))
	must(exec(db, `UPDATE leases SET wake_outcome = 'unavailable', max_attempts = 4, tamq_endpoint_id = 'tmux-amq-1' WHERE lease_id = 'L2'`))
	must(exec(db, `UPDATE leases SET wake_outcome = NULL WHERE lease_id = 'L2'`))
	// Once the live lease ends, the trigger may be leased again.
	must(exec(db, `UPDATE leases SET state = 'completed' WHERE lease_id = 'L2'`))
	must(exec(db, insertLease, "L7", "t1", "offered"))
}

// TestSchemaChecksMatchTheDomain: every enum column's CHECK, as the migrated
// database has it, allows exactly the domain's values of that enum, so the
// Go constants and the schema cannot drift apart.
func TestSchemaChecksMatchTheDomain(t *testing.T) {
	t.Parallel()
	db := setup(t)
	columns := []struct {
		table, column string
		want          []string
	}{
		{"triggers", "source", queue.Names(lease.Sources)},
		{"triggers", "reason", queue.Names(lease.Reasons)},
		{"triggers", "state", queue.Names(lease.TriggerStates)},
		{"endpoints", "state", queue.Names(lease.EndpointStates)},
		{"endpoint_repos", "mode", queue.Names(lease.WindowModes)},
		{"leases", "state", queue.Names(lease.States)},
		{"leases", "wake_outcome", queue.Names(lease.WakeOutcomes)},
		{"leases", "owner", []string{lease.Owner}},
		{"checkpoints", "blocked_reason", queue.Names(lease.BlockedReasons)},
	}
	for _, c := range columns {
		var ddl string
		if err := db.Reader.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, c.table).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		// NOT NULL columns: CHECK (c IN (...)); nullable ones: CHECK (c IS
		// NULL OR c IN (...)); the owner: CHECK (owner = '...').
		re := regexp.MustCompile(`\b` + c.column + `\s+TEXT[^,]*?CHECK \((?:` + c.column + ` IS NULL OR )?` + c.column +
			`(?: IN \(([^)]*)\)| = ('[^']*'))\)`)
		m := re.FindStringSubmatch(ddl)
		if m == nil {
			t.Errorf("%s.%s: no CHECK of its values in\n%s", c.table, c.column, ddl)
			continue
		}
		var got []string
		for _, lit := range strings.Split(m[1]+m[2], ",") {
			got = append(got, strings.Trim(strings.TrimSpace(lit), "'"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s.%s: CHECK allows %q, the domain has %q", c.table, c.column, got, c.want)
		}
	}
}
