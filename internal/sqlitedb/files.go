package sqlitedb

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The files of a database, as messages name them.
const (
	nameStateDir  = "state dir"
	nameBackupDir = "backups dir"
	nameDatabase  = "database file"
	nameWAL       = "database WAL file"
	nameSHM       = "database shared-memory file"
)

// sideFiles are the files SQLite keeps beside a WAL database, with their names.
func sideFiles(path string) [][2]string {
	return [][2]string{{nameWAL, path + "-wal"}, {nameSHM, path + "-shm"}}
}

// checkAccess returns a storage error that names the file, its mode and the
// fix when path exists but this process lacks one of the permissions in need
// ("r", "w", "x"); nil when it has them all or path does not exist (what is
// missing is created, or reported, elsewhere). SQLite's own errors for the
// same cases ("attempt to write a readonly database") name neither the file
// nor the fix.
func checkAccess(what, path, need string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return storageError(err, "%s %s is not usable", what, path)
	}
	bits := map[rune]uint32{'r': unix.R_OK, 'w': unix.W_OK, 'x': unix.X_OK}
	var missing string
	for _, c := range need {
		if unix.Access(path, bits[c]) != nil {
			missing += string(c)
		}
	}
	if missing == "" {
		return nil
	}
	return accessError(what, path, fi, missing)
}

// accessError says what this process may not do with path, and how to fix it.
func accessError(what, path string, fi fs.FileInfo, missing string) error {
	mode := fi.Mode().Perm()
	words := map[rune]string{'r': "readable", 'w': "writable", 'x': "searchable"}
	var want []string
	for _, c := range missing {
		want = append(want, words[c])
	}
	if owner := ownerOf(fi); owner != os.Geteuid() {
		return errs.New(errs.Storage, "%s %s belongs to uid %d and is not %s by you (uid %d, mode %04o)",
			what, path, owner, strings.Join(want, " or "), os.Geteuid(), mode).
			WithHint("run tamq as uid %d, or make it yours (chown %d %s)", owner, os.Geteuid(), path)
	}
	state := "not " + strings.Join(want, " or ") + " by you"
	if missing == "w" && !fi.IsDir() {
		state = "read-only"
	}
	return errs.New(errs.Storage, "%s %s is %s (mode %04o): make it %s by you (chmod u+%s %s)",
		what, path, state, mode, strings.Join(want, " and "), missing, path)
}

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return os.Geteuid()
}

// checkWritable checks what the service needs to write the database at path:
// its directory (where SQLite creates and removes the -wal and -shm files),
// the database and its side files.
func checkWritable(path string) error {
	if err := checkAccess(nameStateDir, filepath.Dir(path), "wx"); err != nil {
		return err
	}
	if err := checkAccess(nameDatabase, path, "rw"); err != nil {
		return err
	}
	for _, f := range sideFiles(path) {
		// An empty one of ours SQLite opens anyway: it gives it the
		// database file's mode first.
		if fi, err := os.Stat(f[1]); err == nil && fi.Size() == 0 && ownerOf(fi) == os.Geteuid() {
			continue
		}
		if err := checkAccess(f[0], f[1], "rw"); err != nil {
			return err
		}
	}
	return nil
}

// prepareToRead checks that the existing database at path (fi) can be read,
// and says whether to read it as immutable: without locks and without the
// -wal and -shm files a WAL database's readers otherwise need. SQLite creates
// those with the database file's mode and owner, so a read-only command run
// on a database made read-only (0400) would leave a read-only -shm behind,
// and the service, once the database is writable again, would fail on it.
// Immutable is safe exactly when nothing has the database open (no side
// files) and nothing can start writing it: its owner may not write it, or
// the side files a writer needs cannot be created in its directory.
func prepareToRead(path string, fi fs.FileInfo) (immutable bool, err error) {
	if err := checkAccess(nameDatabase, path, "r"); err != nil {
		return false, err
	}
	open := false
	for _, f := range sideFiles(path) {
		if err := checkAccess(f[0], f[1], "r"); err != nil {
			return false, err
		}
		if _, err := os.Lstat(f[1]); !errors.Is(err, fs.ErrNotExist) {
			open = true
		}
	}
	if open {
		return false, nil
	}
	wal, err := isWAL(path)
	if err != nil {
		return false, storageError(err, "%s %s is not usable", nameDatabase, path)
	}
	if !wal {
		return false, nil // a rollback-journal database is read without side files
	}
	if fi.Mode().Perm()&0o200 == 0 || unix.Access(filepath.Dir(path), unix.W_OK|unix.X_OK) != nil {
		return true, nil
	}
	if owner := ownerOf(fi); owner != os.Geteuid() && os.Geteuid() != 0 {
		return false, errs.New(errs.Storage, "%s %s belongs to uid %d: reading it as uid %d would create its -wal and -shm files as yours, which its owner's service could not use",
			nameDatabase, path, owner, os.Geteuid()).WithHint("run tamq as uid %d", owner)
	}
	return false, nil
}

// isWAL reads the database header: bytes 18 and 19 are 2 in WAL mode.
func isWAL(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil // empty or cut short: SQLite reports it
		}
		return false, err
	}
	return h[18] == 2 && h[19] == 2, nil
}
