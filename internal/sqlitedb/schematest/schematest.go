// Package schematest checks a program's migrated schema in its tests: the
// statements the schema must refuse, and the CHECKs of its enum columns
// against the domain's values, so the Go constants and the schema cannot
// drift apart. Both programs' store tests use it.
package schematest

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Exec runs q in a write transaction of its own.
func Exec(db *sqlitedb.DB, q string, args ...any) error {
	return db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	})
}

// Must stops t at a statement the schema should have taken.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// AtLatest fails t unless db is migrated to the last of migrations.
func AtLatest(t testing.TB, db *sqlitedb.DB, migrations []sqlitedb.Migration) {
	t.Helper()
	if v, err := db.SchemaVersion(context.Background()); err != nil || v != sqlitedb.LatestVersion(migrations) {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

// Refused is a statement the schema must refuse, and why.
type Refused struct {
	Name string
	Q    string
	Args []any
}

// Refuse is a statement the schema must refuse, named by why.
func Refuse(name, q string, args ...any) Refused { return Refused{Name: name, Q: q, Args: args} }

// ExpectRefused fails t for every statement of cases the database accepts.
func ExpectRefused(t testing.TB, db *sqlitedb.DB, cases ...Refused) {
	t.Helper()
	for _, r := range cases {
		if err := Exec(db, r.Q, r.Args...); err == nil {
			t.Errorf("%s: accepted", r.Name)
		}
	}
}

// CheckEnum fails t unless the CHECK of table's TEXT column, as the
// migrated database has it, allows exactly want, the domain's values. NOT
// NULL columns have CHECK (c IN (...)); nullable ones CHECK (c IS NULL OR c
// IN (...)); a column with one allowed value CHECK (c = '...').
func CheckEnum(t testing.TB, db *sqlitedb.DB, table, column string, want []string) {
	t.Helper()
	ddl := TableSQL(t, db, table)
	re := regexp.MustCompile(`\b` + column + `\s+TEXT[^,]*?CHECK \((?:` + column + ` IS NULL OR )?` + column +
		`(?: IN \(([^)]*)\)| = ('[^']*'))\)`)
	m := re.FindStringSubmatch(ddl)
	if m == nil {
		t.Errorf("%s.%s: no CHECK of its values in\n%s", table, column, ddl)
		return
	}
	var got []string
	for _, lit := range strings.Split(m[1]+m[2], ",") {
		got = append(got, strings.Trim(strings.TrimSpace(lit), "'"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s.%s: CHECK allows %q, the domain has %q", table, column, got, want)
	}
}

// TableSQL is the CREATE TABLE statement of table as the database keeps it.
func TableSQL(t testing.TB, db *sqlitedb.DB, table string) string {
	t.Helper()
	var ddl string
	if err := db.Reader.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	return ddl
}
