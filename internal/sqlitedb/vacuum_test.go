package sqlitedb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fillAndEmpty writes about 8 MB into t and deletes it, leaving free pages.
func fillAndEmpty(t *testing.T, db *DB) {
	t.Helper()
	for range 2000 {
		if _, err := db.Writer.Exec(`INSERT INTO t VALUES (?)`, strings.Repeat("x", 4000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Writer.Exec(`DELETE FROM t`); err != nil {
		t.Fatal(err)
	}
}

func TestReclaimGivesSpaceBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	migrations := []Migration{{Version: 1, Name: "t", SQL: "CREATE TABLE t (b TEXT)"}}
	for _, tc := range []struct {
		name     string
		prepare  func(path string) // makes the file before Open, or not
		wantMode int
		minSteps int // progress calls: one per incremental step and the last
	}{
		{"new database: incremental from the start", func(string) {}, 2, 3},
		{"older database without auto-vacuum: converted once", func(path string) {
			// A database whose first table came before the setting existed.
			db, err := Open(ctx, Options{Path: path, Migrations: migrations})
			if err != nil {
				t.Fatal(err)
			}
			db.Writer.Exec("PRAGMA auto_vacuum = NONE")
			db.Writer.Exec("VACUUM")
			db.Close()
		}, 0, 1},
	} {
		path := filepath.Join(t.TempDir(), "x.sqlite3")
		tc.prepare(path)
		db, err := Open(ctx, Options{Path: path, Migrations: migrations})
		if err != nil {
			t.Fatal(err)
		}
		var mode int
		db.Writer.QueryRow("PRAGMA auto_vacuum").Scan(&mode)
		if mode != tc.wantMode {
			t.Errorf("%s: auto_vacuum %d, want %d", tc.name, mode, tc.wantMode)
		}
		fillAndEmpty(t, db)
		db.Writer.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		before, _ := os.Stat(path)
		steps := 0
		if kept, err := db.Reclaim(ctx, true, func(int64) { steps++ }); err != nil || kept {
			t.Fatal(kept, err)
		}
		after, _ := os.Stat(path)
		var free int64
		db.Writer.QueryRow("PRAGMA freelist_count").Scan(&free)
		db.Writer.QueryRow("PRAGMA auto_vacuum").Scan(&mode)
		if free != 0 || mode != 2 || after.Size() > before.Size()/10 || steps < tc.minSteps {
			t.Errorf("%s: free pages %d, mode %d, file %d -> %d bytes, %d steps", tc.name, free, mode, before.Size(), after.Size(), steps)
		}
		db.Close()
	}
}

// TestReclaimWithoutConvertLeavesAnOlderDatabase: a writer that is not the
// database's only one never runs the full VACUUM an older database needs.
func TestReclaimWithoutConvertLeavesAnOlderDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.sqlite3")
	migrations := []Migration{{Version: 1, Name: "t", SQL: "CREATE TABLE t (b TEXT)"}}
	db, err := Open(ctx, Options{Path: path, Migrations: migrations})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Writer.Exec("PRAGMA auto_vacuum = NONE")
	db.Writer.Exec("VACUUM")
	fillAndEmpty(t, db)
	var freeBefore, free int64
	db.Writer.QueryRow("PRAGMA freelist_count").Scan(&freeBefore)
	steps := 0
	kept, err := db.Reclaim(ctx, false, func(int64) { steps++ })
	var mode int
	db.Writer.QueryRow("PRAGMA auto_vacuum").Scan(&mode)
	db.Writer.QueryRow("PRAGMA freelist_count").Scan(&free)
	if err != nil || !kept || mode != 0 || free != freeBefore || freeBefore == 0 || steps != 0 {
		t.Errorf("kept %v, err %v, mode %d, free pages %d -> %d, %d steps", kept, err, mode, freeBefore, free, steps)
	}
}
