package sqlitedb

import (
	"database/sql"
	"errors"
	"strings"

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
	return Wrap(err, "%s in database %s", describe(q), path)
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
