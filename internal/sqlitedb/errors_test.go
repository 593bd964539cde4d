package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// TestSQLiteFailuresCarryTheStorageCode makes SQLite fail for real (a write
// the connection may not make, a damaged file) and checks that the failure
// surfaces from every statement helper as storage_error naming what was
// being done and the database, while a wrong statement is a bug (internal)
// and "no rows" stays itself.
func TestSQLiteFailuresCarryTheStorageCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations})

	// A read-only writer: SQLITE_READONLY when the transaction commits.
	if _, err := db.Writer.Exec("PRAGMA query_only = 1"); err != nil {
		t.Fatal(err)
	}
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := db.TxExec(tx, `INSERT INTO messages (body) VALUES (?)`, "secret body")
		return err
	})
	want := "commit to database " + path + ": attempt to write a readonly database"
	if !errs.Is(err, errs.Storage) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(hintOf(err), "can write them") {
		t.Errorf("a read-only connection: %v (hint %q), want storage error %q", err, hintOf(err), want)
	}
	if _, err := db.Writer.Exec("PRAGMA query_only = 0"); err != nil {
		t.Fatal(err)
	}

	// A full database: SQLITE_FULL from the statement, through TxExec and
	// through a plain tx.Exec.
	if _, err := db.Writer.Exec("PRAGMA max_page_count = " + strconv.Itoa(queryInt(t, db.Writer, "PRAGMA page_count"))); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("secret body ", 1000)
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := db.TxExec(tx, `INSERT INTO messages (body) VALUES (?)`, big)
		return err
	})
	want = "insert into messages in database " + path + ": database or disk is full"
	if !errs.Is(err, errs.Storage) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(hintOf(err), "free space") {
		t.Errorf("a full database: %v (hint %q), want storage error %q", err, hintOf(err), want)
	}
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO messages (body) VALUES (?)`, big)
		return err
	})
	if !errs.Is(err, errs.Storage) || !strings.HasPrefix(err.Error(), "write to database "+path+": database or disk is full") {
		t.Errorf("tx.Exec on a full database: %v", err)
	}
	if strings.Contains(err.Error(), "secret body") {
		t.Errorf("an error quotes a value: %v", err)
	}
	if _, err := db.Writer.Exec("PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}

	// A wrong statement is a bug, still named; no rows is no rows.
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		var n int
		return db.TxQueryRow(tx, `SELECT nope FROM messages`).Scan(&n)
	})
	if !errs.Is(err, errs.Internal) || !strings.HasPrefix(err.Error(), "read messages in database "+path) {
		t.Errorf("a wrong statement: %v", err)
	}
	var body string
	if err := db.QueryRow(ctx, `SELECT body FROM messages WHERE id = 42`).Scan(&body); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("no rows: %v", err)
	}

	// A damaged file: every page after the first overwritten.
	if _, err := db.Writer.Exec(`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 200)
		INSERT INTO messages (body) SELECT printf('%.*c', 100 + n, 'x') FROM c`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	damage(t, path)
	broken, err := sql.Open("sqlite", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	db.Reader = broken
	rows, err := db.Query(ctx, `SELECT body FROM messages`)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	if !errs.Is(err, errs.Storage) || !strings.HasPrefix(err.Error(), "read messages in database "+path) ||
		!strings.Contains(hintOf(err), "damaged") {
		t.Errorf("a damaged database: %v (hint %q)", err, hintOf(err))
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n); !errs.Is(err, errs.Storage) {
		t.Errorf("QueryRow on a damaged database: %v", err)
	}
}

// damage overwrites every page of the database after the first with garbage.
func damage(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	junk := []byte(strings.Repeat("\xa5", int(fi.Size())-4096))
	if _, err := f.WriteAt(junk, 4096); err != nil {
		t.Fatal(err)
	}
}

func hintOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Hint
	}
	return ""
}

func TestDescribe(t *testing.T) {
	for q, want := range map[string]string{
		"INSERT INTO receipts (at) VALUES (?)":                  "insert into receipts",
		"\n\t\tUPDATE messages SET state = ?":                   "update messages",
		"DELETE FROM messages WHERE id = ?":                     "delete from messages",
		"SELECT id, created_at FROM messages WHERE id = ?":      "read messages",
		"SELECT count(*) FILTER (WHERE x) FROM delivery_leases": "read delivery_leases",
		"WITH c(n) AS (SELECT 1) SELECT n FROM c":               "read c",
		"PRAGMA user_version":                                   "pragma",
		"":                                                      "run a statement",
		"SELECT 1":                                              "read",
	} {
		if got := describe(q); got != want {
			t.Errorf("describe(%q) = %q, want %q", q, got, want)
		}
	}
}
