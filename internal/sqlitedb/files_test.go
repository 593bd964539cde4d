package sqlitedb

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// TestReadingLeavesNothingTheServiceCannotUse reads a closed database the
// ways the read-only commands do. SQLite gives the -wal and -shm files it
// creates for a reader the database file's mode and owner, so reading a
// database made read-only (0400) used to leave a read-only -shm that kept
// the service from starting once the database was writable again.
//
// Not parallel: it sets the process umask, which parallel tests must not see.
func TestReadingLeavesNothingTheServiceCannotUse(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tamq.sqlite3")
	db, err := Open(ctx, Options{Path: path, Migrations: testMigrations})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Writer.Exec(`INSERT INTO messages (body) VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	sides := []string{path + "-wal", path + "-shm"}
	for _, p := range sides {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left by a clean close (%v)", p, err)
		}
	}
	old := syscall.Umask(0o277)
	defer syscall.Umask(old)

	read := func() {
		t.Helper()
		if info, err := Inspect(path, 3); err != nil || info.SchemaVersion != 3 {
			t.Fatalf("Inspect = %+v, %v", info, err)
		}
		if _, err := OpenReadOnly(ctx, path, 4, 0); !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "has schema version 3; this binary reads version 4") {
			t.Fatalf("a reader of version 4 opened a version 3 database: %v", err)
		}
		ro, err := OpenReadOnly(ctx, path, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		var body string
		if err := ro.QueryRow(`SELECT body FROM messages`).Scan(&body); err != nil || body != "kept" {
			t.Fatalf("read %q, %v", body, err)
		}
	}

	// Read-only database: read as immutable, nothing created.
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	read()
	for _, p := range sides {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("reading a read-only database created %s (%v)", p, err)
		}
	}

	// Writable again, owned by another user (we are root): the side files
	// are the owner's, readable and writable by it, whatever the umask.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	read()
	for _, p := range sides {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != nobody {
			t.Errorf("%s has mode %v and uid %d, want 0600 and %d", p, fi.Mode().Perm(), st.Uid, nobody)
		}
	}
}
