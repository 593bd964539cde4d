package service_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// nobodysEnv is an environment whose state, runtime and config directories
// belong to the user nobody, with a database holding one message at the
// given schema version (all migrations when 0), closed cleanly (no -wal,
// no -shm). Tests run as root, which ignores mode bits: the commands under
// test run as nobody.
func nobodysEnv(t *testing.T, migrations int) *testutil.Env {
	t.Helper()
	e := testutil.NewEnv(t)
	ms := store.Migrations
	if migrations > 0 {
		ms = ms[:migrations]
	}
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{Path: e.Database(), Migrations: ms})
	if err != nil {
		t.Fatal(err)
	}
	err = db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
			max_attempts, policy_profile, config_version, created_at, updated_at)
			VALUES ('m1', 'm1', 'operator', 'operator', 'net-kingdom', 'hello', 'injected', 'injected', 3, 'p', 'c', 1, 1)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.StateHubInEnvironment(t)
	for _, dir := range []string{e.State, e.Runtime, e.Config, e.Home} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { asNobody(t, e, "stop") })
	return e
}

// asNobody runs tamq as the user nobody.
func asNobody(t *testing.T, e *testutil.Env, args ...string) testutil.Result {
	t.Helper()
	cmd := e.Command(context.Background(), "tamq", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return testutil.RunCmd(t, cmd)
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// nobodysFile gives path to nobody, with mode.
func nobodysFile(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

// readCommands are the commands that read the database directly.
var readCommands = [][]string{{"history"}, {"export"}, {"db-version"}, {"purge", "--dry-run"}, {"status"}}

// TestReadOnlyDatabaseGetsAClearErrorAndReadsLeaveNothingBehind: the service
// refuses a database it may not write with a message naming the file and
// the fix; the read-only commands still read it, and leave no -wal or -shm
// behind (SQLite used to create them with the database's mode, 0400, which
// then kept the service from starting once the database was writable).
func TestReadOnlyDatabaseGetsAClearErrorAndReadsLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	e := nobodysEnv(t, 0)
	dbPath := e.Database()
	chmod(t, dbPath, 0o400)
	for _, args := range readCommands {
		r := asNobody(t, e, args...)
		if r.Status != 0 && !(args[0] == "status" && r.Status == 8) { // status: the service is down
			t.Errorf("%v on a read-only database: %s", args, r)
		}
	}
	if r := asNobody(t, e, "history"); !strings.Contains(r.Stdout, "m1") {
		t.Errorf("history of a read-only database: %s", r)
	}
	for _, p := range []string{dbPath + "-wal", dbPath + "-shm"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a read-only command left %s (%v)", p, err)
		}
	}
	r := asNobody(t, e, "start", "--detach")
	want := "tamq: database file " + dbPath + " is read-only (mode 0400): make it writable by you (chmod u+w " + dbPath + ")"
	if r.Status != 6 || !strings.Contains(r.Stderr, want) {
		t.Errorf("start on a read-only database: %s\nwant stderr %q", r, want)
	}
	chmod(t, dbPath, 0o600)
	if r := asNobody(t, e, "start", "--detach"); r.Status != 0 {
		t.Fatalf("start once the database is writable: %s", r)
	}
	if r := asNobody(t, e, "stop"); r.Status != 0 {
		t.Fatalf("stop: %s", r)
	}
}

// TestUnusableStorageFilesNameTheFileAndTheFix covers each file the service
// and the readers need, made unusable in the way a user or an older build
// could leave it.
func TestUnusableStorageFilesNameTheFileAndTheFix(t *testing.T) {
	t.Parallel()
	t.Run("read-only shm", func(t *testing.T) {
		t.Parallel()
		e := nobodysEnv(t, 0)
		// As a reader of an older build left it: 32 KiB, with the mode of
		// the database it read while that was read-only.
		shm := e.Database() + "-shm"
		if err := os.WriteFile(shm, make([]byte, 32<<10), 0o400); err != nil {
			t.Fatal(err)
		}
		nobodysFile(t, shm, 0o400)
		r := asNobody(t, e, "start", "--detach")
		want := "database shared-memory file " + shm + " is read-only (mode 0400): make it writable by you (chmod u+w " + shm + ")"
		if r.Status != 6 || !strings.Contains(r.Stderr, want) {
			t.Errorf("start: %s\nwant %q", r, want)
		}
	})
	t.Run("unreadable database", func(t *testing.T) {
		t.Parallel()
		e := nobodysEnv(t, 0)
		chmod(t, e.Database(), 0o200)
		want := "database file " + e.Database() + " is not readable by you (mode 0200): make it readable by you (chmod u+r " + e.Database() + ")"
		for _, args := range append(readCommands, []string{"start", "--detach"}) {
			r := asNobody(t, e, args...)
			if args[0] == "status" {
				// With the service down, status exits unavailable (8) and
				// reports the database's problem in its sqlite line.
				if r.Status != 8 || !strings.Contains(r.Stdout, "ERROR "+want) {
					t.Errorf("%v: %s\nwant %q", args, r, want)
				}
				continue
			}
			if r.Status != 6 || !strings.Contains(r.Stderr, want) {
				t.Errorf("%v: %s\nwant %q", args, r, want)
			}
		}
	})
	t.Run("read-only state dir", func(t *testing.T) {
		t.Parallel()
		e := nobodysEnv(t, 0)
		dir := e.TamqState()
		// The lock and log files, which the service opens before the
		// database, are there from an earlier run.
		for _, lock := range []string{"start.lock", "tamq.lock", "tamq.log"} {
			p := filepath.Join(dir, lock)
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			nobodysFile(t, p, 0o600)
		}
		chmod(t, dir, 0o500)
		want := "state dir " + dir + " is not writable by you (mode 0500): make it writable by you (chmod u+w " + dir + ")"
		if r := asNobody(t, e, "start", "--detach"); r.Status != 6 || !strings.Contains(r.Stderr, want) {
			t.Errorf("start: %s\nwant %q", r, want)
		}
		// Nothing can write the database then, so it is read as it is.
		if r := asNobody(t, e, "history"); r.Status != 0 || !strings.Contains(r.Stdout, "m1") {
			t.Errorf("history: %s", r)
		}
	})
	t.Run("read-only backups dir", func(t *testing.T) {
		t.Parallel()
		e := nobodysEnv(t, 1) // at version 1, with a message: migrating backs it up first
		backups := filepath.Join(e.TamqState(), "backups")
		if err := os.Mkdir(backups, 0o500); err != nil {
			t.Fatal(err)
		}
		nobodysFile(t, backups, 0o500)
		want := "backups dir " + backups + " is not writable by you (mode 0500): make it writable by you (chmod u+w " + backups + ")"
		if r := asNobody(t, e, "start", "--detach"); r.Status != 6 || !strings.Contains(r.Stderr, want) {
			t.Errorf("start: %s\nwant %q", r, want)
		}
		if info, err := sqlitedb.Inspect(e.Database(), 2); err != nil || info.SchemaVersion != 1 {
			t.Errorf("after the refused migration: %+v, %v", info, err)
		}
	})
	t.Run("another user's database", func(t *testing.T) {
		t.Parallel()
		e := nobodysEnv(t, 0)
		os.Chown(e.Database(), 0, 0)
		want := "database file " + e.Database() + " belongs to uid 0 and is not readable or writable by you (uid 65534, mode 0600)"
		if r := asNobody(t, e, "start", "--detach"); r.Status != 6 || !strings.Contains(r.Stderr, want) {
			t.Errorf("start: %s\nwant %q", r, want)
		}
	})
}

// TestDamagedDatabaseIsAStorageError: an SQLite failure reading the history
// exits with the storage status (6), naming what was being done, where it
// used to exit 1 (internal) with SQLite's bare message.
func TestDamagedDatabaseIsAStorageError(t *testing.T) {
	t.Parallel()
	e := nobodysEnv(t, 0)
	f, err := os.OpenFile(e.Database(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	_, err = f.WriteAt([]byte(strings.Repeat("\xa5", int(fi.Size())-4096)), 4096) // every page but the header's
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args []string }{{[]string{"history"}}, {[]string{"export"}}, {[]string{"purge", "--dry-run"}}} {
		r := e.Run(t, "tamq", c.args...)
		if r.Status != 6 || !strings.Contains(r.Stderr, "database disk image is malformed") ||
			!strings.Contains(r.Stderr, "hint: the database file is damaged") {
			t.Errorf("%v on a damaged database: %s", c.args, r)
		}
	}
}
