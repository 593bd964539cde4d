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

// Store is coordination-engine's durable state: one type per concept over
// the one database. Every transition of a trigger, lease or endpoint runs in
// one write transaction together with its receipts; a concept's type that
// writes another's rows or receipts in its transaction calls that type's
// ...Tx method with the transaction.
type Store struct {
	*shared
	Triggers    *Triggers
	Leases      *Leases
	Deadlines   *Deadlines
	LeaseLists  *LeaseLists
	Checkpoints *Checkpoints
	Receipts    *Receipts
	Endpoints   *Endpoints
	Observer    *ObserverState
	History     *History
}

// shared is what every concept's type holds: the database, the clock that
// stamps what it writes, and the policy in force.
type shared struct {
	// Tables: the database, and Now that stamps every row and receipt the
	// store writes.
	sqlitedb.Tables
	// PolicyProfile (name@version) and ConfigVersion are in force for this
	// process: a lease is offered under them, and a receipt written without
	// its own gets these.
	PolicyProfile string
	ConfigVersion string
	// ReceiptAdded, when set, is told of every receipt written (inside its
	// transaction): the service's change counter, which a view waits on.
	ReceiptAdded func()
}

// Triggers are the observed changes (tasks, messages, checkpoints) the
// engine acts on, and their gates and waits.
type Triggers struct {
	*shared
	receipts *Receipts
}

// Leases are the transitions of leases (offer, wake, ack, renew,
// checkpoint, release, retry, stop), each with its receipt.
type Leases struct {
	*shared
	receipts  *Receipts
	triggers  *Triggers
	endpoints *Endpoints
}

// Deadlines are what the lease clock and the waker read and sweep: leases
// whose deadline passed, next attempts due, wakes not answered yet.
type Deadlines struct {
	*shared
	leases *Leases
}

// LeaseLists read leases: one by id, listings, counts, the live ones of a
// repo, task or trigger.
type LeaseLists struct{ *shared }

// Checkpoints read the checkpoints agents recorded on leases.
type Checkpoints struct{ *shared }

// Receipts are the audit trail: written with each transition, listed, and
// published to State Hub by the outbox.
type Receipts struct{ *shared }

// Endpoints are tamq's sessions attached to the engine, and the windows
// (repos) each hosts.
type Endpoints struct {
	*shared
	receipts *Receipts
}

// ObserverState is what the observer keeps between looks (its cursors) and
// the database's instance id.
type ObserverState struct{ *shared }

// History deletes the history older than a cutoff (purge and retention).
type History struct{ *shared }

// New is the store over db, its writes stamped by clk (nil: the system's).
func New(db *sqlitedb.DB, clk clock.Clock) *Store {
	if clk == nil {
		clk = clock.System // a reader that writes nothing
	}
	sh := &shared{Tables: sqlitedb.Tables{DB: db, Now: clk.Now}}
	receipts := &Receipts{sh}
	triggers := &Triggers{shared: sh, receipts: receipts}
	endpoints := &Endpoints{shared: sh, receipts: receipts}
	leases := &Leases{shared: sh, receipts: receipts, triggers: triggers, endpoints: endpoints}
	return &Store{
		shared: sh, Triggers: triggers, Leases: leases, Deadlines: &Deadlines{shared: sh, leases: leases},
		LeaseLists: &LeaseLists{sh}, Checkpoints: &Checkpoints{sh}, Receipts: receipts, Endpoints: endpoints,
		Observer: &ObserverState{sh}, History: &History{sh},
	}
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
	return New(db, clk), nil
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
	return New(&sqlitedb.DB{Reader: ro, Writer: ro, Path: p.Database}, clock.System), nil
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
