package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Store is coordination-engine's durable state. Every transition of a
// trigger, lease or endpoint runs in one write transaction together with
// its receipts.
type Store struct {
	DB *sqlitedb.DB
	// Clock stamps every row and receipt the store writes.
	Clock clock.Clock
	// PolicyProfile (name@version) and ConfigVersion are in force for this
	// process: a lease is offered under them, and a receipt written without
	// its own gets these.
	PolicyProfile string
	ConfigVersion string
}

// Open opens (creating and migrating as needed) coordination-engine's
// database at p; clk stamps what it writes (nil: the system's clock).
func Open(ctx context.Context, p paths.Paths, busy time.Duration, clk clock.Clock) (*Store, error) {
	if clk == nil {
		clk = clock.System
	}
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{
		Path: p.Database, BackupDir: p.BackupDir, BusyTimeout: busy, Migrations: Migrations, Now: clk.Now,
	})
	if err != nil {
		return nil, err
	}
	return &Store{DB: db, Clock: clk}, nil
}

// OpenReadOnly opens the engine's database at p for reading only, for the
// listings while the engine is stopped: it never creates, migrates or
// changes the file. A missing database is errs.NotFound, a newer schema
// errs.SchemaTooNew, an older one (the engine migrates it when it starts)
// errs.Unavailable. Both pools are the one read-only handle, so a write by
// mistake fails instead of reaching the file; Close the store's DB after use.
func OpenReadOnly(ctx context.Context, p paths.Paths, busy time.Duration) (*Store, error) {
	ro, err := sqlitedb.OpenReadOnly(ctx, p.Database, sqlitedb.LatestVersion(Migrations), busy)
	if err != nil {
		return nil, err
	}
	return &Store{DB: &sqlitedb.DB{Reader: ro, Writer: ro, Path: p.Database}, Clock: clock.System}, nil
}

// NewID returns a time-ordered id (UUIDv7), as tamq's ids are.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// sqlIn is a list of domain values for an SQL IN: "('a', 'b')". Queries
// name states as literals rather than bind them, so SQLite can use the
// partial indexes written with the same literals; the values are the
// domain's constants, never input.
func sqlIn[T ~string](vs ...T) string {
	lits := make([]string, len(vs))
	for i, v := range vs {
		lits[i] = "'" + string(v) + "'"
	}
	return "(" + strings.Join(lits, ", ") + ")"
}

var (
	// liveStates hold their trigger (the partial unique index's states).
	liveStates = sqlIn(lease.Offered, lease.Acknowledged, lease.Running, lease.Checkpointed, lease.RetryWait)
	// runningOut are the states whose expires_at is a deadline.
	runningOut = sqlIn(lease.Offered, lease.Acknowledged, lease.Running, lease.Checkpointed)
)

// storageErr names the store operation that failed: an SQLite error says
// what went wrong, not what the engine was doing. Errors that already carry
// a code (a refused transition, a missing lease) pass unchanged.
func storageErr(err error, op string) error { return errs.During(errs.Storage, err, op) }

// notFound turns sql.ErrNoRows into a not_found error naming what is missing.
func notFound(err error, what, hint string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return errs.New(errs.NotFound, "no %s", what).WithHint("%s", hint)
	}
	return err
}

// NewestTime is the latest time the engine wrote into db (every transition
// writes a receipt; endpoints and the observer's state are small tables), or
// the zero time when it holds none: a clock that reads earlier has gone
// backwards. db may be a read-only handle.
func NewestTime(ctx context.Context, db *sql.DB) (time.Time, error) {
	return sqlitedb.NewestTime(ctx, db, `SELECT max(v) FROM (
		SELECT (SELECT at FROM receipts ORDER BY id DESC LIMIT 1) AS v
		UNION ALL SELECT max(updated_at) FROM endpoints
		UNION ALL SELECT max(updated_at) FROM observer_state)`)
}
