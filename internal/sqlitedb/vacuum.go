package sqlitedb

import (
	"context"
	"fmt"
)

// VacuumStep is how many free pages one incremental step returns to the file
// system: 4 MiB with 4 KiB pages, a write lock held for milliseconds.
const VacuumStep = 1024

// Reclaim gives the free pages of the database back to the file system. A
// database made with incremental auto-vacuum is shrunk in small steps, each
// its own short write, so a service writing at the same time waits for one
// step at most; progress, when set, hears the pages left after each step.
//
// A database made before that setting existed cannot be shrunk in steps:
// SQLite takes the setting only through one full VACUUM, which rewrites the
// whole file and holds the write lock for its whole run (seconds for a few
// hundred MB). With convert, Reclaim does that once; only a process that is
// the database's one writer may ask for it (tamq purge with the service
// stopped, holding the service's lock). Without convert, such a database
// keeps its free pages, which SQLite reuses for new rows, and kept is true.
//
// The WAL is then checkpointed and truncated, when no reader holds it.
func (db *DB) Reclaim(ctx context.Context, convert bool, progress func(pagesLeft int64)) (kept bool, err error) {
	var mode int
	if err := db.Writer.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return false, storageError(err, "read auto_vacuum of %s", db.Path)
	}
	const incremental = 2
	if mode != incremental {
		if !convert {
			return true, nil
		}
		if _, err := db.Writer.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
			return false, storageError(err, "set auto_vacuum of %s", db.Path)
		}
		if _, err := db.Writer.ExecContext(ctx, "VACUUM"); err != nil {
			return false, storageError(err, "vacuum %s", db.Path)
		}
	}
	for {
		var free int64
		if err := db.Writer.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			return false, storageError(err, "read free pages of %s", db.Path)
		}
		if progress != nil {
			progress(free)
		}
		if free == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		// The pragma frees one page per step of its statement; Exec runs it
		// to the end.
		if _, err := db.Writer.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", VacuumStep)); err != nil {
			return false, storageError(err, "give back free pages of %s", db.Path)
		}
	}
	// A busy checkpoint is not an error: the WAL is reused, and truncated by
	// a later checkpoint.
	_, _ = db.Writer.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return false, nil
}
