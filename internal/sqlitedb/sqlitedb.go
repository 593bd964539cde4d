// Package sqlitedb opens the SQLite databases of tamq and coordination-engine the one
// way the storage rules allow: WAL, foreign keys, a busy timeout, a single writer
// connection whose transactions are BEGIN IMMEDIATE, a read-only reader pool, private
// file modes, and forward-only migrations recorded in PRAGMA user_version.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/tmux-amq/tamq/internal/health"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tmux-amq/tamq/internal/errs"
)

// DefaultBusyTimeout is used when Options.BusyTimeout is not positive.
const DefaultBusyTimeout = 5 * time.Second

const (
	// busy_timeout has already waited on every attempt; the retries are for the busy
	// errors SQLite returns without calling its busy handler, which clear quickly.
	busyAttempts = 5
	busyBackoff  = 10 * time.Millisecond
)

// Options says which database to open and how.
type Options struct {
	Path        string
	BackupDir   string        // where migrations put backups; default <dir of Path>/backups
	BusyTimeout time.Duration // default DefaultBusyTimeout
	Synchronous string        // "FULL" (default) or "NORMAL"
	Migrations  []Migration
	Now         func() time.Time    // names backups; default time.Now
	Sleep       func(time.Duration) // backoff between busy retries; default time.Sleep
}

// DB is an open database: all writes go through Writer (one connection, so writes
// never contend inside the process), all reads through Reader.
type DB struct {
	Writer     *sql.DB
	Reader     *sql.DB
	Path       string
	BackupPath string // the backup Open made before migrating, if it made one

	sleep func(time.Duration)

	writerStmts, readerStmts sync.Map // query text -> *sql.Stmt
	wanted                   sync.Map // writer queries to prepare after the transaction
}

// Info describes a database file without opening it for writing: the
// database section of both programs' status (its Error is the report's to
// set).
type Info = health.SQLite

// Open opens (creating if needed) the database at o.Path and applies pending
// migrations. A database with a newer schema than o.Migrations know is refused
// untouched.
func Open(ctx context.Context, o Options) (*DB, error) {
	if o.Path == "" {
		return nil, errs.New(errs.Internal, "sqlitedb: no database path given")
	}
	path, err := filepath.Abs(o.Path)
	if err != nil {
		return nil, storageError(err, "database path %s", o.Path)
	}
	if err := checkMigrations(o.Migrations); err != nil {
		return nil, err
	}
	o, err = o.withDefaults(path)
	if err != nil {
		return nil, err
	}
	busy := o.BusyTimeout

	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return nil, storageError(err, "state dir %s is not usable", dir)
	}
	if err := checkWritable(path); err != nil {
		return nil, err
	}
	if err := ensureFile(path); err != nil {
		return nil, storageError(err, "database file %s is not usable", path)
	}

	// Checked on a read-only connection before the writer opens: switching to WAL is
	// itself a write, and a newer binary's database must be left exactly as it is.
	latest := LatestVersion(o.Migrations)
	v, err := readVersion(ctx, path, busy)
	if err != nil {
		return nil, err
	}
	if v > latest {
		return nil, tooNew(path, v, latest)
	}

	pragmas := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", max(busy.Milliseconds(), 1)),
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(" + o.Synchronous + ")",
	}
	writer, err := openWriter(ctx, path, pragmas, v == 0)
	if err != nil {
		return nil, err
	}
	db := &DB{Writer: writer, Path: path, sleep: o.Sleep}
	if err := db.migrate(ctx, o.Migrations, o.BackupDir, o.Now); err != nil {
		writer.Close()
		return nil, err
	}

	// mode=ro as well as query_only: query_only is a pragma any statement could undo.
	reader, err := sql.Open("sqlite", dsn(path, append([]string{"mode=ro"}, append(pragmas, "_pragma=query_only(1)")...)...))
	if err != nil {
		writer.Close()
		return nil, storageError(err, "open database %s", path)
	}
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, storageError(err, "open database %s for reading", path)
	}
	db.Reader = reader
	return db, nil
}

// withDefaults checks o's synchronous setting and fills in what o leaves
// unset: FULL, DefaultBusyTimeout, backups beside the database at path, the
// system clock.
func (o Options) withDefaults(path string) (Options, error) {
	switch mode := strings.ToUpper(o.Synchronous); mode {
	case "":
		o.Synchronous = "FULL"
	case "FULL", "NORMAL":
		o.Synchronous = mode
	default:
		return o, errs.New(errs.ConfigInvalid, "invalid SQLite synchronous setting %q: want FULL or NORMAL", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.BackupDir == "" {
		o.BackupDir = filepath.Join(filepath.Dir(path), "backups")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	return o, nil
}

// openWriter opens the one writing connection in WAL mode; a fresh
// database (no page written yet) also gets incremental auto-vacuum.
func openWriter(ctx context.Context, path string, pragmas []string, fresh bool) (*sql.DB, error) {
	writerPragmas := append([]string{}, pragmas...)
	if fresh {
		// Incremental auto-vacuum lets a purge give space back in small steps
		// while the service keeps writing; SQLite takes it only before the
		// database's first page is written (the switch to WAL writes it).
		writerPragmas = append(writerPragmas, "_pragma=auto_vacuum(INCREMENTAL)")
	}
	writer, err := sql.Open("sqlite", dsn(path, append(writerPragmas, "_pragma=journal_mode(WAL)", "_txlock=immediate")...))
	if err != nil {
		return nil, storageError(err, "open database %s", path)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	// PRAGMA journal_mode reports the old mode instead of failing when it cannot switch.
	var mode string
	if err := writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		writer.Close()
		return nil, storageError(err, "open database %s", path)
	}
	if !strings.EqualFold(mode, "wal") {
		writer.Close()
		return nil, errs.New(errs.Storage, "database %s could not be switched to WAL mode (it is in %s mode)", path, mode)
	}
	return writer, nil
}

// WriteTx runs fn in one BEGIN IMMEDIATE transaction and commits it. When SQLite
// reports the database busy or locked anywhere in it, the whole transaction is
// rolled back and run again, a few times with backoff, so fn must do nothing but
// database work through tx: anything it counts or records outside tx must be
// taken from the attempt that committed, once WriteTx has returned nil. An
// error returned by fn is returned unchanged when it carries a code; an SQLite
// failure goes through Wrap.
func (db *DB) WriteTx(ctx context.Context, fn func(*sql.Tx) error) error {
	// Statements first seen inside the last transaction are prepared now that
	// the writer's one connection is free again.
	defer db.prepareWanted()
	var err error
	for attempt := 1; ; attempt++ {
		var fromFn bool
		fromFn, err = db.writeOnce(ctx, fn)
		if err == nil {
			return nil
		}
		if !isBusy(err) {
			if fromFn {
				return wrapAt(err, db.Path, "write to database %s", db.Path)
			}
			return wrapAt(err, db.Path, "commit to database %s", db.Path)
		}
		if attempt == busyAttempts {
			break
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		db.sleep(busyBackoff << (attempt - 1))
	}
	return storageError(err, "database %s stayed busy after %d attempts", db.Path, busyAttempts).
		WithHint("another process may be holding a long write transaction on it")
}

func (db *DB) writeOnce(ctx context.Context, fn func(*sql.Tx) error) (fromFn bool, err error) {
	tx, err := db.Writer.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	// A transaction left open would hold the only writer connection for good.
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return true, err
	}
	return false, tx.Commit()
}

// isBusy reports whether err is SQLite's busy or locked result, including the
// extended codes (extended result codes are on in modernc.org/sqlite).
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// SchemaVersion returns PRAGMA user_version.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := db.Reader.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, storageError(err, "read schema version of %s", db.Path)
	}
	return v, nil
}

// Close closes the readers first so that the writer, closing last, checkpoints the WAL.
func (db *DB) Close() error {
	var rerr error
	if db.Reader != nil {
		rerr = db.Reader.Close()
	}
	return errors.Join(rerr, db.Writer.Close())
}

// Inspect reports on the database at path for db-version. It only reads: a missing
// file or directory is reported, never created, and it leaves nothing behind
// that the service could not use (see prepareToRead).
func Inspect(path string, known int) (Info, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	info := Info{Path: path, BinarySchemaVersion: known}
	fi, params, err := statForReading(path)
	if fi == nil || err != nil {
		return info, err
	}
	info.Exists = true
	info.SizeBytes = fi.Size()
	if info.SchemaVersion, err = readVersion(context.Background(), path, DefaultBusyTimeout, params...); err != nil {
		return info, err
	}
	wal, err := os.Stat(path + "-wal")
	switch {
	case err == nil:
		info.WALSizeBytes = wal.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return info, storageError(err, "database WAL %s-wal is not usable", path)
	}
	return info, nil
}

// InspectOpen is Inspect for a database the caller already has open: the
// version comes from db, the sizes from the files.
func InspectOpen(ctx context.Context, db *sql.DB, path string, known int) (Info, error) {
	info := Info{Path: path, BinarySchemaVersion: known, Exists: true}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&info.SchemaVersion); err != nil {
		return info, storageError(err, "read schema version of %s", path)
	}
	if fi, err := os.Stat(path); err == nil {
		info.SizeBytes = fi.Size()
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		info.WALSizeBytes = fi.Size()
	}
	return info, nil
}

func tooNew(path string, v, latest int) error {
	return errs.New(errs.SchemaTooNew, "database %s has schema version %d, newer than this binary supports (%d); it was left untouched", path, v, latest).
		WithHint("run a newer build of this program against it")
}

// readVersion reads user_version on a mode=ro connection, which can neither create
// the file nor change it; params are added to its DSN.
func readVersion(ctx context.Context, path string, busy time.Duration, params ...string) (int, error) {
	db, err := sql.Open("sqlite", dsn(path, append([]string{"mode=ro", fmt.Sprintf("_pragma=busy_timeout(%d)", max(busy.Milliseconds(), 1))}, params...)...))
	if err != nil {
		return 0, storageError(err, "read schema version of %s", path)
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, storageError(err, "read schema version of %s", path)
	}
	return v, nil
}

// dsn builds a file: URI, the form in which modernc.org/sqlite hands SQLite's own
// parameters (mode=ro) through as well as its _pragma and _txlock ones.
func dsn(path string, params ...string) string {
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return "file:" + escaped + "?" + strings.Join(params, "&")
}

// ensureDir creates dir and any missing parents 0700, whatever the umask. A directory
// that already exists keeps its mode: it is the user's.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := ensureDir(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created meanwhile by someone else; theirs to set
		}
		return err
	}
	return os.Chmod(dir, 0o700)
}

// ensureFile creates the database file 0600 whatever the umask, so that SQLite,
// which gives -wal and -shm the mode of the database file, creates those 0600 too.
func ensureFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return errors.Join(f.Chmod(0o600), f.Close())
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

// statForReading stats the database at path for a reader and checks that
// it can be read; fi is nil when there is no database. params are what a
// reader's DSN needs beyond mode=ro ("immutable=1", see prepareToRead).
func statForReading(path string) (fi fs.FileInfo, params []string, err error) {
	fi, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case errors.Is(err, fs.ErrPermission):
		if derr := checkAccess(nameStateDir, filepath.Dir(path), "x"); derr != nil {
			return nil, nil, derr
		}
		return nil, nil, storageError(err, "%s %s is not usable", nameDatabase, path)
	case err != nil:
		return nil, nil, storageError(err, "%s %s is not usable", nameDatabase, path)
	case !fi.Mode().IsRegular():
		return nil, nil, errs.New(errs.Storage, "%s %s is not a regular file", nameDatabase, path)
	}
	immutable, err := prepareToRead(path, fi)
	if immutable {
		params = []string{"immutable=1"}
	}
	return fi, params, err
}

// OpenReadOnly opens an existing database for reading only (status while the
// service is down). It never creates or changes the database, and leaves
// nothing behind that the service could not use (see prepareToRead); a
// missing file is errs.NotFound, a newer schema than known is
// errs.SchemaTooNew, an older one (not migrated yet) errs.Unavailable.
func OpenReadOnly(ctx context.Context, path string, known int, busy time.Duration) (*sql.DB, error) {
	fi, params, err := statForReading(path)
	if err != nil {
		return nil, err
	}
	if fi == nil {
		return nil, errs.New(errs.NotFound, "database %s does not exist yet", path)
	}
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	v, err := readVersion(ctx, path, busy, params...)
	if err != nil {
		return nil, err
	}
	if v > known {
		return nil, tooNew(path, v, known)
	}
	if v < known {
		// A reader never migrates, and its queries are written for the
		// latest schema: what an older one lacks would read as a confusing
		// "no such table".
		return nil, errs.New(errs.Unavailable, "database %s has schema version %d; this binary reads version %d, to which the service upgrades it when it starts", path, v, known).
			WithHint("start the service once (`start --detach`), then run this again")
	}
	db, err := sql.Open("sqlite", dsn(path, append([]string{"mode=ro", fmt.Sprintf("_pragma=busy_timeout(%d)", busy.Milliseconds()), "_pragma=query_only(1)"}, params...)...))
	if err != nil {
		return nil, storageError(err, "open %s read-only", path)
	}
	return db, nil
}

// stmt returns a statement for q prepared once on pool: SQLite spends as long
// parsing a small statement as running it, and the hot paths run the same few
// statements thousands of times. Nil means not prepared yet: inside a write
// transaction the writer's only connection is taken, so preparing there would
// wait forever; the query is remembered and prepared after the transaction.
func (db *DB) stmt(cache *sync.Map, pool *sql.DB, q string) *sql.Stmt {
	if s, ok := cache.Load(q); ok {
		return s.(*sql.Stmt)
	}
	if pool == db.Writer {
		db.wanted.Store(q, true)
		return nil
	}
	return db.prepare(cache, pool, q)
}

func (db *DB) prepare(cache *sync.Map, pool *sql.DB, q string) *sql.Stmt {
	s, err := pool.Prepare(q)
	if err != nil {
		return nil // the caller runs q directly and reports the error
	}
	if prev, loaded := cache.LoadOrStore(q, s); loaded {
		s.Close()
		return prev.(*sql.Stmt)
	}
	return s
}

// prepareWanted prepares the writer statements stmt deferred.
func (db *DB) prepareWanted() {
	db.wanted.Range(func(q, _ any) bool {
		db.wanted.Delete(q)
		db.prepare(&db.writerStmts, db.Writer, q.(string))
		return true
	})
}

// The statement helpers below report SQLite failures through Wrap, naming
// what the statement does and the database, so every caller's errors carry
// a code.

// TxExec runs q inside tx with a cached prepared statement.
func (db *DB) TxExec(tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	var res sql.Result
	var err error
	if s := db.stmt(&db.writerStmts, db.Writer, q); s != nil {
		res, err = tx.Stmt(s).Exec(args...)
	} else {
		res, err = tx.Exec(q, args...)
	}
	return res, stmtError(err, q, db.Path)
}

// TxQueryRow runs q inside tx with a cached prepared statement.
func (db *DB) TxQueryRow(tx *sql.Tx, q string, args ...any) *Row {
	if s := db.stmt(&db.writerStmts, db.Writer, q); s != nil {
		return &Row{tx.Stmt(s).QueryRow(args...), q, db.Path}
	}
	return &Row{tx.QueryRow(q, args...), q, db.Path}
}

// TxQuery runs q inside tx with a cached prepared statement.
func (db *DB) TxQuery(tx *sql.Tx, q string, args ...any) (*Rows, error) {
	var rows *sql.Rows
	var err error
	if s := db.stmt(&db.writerStmts, db.Writer, q); s != nil {
		rows, err = tx.Stmt(s).Query(args...)
	} else {
		rows, err = tx.Query(q, args...)
	}
	if err != nil {
		return nil, stmtError(err, q, db.Path)
	}
	return &Rows{rows, q, db.Path}, nil
}

// Query runs q on the reader pool with a cached prepared statement.
func (db *DB) Query(ctx context.Context, q string, args ...any) (*Rows, error) {
	var rows *sql.Rows
	var err error
	if s := db.stmt(&db.readerStmts, db.Reader, q); s != nil {
		rows, err = s.QueryContext(ctx, args...)
	} else {
		rows, err = db.Reader.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, stmtError(err, q, db.Path)
	}
	return &Rows{rows, q, db.Path}, nil
}

// QueryRow runs q on the reader pool with a cached prepared statement.
func (db *DB) QueryRow(ctx context.Context, q string, args ...any) *Row {
	if s := db.stmt(&db.readerStmts, db.Reader, q); s != nil {
		return &Row{s.QueryRowContext(ctx, args...), q, db.Path}
	}
	return &Row{db.Reader.QueryRowContext(ctx, q, args...), q, db.Path}
}

// Tables is what every part of a program's store shares (both programs'
// stores embed it): the database, and the clock that stamps the rows and
// receipts it writes.
type Tables struct {
	DB  *DB
	Now func() time.Time
}
