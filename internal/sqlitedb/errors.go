package sqlitedb

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Wrap gives an SQLite failure its code and says what was being done
// ("<what>: <SQLite's message>"). A failure of the disk, the file or the
// lock (I/O error, disk full, read-only or unopenable file, busy, corrupt)
// is errs.Storage with a hint; any other SQLite error means the statement
// itself is wrong, a bug: errs.Internal. Errors that already carry a code,
// and those that are not SQLite's (sql.ErrNoRows, a cancelled context),
// are returned unchanged: callers test for them.
func Wrap(err error, format string, args ...any) error {
	var se *sqlite.Error
	var coded *errs.Error
	if err == nil || errors.As(err, &coded) || !errors.As(err, &se) {
		return err
	}
	code, hint := classify(se.Code())
	e := errs.Wrap(code, err, format, args...)
	if hint != "" {
		e = e.WithHint("%s", hint)
	}
	return e
}

// classify maps an SQLite result code to a code and a hint.
func classify(rc int) (errs.Code, string) {
	switch rc & 0xff { // the primary code; extended codes are on
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return errs.Storage, "another process may be holding a long write transaction on the database"
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return errs.Storage, "check that you own the database file, its -wal and -shm files and their directory, and can write them"
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOLFS, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM:
		return errs.Storage, "check the disk the database is on: free space, file system errors"
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return errs.Storage, "the database file is damaged; the backups directory beside it may hold a copy made before the last migration"
	}
	return errs.Internal, ""
}

// wrapAt is Wrap for a failure on the database at path. When the failure
// is a lack of room, the message starts with that, in words a user can act
// on: SQLite says "database or disk is full" or "disk I/O error" and leaves
// out which disk, and a file that reached the file size limit (ulimit -f,
// EFBIG) reads as an I/O error.
func wrapAt(err error, path, format string, args ...any) error {
	var coded *errs.Error
	var se *sqlite.Error
	if err == nil || errors.As(err, &coded) || !errors.As(err, &se) {
		return err
	}
	e := Wrap(err, format, args...).(*errs.Error)
	if why, hint := noRoom(se.Code(), path); why != "" {
		e.Message = why + ": " + e.Message
		e.Hint = hint
	}
	return e
}

// lowSpace is the free space under which an I/O error is put down to a full
// disk; nearLimit is how close to the file size limit a file is when a
// write to it failed for the limit (SQLite writes a page and a header at a time).
const (
	lowSpace  = 1 << 20
	nearLimit = 64 << 10
)

// noRoom says whether the failure rc on the database at path came from a
// lack of room, checked on the spot: the file size limit reached by the
// database or its WAL, or the disk holding them (nearly) full. It returns
// the words for the message and the hint, or "" when there is room.
func noRoom(rc int, path string) (why, hint string) {
	if p := rc & 0xff; p != sqlite3.SQLITE_FULL && p != sqlite3.SQLITE_IOERR {
		return "", ""
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_FSIZE, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
		for _, f := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(f); err == nil && uint64(fi.Size())+nearLimit >= lim.Cur {
				return fmt.Sprintf("%s reached the file size limit of this process (%d bytes)", f, lim.Cur),
					"raise the limit (ulimit -f, or LimitFSIZE= in a systemd unit) and restart the service"
			}
		}
	}
	dir := filepath.Dir(path)
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil && uint64(st.Bavail)*uint64(st.Bsize) < lowSpace {
		return fmt.Sprintf("the disk holding %s is full", dir),
			"free space on that disk; the service keeps running and writes again as soon as there is room"
	}
	return "", ""
}

// describe names what a statement does for an error message ("update
// messages", "read receipts"), never its arguments.
func describe(q string) string {
	f := strings.Fields(q)
	if len(f) == 0 {
		return "run a statement"
	}
	verb := strings.ToLower(f[0])
	switch verb {
	case "insert", "delete", "replace": // INSERT INTO t, DELETE FROM t
		if len(f) >= 3 {
			return verb + " " + strings.ToLower(f[1]) + " " + f[2]
		}
	case "update":
		if len(f) >= 2 {
			return "update " + f[1]
		}
	case "select", "with":
		for i, w := range f[:len(f)-1] {
			if strings.EqualFold(w, "FROM") {
				return "read " + strings.TrimRight(f[i+1], ",;()")
			}
		}
		return "read"
	}
	return verb
}

// stmtError wraps the error of statement q in database path.
func stmtError(err error, q, path string) error {
	if err == nil {
		return nil
	}
	return wrapAt(err, path, "%s in database %s", describe(q), path)
}

// Row is sql.Row whose Scan reports SQLite failures through Wrap.
type Row struct {
	row     *sql.Row
	q, path string
}

// Scan is sql.Row.Scan; sql.ErrNoRows is returned unchanged.
func (r *Row) Scan(dest ...any) error { return stmtError(r.row.Scan(dest...), r.q, r.path) }

// Rows is sql.Rows whose Scan and Err report SQLite failures through Wrap.
type Rows struct {
	*sql.Rows
	q, path string
}

// Scan is sql.Rows.Scan.
func (r *Rows) Scan(dest ...any) error { return stmtError(r.Rows.Scan(dest...), r.q, r.path) }

// Err is sql.Rows.Err.
func (r *Rows) Err() error { return stmtError(r.Rows.Err(), r.q, r.path) }

// storageError is Wrap for opening, migrating and maintaining a database,
// where every failure, SQLite's or the file system's, is a storage failure.
func storageError(err error, format string, args ...any) *errs.Error {
	e := errs.Wrap(errs.Storage, err, format, args...)
	var se *sqlite.Error
	if errors.As(err, &se) {
		_, e.Hint = classify(se.Code())
	}
	return e
}
