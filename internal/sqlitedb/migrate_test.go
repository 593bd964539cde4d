package sqlitedb

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

func TestUpgradeBacksUpFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations[:1]})
	if _, err := db.Writer.Exec(`INSERT INTO messages (body) VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A zone other than UTC, to see the name is in UTC.
	at := time.Date(2026, 3, 4, 6, 6, 7, 0, time.FixedZone("CET", 3600))
	nows := 0
	db = open(t, Options{Path: path, Migrations: testMigrations, Now: func() time.Time { nows++; return at }})
	if v, err := db.SchemaVersion(context.Background()); err != nil || v != 3 {
		t.Fatalf("SchemaVersion = %d, %v; want 3", v, err)
	}

	backups := filepath.Join(dir, "backups")
	entries, err := os.ReadDir(backups)
	if err != nil {
		t.Fatal(err)
	}
	want := "tamq-v1-20260304T050607Z.sqlite3"
	if len(entries) != 1 || entries[0].Name() != want || nows != 1 {
		t.Fatalf("backups = %v (clock read %d times), want just %s", entries, nows, want)
	}
	if db.BackupPath != filepath.Join(backups, want) {
		t.Errorf("BackupPath = %s", db.BackupPath)
	}

	backup := rawDB(t, db.BackupPath, "mode=ro")
	if v := queryInt(t, backup, "PRAGMA user_version"); v != 1 {
		t.Errorf("backup has schema version %d, want 1", v)
	}
	var body string
	if err := backup.QueryRow(`SELECT body FROM messages`).Scan(&body); err != nil || body != "kept" {
		t.Errorf("backup message = %q, %v; want kept", body, err)
	}
	if n := queryInt(t, backup, `SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'state'`); n != 0 {
		t.Error("backup already has the v2 column")
	}
	if err := db.Writer.QueryRow(`SELECT state FROM messages WHERE body = 'kept'`).Scan(&body); err != nil || body != "queued" {
		t.Errorf("migrated message state = %q, %v; want queued", body, err)
	}
}

func TestFreshDatabaseNotBackedUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	db := open(t, Options{Path: filepath.Join(dir, "tamq.sqlite3"), BackupDir: backups, Migrations: testMigrations,
		Now: func() time.Time { t.Error("clock read for a backup"); return time.Time{} }})
	if db.BackupPath != "" {
		t.Errorf("BackupPath = %s", db.BackupPath)
	}
	if _, err := os.Stat(backups); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("backup dir exists (%v)", err)
	}
}

func TestUpgradeWithoutDataMigrationNotBackedUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.sqlite3")
	open(t, Options{Path: path, Migrations: testMigrations[:2]}).Close()
	db := open(t, Options{Path: path, Migrations: testMigrations}) // v3 does not touch data
	if db.BackupPath != "" {
		t.Errorf("BackupPath = %s", db.BackupPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "backups")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("backup dir exists (%v)", err)
	}
}

func TestFailingMigrationRollsBack(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	db := open(t, Options{Path: path, Migrations: testMigrations[:2]})
	if _, err := db.Writer.Exec(`INSERT INTO messages (body) VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	bad := append(testMigrations[:2:2], Migration{Version: 3, Name: "bad", SQL: `
		CREATE TABLE partial (x);
		ALTER TABLE messages ADD COLUMN half TEXT;
		INSERT INTO no_such_table VALUES (1);`})
	_, err := Open(context.Background(), Options{Path: path, Migrations: bad})
	if !errs.Is(err, errs.Storage) {
		t.Fatalf("err = %v, want %s", err, errs.Storage)
	}

	raw := rawDB(t, path, "mode=ro")
	if v := queryInt(t, raw, "PRAGMA user_version"); v != 2 {
		t.Errorf("user_version = %d, want 2", v)
	}
	if n := queryInt(t, raw, `SELECT count(*) FROM sqlite_schema WHERE name = 'partial'`); n != 0 {
		t.Error("table from the failed migration exists")
	}
	if n := queryInt(t, raw, `SELECT count(*) FROM pragma_table_info('messages') WHERE name IN ('half', 'state')`); n != 1 {
		t.Errorf("messages has %d of the columns (state, half), want just state", n)
	}
	if n := queryInt(t, raw, `SELECT count(*) FROM messages WHERE body = 'kept' AND state = 'queued'`); n != 1 {
		t.Error("v2 data lost")
	}

	// The good migrations still apply afterwards.
	db = open(t, Options{Path: path, Migrations: testMigrations})
	if v, err := db.SchemaVersion(context.Background()); err != nil || v != 3 {
		t.Errorf("SchemaVersion = %d, %v; want 3", v, err)
	}
}

func TestMigrationsMustBeConsecutive(t *testing.T) {
	t.Parallel()
	for _, ms := range [][]Migration{
		{{Version: 2, SQL: "SELECT 1"}},
		{{Version: 1, SQL: "SELECT 1"}, {Version: 3, SQL: "SELECT 1"}},
		{{Version: 1}},
	} {
		dir := t.TempDir()
		_, err := Open(context.Background(), Options{Path: filepath.Join(dir, "sub", "x.sqlite3"), Migrations: ms})
		if !errs.Is(err, errs.Internal) {
			t.Errorf("%+v: err = %v, want %s", ms, err, errs.Internal)
		}
		if _, err := os.Stat(filepath.Join(dir, "sub")); !errors.Is(err, fs.ErrNotExist) {
			t.Error("bad migrations still created the state dir")
		}
	}
	if got := LatestVersion(testMigrations); got != 3 {
		t.Errorf("LatestVersion = %d, want 3", got)
	}
	if got := LatestVersion(nil); got != 0 {
		t.Errorf("LatestVersion(nil) = %d, want 0", got)
	}
}
