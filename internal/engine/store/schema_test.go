package store

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/sqlitedb/schematest"
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

var exec = schematest.Exec

const (
	insertTrigger = `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, reason, state, observed_at, updated_at)
		VALUES (?, 'task', 'T-1', ?, 'net-kingdom', 'task_actionable', 'pending', 1, 1)`
	insertLease = `INSERT INTO leases (lease_id, trigger_id, target_repo, state, attempt, acquired_at, expires_at,
		policy_profile, config_version, updated_at) VALUES (?, ?, 'net-kingdom', ?, 1, 1, 2, 'default@1', 'cfg', 1)`
)

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	db := setup(t)
	schematest.AtLatest(t, db, Migrations)
	schematest.Must(t, exec(db, insertTrigger, "t1", "rev1"))
	schematest.Must(t, exec(db, insertTrigger, "t2", "rev2")) // a new revision is a new trigger
	schematest.Must(t, exec(db, insertLease, "L1", "t1", "stopped"))
	schematest.Must(t, exec(db, insertLease, "L2", "t1", "offered")) // one live lease beside a finished one

	schematest.ExpectRefused(t, db,
		schematest.Refuse("repeated observation", insertTrigger, "t3", "rev1"),
		schematest.Refuse("second live lease for a trigger", insertLease, "L3", "t1", "retry_wait"),
		schematest.Refuse("lease for unknown trigger", insertLease, "L4", "ghost", "offered"),
		schematest.Refuse("unknown lease state", insertLease, "L5", "t2", "sleeping"),
		schematest.Refuse("foreign owner", `INSERT INTO leases (lease_id, trigger_id, owner, target_repo, state, attempt, acquired_at, expires_at,
			policy_profile, config_version, updated_at) VALUES ('L6', 't2', 'someone-else', 'r', 'offered', 1, 1, 2, 'p', 'c', 1)`),
		schematest.Refuse("unknown trigger source", `INSERT INTO triggers (id, source, source_id, source_revision, target_repo, reason, state, observed_at, updated_at)
			VALUES ('t9', 'email', 'x', '1', 'r', 'task_actionable', 'pending', 1, 1)`),
		schematest.Refuse("unknown blocked reason", `INSERT INTO checkpoints (lease_id, summary, blocked_reason, recorded_at) VALUES ('L2', 's', 'bored', 1)`),
		schematest.Refuse("checkpoint for unknown lease", `INSERT INTO checkpoints (lease_id, summary, recorded_at) VALUES ('ghost', 's', 1)`),
		schematest.Refuse("unknown wake outcome", `UPDATE leases SET wake_outcome = 'typed' WHERE lease_id = 'L2'`),
		schematest.Refuse("negative max attempts", `UPDATE leases SET max_attempts = -1 WHERE lease_id = 'L2'`),
		schematest.Refuse("lease on an endpoint never granted", `UPDATE leases SET coordination_endpoint_id = 'ce-ghost' WHERE lease_id = 'L2'`),
		schematest.Refuse("text in an integer column", `UPDATE leases SET max_attempts = 'many' WHERE lease_id = 'L2'`),
		schematest.Refuse("unknown acknowledger", `UPDATE leases SET acked_by = 'someone' WHERE lease_id = 'L2'`),
		schematest.Refuse("checkpoint of attempt 0", `INSERT INTO checkpoints (lease_id, summary, recorded_at, attempt) VALUES ('L2', 's', 1, 0)`),
	)
	schematest.Must(t, exec(db, `INSERT INTO checkpoints (lease_id, summary, blocked_reason, recorded_at) VALUES ('L2', 'did x', 'dependency', 1)`))
	schematest.Must(t, exec(db, `UPDATE leases SET wake_outcome = 'unavailable', max_attempts = 4, tamq_endpoint_id = 'tmux-amq-1' WHERE lease_id = 'L2'`))
	schematest.Must(t, exec(db, `UPDATE leases SET wake_outcome = NULL WHERE lease_id = 'L2'`))
	// Once the live lease ends, the trigger may be leased again.
	schematest.Must(t, exec(db, `UPDATE leases SET state = 'completed' WHERE lease_id = 'L2'`))
	schematest.Must(t, exec(db, insertLease, "L7", "t1", "offered"))
}

// TestSchemaChecksMatchTheDomain: every enum column's CHECK, as the migrated
// database has it, allows exactly the domain's values of that enum, so the
// Go constants and the schema cannot drift apart.
func TestSchemaChecksMatchTheDomain(t *testing.T) {
	t.Parallel()
	db := setup(t)
	schematest.CheckEnum(t, db, "triggers", "source", queue.Names(lease.Sources))
	schematest.CheckEnum(t, db, "triggers", "reason", queue.Names(lease.Reasons))
	schematest.CheckEnum(t, db, "triggers", "state", queue.Names(lease.TriggerStates))
	schematest.CheckEnum(t, db, "endpoints", "state", queue.Names(lease.EndpointStates))
	schematest.CheckEnum(t, db, "endpoint_repos", "mode", queue.Names(lease.WindowModes))
	schematest.CheckEnum(t, db, "leases", "state", queue.Names(lease.States))
	schematest.CheckEnum(t, db, "leases", "wake_outcome", queue.Names(lease.WakeOutcomes))
	schematest.CheckEnum(t, db, "leases", "owner", []string{lease.Owner})
	schematest.CheckEnum(t, db, "checkpoints", "blocked_reason", queue.Names(lease.BlockedReasons))
	schematest.CheckEnum(t, db, "leases", "acked_by", []string{lease.ByBroker, lease.ByAgent, lease.ByOperator, lease.ByTamq})
}
