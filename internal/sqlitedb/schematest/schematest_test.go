package schematest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// recorder is a test the checks report to, so a check's own failures can be
// seen.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

var migrations = []sqlitedb.Migration{{Version: 1, Name: "one table", SQL: `CREATE TABLE t (
	id INTEGER PRIMARY KEY,
	state TEXT NOT NULL CHECK (state IN ('a', 'b')),
	mood TEXT CHECK (mood IS NULL OR mood IN ('calm')),
	owner TEXT NOT NULL DEFAULT 'me' CHECK (owner = 'me')
) STRICT`}}

func open(t *testing.T) *sqlitedb.DB {
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{Path: filepath.Join(t.TempDir(), "t.sqlite3"), Migrations: migrations})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestTheChecksSeeWhatTheSchemaAllows(t *testing.T) {
	db := open(t)
	AtLatest(t, db, migrations)
	Must(t, Exec(db, `INSERT INTO t (state) VALUES ('a')`))

	r := &recorder{TB: t}
	CheckEnum(r, db, "t", "state", []string{"a", "b"})
	CheckEnum(r, db, "t", "mood", []string{"calm"})
	CheckEnum(r, db, "t", "owner", []string{"me"})
	ExpectRefused(r, db, Refuse("unknown state", `INSERT INTO t (state) VALUES (?)`, "c"))
	if len(r.failures) != 0 {
		t.Errorf("a schema that matches failed: %q", r.failures)
	}

	CheckEnum(r, db, "t", "state", []string{"a", "b", "c"})
	CheckEnum(r, db, "t", "id", []string{"1"})
	ExpectRefused(r, db, Refuse("a known state", `INSERT INTO t (state) VALUES (?)`, "b"))
	if len(r.failures) != 3 {
		t.Errorf("three mismatches gave %d failures: %q", len(r.failures), r.failures)
	}
}
