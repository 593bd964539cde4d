package testutil

import (
	"database/sql"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver IntegrityCheck opens databases with

	"github.com/tmux-amq/tamq/internal/lockfile"
)

// ChaosRounds is how many times a crash campaign kills its daemon: short in
// `make test`, TAMQ_CHAOS_ROUNDS of them under `make chaos` (100).
func ChaosRounds(t testing.TB, short int) int {
	t.Helper()
	if v := os.Getenv("TAMQ_CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TAMQ_CHAOS_ROUNDS=%q: want a count", v)
		}
		return n
	}
	return short
}

// ChaosRand is a campaign's schedule, from TAMQ_CHAOS_SEED when set, so a
// failing run can be played again; the seed is logged.
func ChaosRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TAMQ_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TAMQ_CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("chaos seed %d (TAMQ_CHAOS_SEED plays it again)", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// IntegrityCheck runs SQLite's integrity check on the database at path. It
// waits while another process holds the database (a service started again
// recovering the WAL a killed one left answers SQLITE_BUSY_RECOVERY).
func IntegrityCheck(t testing.TB, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check of %s: %q %v", path, res, err)
	}
}

// LockFree says whether no process holds the lock at lockFile (taking it
// for a moment to find out). A daemon killed with SIGKILL shows as exited
// (its main thread a zombie) while its other threads are still torn down,
// holding its state directory's lock: a start then would find "another
// service", so a campaign waits for both.
func LockFree(lockFile string) bool {
	l, err := lockfile.TryLock(lockFile)
	if err != nil {
		return false
	}
	l.Release()
	return true
}
