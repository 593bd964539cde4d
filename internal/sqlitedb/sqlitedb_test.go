package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

var testMigrations = []Migration{
	{Version: 1, Name: "messages", SQL: `CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`},
	{Version: 2, Name: "message state", TouchesData: true, Up: func(tx *sql.Tx) error {
		_, err := tx.Exec(`ALTER TABLE messages ADD COLUMN state TEXT NOT NULL DEFAULT 'queued'`)
		return err
	}},
	{Version: 3, Name: "leases", SQL: `
		CREATE TABLE leases (id INTEGER PRIMARY KEY, message_id INTEGER NOT NULL REFERENCES messages(id));
		CREATE INDEX leases_message ON leases(message_id);`},
}

func open(t testing.TB, o Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// rawDB opens a plain connection, outside this package's rules, to set up or inspect
// a database the way another program would.
func rawDB(t testing.TB, path string, params ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, params...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func queryInt(t testing.TB, q interface {
	QueryRow(string, ...any) *sql.Row
}, query string) int {
	t.Helper()
	var n int
	if err := q.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func mode(t testing.TB, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFreshDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations, BusyTimeout: 1234 * time.Millisecond})

	v, err := db.SchemaVersion(context.Background())
	if err != nil || v != 3 {
		t.Fatalf("SchemaVersion = %d, %v; want 3", v, err)
	}
	if db.BackupPath != "" {
		t.Errorf("fresh database was backed up to %s", db.BackupPath)
	}

	for name, pool := range map[string]*sql.DB{"writer": db.Writer, "reader": db.Reader} {
		var journal string
		if err := pool.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil || journal != "wal" {
			t.Errorf("%s: journal_mode = %q, %v; want wal", name, journal, err)
		}
		for pragma, want := range map[string]int{"foreign_keys": 1, "busy_timeout": 1234, "synchronous": 2} {
			if got := queryInt(t, pool, "PRAGMA "+pragma); got != want {
				t.Errorf("%s: %s = %d, want %d", name, pragma, got, want)
			}
		}
	}
	if got := queryInt(t, db.Reader, "PRAGMA query_only"); got != 1 {
		t.Errorf("reader: query_only = %d, want 1", got)
	}
	if got := queryInt(t, db.Writer, "PRAGMA query_only"); got != 0 {
		t.Errorf("writer: query_only = %d, want 0", got)
	}
	if _, err := db.Writer.Exec(`INSERT INTO leases (message_id) VALUES (42)`); err == nil {
		t.Error("writer accepted a lease for a missing message: foreign keys are off")
	}
}

func TestSynchronousNormal(t *testing.T) {
	t.Parallel()
	db := open(t, Options{Path: filepath.Join(t.TempDir(), "x.sqlite3"), Synchronous: "normal"})
	for name, pool := range map[string]*sql.DB{"writer": db.Writer, "reader": db.Reader} {
		if got := queryInt(t, pool, "PRAGMA synchronous"); got != 1 {
			t.Errorf("%s: synchronous = %d, want 1 (NORMAL)", name, got)
		}
		if got := queryInt(t, pool, "PRAGMA busy_timeout"); got != 5000 {
			t.Errorf("%s: busy_timeout = %d, want the 5000 default", name, got)
		}
	}
	if _, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "y.sqlite3"), Synchronous: "OFF"}); !errs.Is(err, errs.ConfigInvalid) {
		t.Errorf("Synchronous OFF: err = %v, want %s", err, errs.ConfigInvalid)
	}
}

func TestReaderCannotWrite(t *testing.T) {
	t.Parallel()
	db := open(t, Options{Path: filepath.Join(t.TempDir(), "tamq.sqlite3"), Migrations: testMigrations})
	for _, stmt := range []string{
		`INSERT INTO messages (body) VALUES ('x')`,
		`CREATE TABLE t (x)`,
		`PRAGMA user_version = 99`,
	} {
		if _, err := db.Reader.Exec(stmt); err == nil {
			t.Errorf("reader ran %q", stmt)
		}
	}
	// Turning query_only off does not help: the connection is opened read-only.
	conn, err := db.Reader.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "PRAGMA query_only = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `INSERT INTO messages (body) VALUES ('x')`); err == nil {
		t.Error("reader wrote after PRAGMA query_only = 0")
	}
	if n := queryInt(t, db.Writer, "SELECT count(*) FROM messages"); n != 0 {
		t.Errorf("%d messages, want 0", n)
	}
	if v := queryInt(t, db.Writer, "PRAGMA user_version"); v != 3 {
		t.Errorf("user_version = %d, want 3", v)
	}
}

// Not parallel: it changes the process umask, which parallel tests must not see.
func TestModesIgnoreUmask(t *testing.T) {
	root := t.TempDir()
	old := syscall.Umask(0o277) // would leave files 0400 and dirs 0500
	defer syscall.Umask(old)

	path := filepath.Join(root, "a", "b", "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations[:1]})
	if _, err := db.Writer.Exec(`INSERT INTO messages (body) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, m)
		}
	}
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s has mode %v, want 0700", d, m)
		}
	}
	db.Close()

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	db = open(t, Options{Path: path, Migrations: testMigrations, Now: func() time.Time { return at }})
	if db.BackupPath == "" {
		t.Fatal("no backup made")
	}
	if m := mode(t, db.BackupPath); m != 0o600 {
		t.Errorf("backup %s has mode %v, want 0600", db.BackupPath, m)
	}
	if m := mode(t, filepath.Dir(db.BackupPath)); m != 0o700 {
		t.Errorf("backup dir has mode %v, want 0700", m)
	}
}

func TestExistingDirModeKept(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	open(t, Options{Path: filepath.Join(dir, "tamq.sqlite3"), Migrations: testMigrations})
	if m := mode(t, dir); m != 0o755 {
		t.Errorf("existing state dir changed to %v, want it left 0755", m)
	}
}

func TestUnusableStateDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// Tests run as root, which ignores mode bits: a regular file where a directory
	// must be fails for everyone.
	blocker := filepath.Join(root, "state")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dbDir := filepath.Join(root, "db-is-a-dir.sqlite3")
	if err := os.Mkdir(dbDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, named string }{
		{filepath.Join(blocker, "tamq.sqlite3"), blocker},
		{filepath.Join(blocker, "sub", "tamq.sqlite3"), filepath.Join(blocker, "sub")},
		{dbDir, dbDir},
	} {
		_, err := Open(context.Background(), Options{Path: c.path, Migrations: testMigrations})
		if !errs.Is(err, errs.Storage) {
			t.Errorf("Open(%s): err = %v, want %s", c.path, err, errs.Storage)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.named) || strings.Contains(msg, "\n") {
			t.Errorf("Open(%s): message %q should be one line naming %s", c.path, msg, c.named)
		}
	}
	if fi, err := os.Stat(blocker); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("blocking file was disturbed: %v, %v", fi, err)
	}
}

func TestNewerSchemaRefusedUntouched(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	raw := rawDB(t, path)
	if _, err := raw.Exec(`CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	backups := filepath.Join(t.TempDir(), "backups")

	_, err = Open(context.Background(), Options{Path: path, BackupDir: backups, Migrations: testMigrations})
	if !errs.Is(err, errs.SchemaTooNew) {
		t.Fatalf("err = %v, want %s", err, errs.SchemaTooNew)
	}
	want := fmt.Sprintf("database %s has schema version 7, newer than this binary supports (3); it was left untouched", path)
	if err.Error() != want {
		t.Errorf("message = %q\nwant      %q", err.Error(), want)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("database file changed")
	}
	for _, p := range []string{path + "-wal", path + "-shm", path + "-journal", backups} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a refused open (%v)", p, err)
		}
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	root := t.TempDir()

	missing := filepath.Join(root, "nodir", "tamq.sqlite3")
	info, err := Inspect(missing, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Info{Path: missing, BinarySchemaVersion: 3}); info != want {
		t.Errorf("Inspect(missing) = %+v, want %+v", info, want)
	}
	if _, err := os.Stat(filepath.Join(root, "nodir")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect created the directory (%v)", err)
	}

	path := filepath.Join(root, "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations[:2]})
	if _, err := db.Writer.Exec(`INSERT INTO messages (body) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	info, err = Inspect(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Exists || info.SchemaVersion != 2 || info.BinarySchemaVersion != 3 || info.SizeBytes <= 0 || info.WALSizeBytes <= 0 {
		t.Errorf("Inspect(open database) = %+v", info)
	}

	if _, err := Inspect(root, 3); !errs.Is(err, errs.Storage) {
		t.Errorf("Inspect(a directory): err = %v, want %s", err, errs.Storage)
	}
}

func TestWriteTxRetriesWhenLockedAtBegin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	var sleeps []time.Duration
	var release func()
	db := open(t, Options{
		Path: path, Migrations: testMigrations, BusyTimeout: time.Millisecond,
		Sleep: func(d time.Duration) {
			sleeps = append(sleeps, d)
			if len(sleeps) == 1 {
				release()
			}
		},
	})

	holder, err := rawDB(t, path, "_pragma=busy_timeout(1)").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	release = func() {
		if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
	}

	calls := 0
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		calls++
		_, err := tx.Exec(`INSERT INTO messages (body) VALUES ('once')`)
		return err
	})
	if err != nil {
		t.Fatalf("WriteTx: %v", err)
	}
	if len(sleeps) != 1 || calls != 1 {
		t.Errorf("slept %v and called fn %d times; want one retry and one call", sleeps, calls)
	}
	if n := queryInt(t, db.Reader, "SELECT count(*) FROM messages"); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

func TestWriteTxRetriesWholeTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	var sleeps int
	db := open(t, Options{Path: path, Migrations: testMigrations, Sleep: func(time.Duration) { sleeps++ }})
	other := rawDB(t, path, "_pragma=busy_timeout(1)")

	calls := 0
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		calls++
		if _, err := tx.Exec(`INSERT INTO messages (body) VALUES ('once')`); err != nil {
			return err
		}
		if calls == 1 {
			// A real SQLITE_BUSY, surfacing after this transaction has written: the
			// write above must be rolled back, not kept and then made again.
			_, err := other.Exec(`INSERT INTO messages (body) VALUES ('other')`)
			if err == nil {
				t.Fatal("second connection wrote while the writer held the lock")
			}
			return fmt.Errorf("side write: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WriteTx: %v", err)
	}
	if calls != 2 || sleeps != 1 {
		t.Errorf("fn called %d times with %d sleeps; want 2 and 1", calls, sleeps)
	}
	var bodies []string
	rows, err := db.Reader.Query(`SELECT body FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	if len(bodies) != 1 || bodies[0] != "once" {
		t.Errorf("messages = %q, want [once]", bodies)
	}
}

func TestWriteTxGivesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	var sleeps []time.Duration
	db := open(t, Options{
		Path: path, Migrations: testMigrations, BusyTimeout: time.Millisecond,
		Sleep: func(d time.Duration) { sleeps = append(sleeps, d) },
	})
	holder, err := rawDB(t, path, "_pragma=busy_timeout(1)").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(ctx, "ROLLBACK")

	calls := 0
	err = db.WriteTx(ctx, func(*sql.Tx) error { calls++; return nil })
	if !errs.Is(err, errs.Storage) || !strings.Contains(err.Error(), path) || !isBusy(err) {
		t.Fatalf("err = %v, want a busy %s error naming %s", err, errs.Storage, path)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	if fmt.Sprint(sleeps) != fmt.Sprint(want) || calls != 0 {
		t.Errorf("slept %v, fn called %d times; want %v and 0", sleeps, calls, want)
	}
}

func TestWriteTxReturnsFnErrorAndRollsBack(t *testing.T) {
	t.Parallel()
	db := open(t, Options{Path: filepath.Join(t.TempDir(), "tamq.sqlite3"), Migrations: testMigrations,
		Sleep: func(time.Duration) { t.Error("slept on a non-busy error") }})
	sentinel := errs.New(errs.Conflict, "no")
	calls := 0
	err := db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		calls++
		if _, err := tx.Exec(`INSERT INTO messages (body) VALUES ('x')`); err != nil {
			return err
		}
		return sentinel
	})
	if err != sentinel || calls != 1 {
		t.Errorf("err = %v after %d calls, want the fn's own error after 1", err, calls)
	}
	if n := queryInt(t, db.Reader, "SELECT count(*) FROM messages"); n != 0 {
		t.Errorf("%d messages after a failed transaction, want 0", n)
	}
	// The writer connection must be free again.
	if err := db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO messages (body) VALUES ('y')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDSNEscapesPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "odd?dir#x%41", "tamq.sqlite3")
	open(t, Options{Path: path, Migrations: testMigrations})
	info, err := Inspect(path, 3)
	if err != nil || !info.Exists || info.SchemaVersion != 3 {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
}

func BenchmarkWriteTx(b *testing.B) {
	ctx := context.Background()
	db := open(b, Options{Path: filepath.Join(b.TempDir(), "bench.sqlite3"), Migrations: testMigrations, Synchronous: "FULL"})
	for b.Loop() {
		if err := db.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO messages (body) VALUES ('hello')`)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}
