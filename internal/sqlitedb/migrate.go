package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Migration moves the schema from Version-1 to Version. Up runs when set, SQL
// otherwise. TouchesData marks migrations that alter tables holding messages or
// leases; a database that already holds data is backed up before the first of them.
type Migration struct {
	Version     int
	Name        string
	TouchesData bool
	SQL         string
	Up          func(*sql.Tx) error
}

// LatestVersion is the schema version the migrations lead to: the newest this
// binary supports.
func LatestVersion(ms []Migration) int {
	latest := 0
	for _, m := range ms {
		latest = max(latest, m.Version)
	}
	return latest
}

func checkMigrations(ms []Migration) error {
	for i, m := range ms {
		if m.Version != i+1 {
			return errs.New(errs.Internal, "migration %q has version %d, want %d: versions must run 1, 2, 3, ...", m.Name, m.Version, i+1)
		}
		if m.Up == nil && strings.TrimSpace(m.SQL) == "" {
			return errs.New(errs.Internal, "migration %d (%s) has neither Up nor SQL", m.Version, m.Name)
		}
	}
	return nil
}

// migrate applies the pending migrations, each in its own transaction together with
// its user_version, so a failure leaves the last good schema and version in place.
func (db *DB) migrate(ctx context.Context, ms []Migration, backupDir string, now func() time.Time) error {
	var start int
	if err := db.Writer.QueryRowContext(ctx, "PRAGMA user_version").Scan(&start); err != nil {
		return storageError(err, "read schema version of %s", db.Path)
	}
	if start > len(ms) {
		return tooNew(db.Path, start, len(ms))
	}
	for _, m := range ms[start:] {
		// A database at version 0 was just created and holds no data to lose.
		if m.TouchesData && start >= 1 && db.BackupPath == "" {
			p, err := db.backup(ctx, backupDir, m.Version-1, now())
			if err != nil {
				return err
			}
			db.BackupPath = p
		}
		err := db.WriteTx(ctx, func(tx *sql.Tx) error {
			var v int
			if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
				return err
			}
			if v >= m.Version {
				return nil // another process migrated first
			}
			if m.Up != nil {
				if err := m.Up(tx); err != nil {
					return err
				}
			} else if _, err := tx.Exec(m.SQL); err != nil {
				return err
			}
			// PRAGMA takes no parameters; Version is an int, so formatting is safe.
			_, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.Version))
			return err
		})
		if err != nil {
			return storageError(err, "migrate database %s to schema version %d (%s)", db.Path, m.Version, m.Name)
		}
	}
	return nil
}

// backup copies the database with VACUUM INTO, which takes a consistent snapshot
// while the WAL is in use, to <dir>/<name>-v<version>-<UTC time>.sqlite3.
func (db *DB) backup(ctx context.Context, dir string, version int, at time.Time) (string, error) {
	if err := ensureDir(dir); err != nil {
		return "", storageError(err, "%s %s is not usable", nameBackupDir, dir)
	}
	if err := checkAccess(nameBackupDir, dir, "wx"); err != nil {
		return "", err
	}
	base := strings.TrimSuffix(filepath.Base(db.Path), filepath.Ext(db.Path))
	target := filepath.Join(dir, fmt.Sprintf("%s-v%d-%s.sqlite3", base, version, at.UTC().Format("20060102T150405Z")))

	// VACUUM INTO accepts an existing empty file, and keeps its mode: that is how the
	// copy gets 0600 whatever the umask.
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", storageError(err, "create backup %s", target)
	}
	if err := errors.Join(f.Chmod(0o600), f.Close()); err != nil {
		os.Remove(target)
		return "", storageError(err, "create backup %s", target)
	}
	if _, err := db.Writer.ExecContext(ctx, "VACUUM INTO ?", target); err != nil {
		os.Remove(target)
		return "", storageError(err, "back up database %s to %s", db.Path, target)
	}
	// The migration that follows commits durably; so must the backup that guards it.
	if err := errors.Join(syncPath(target), syncPath(dir)); err != nil {
		return "", storageError(err, "back up database %s to %s", db.Path, target)
	}
	return target, nil
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
