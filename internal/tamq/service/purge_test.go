package service_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// purgeJSON runs tamq purge --yes --json with args and decodes its record.
func purgeJSON(t *testing.T, e *testutil.Env, args ...string) api.PurgeResult {
	t.Helper()
	r := e.Tamq(t, append([]string{"purge", "--yes", "--json"}, args...)...)
	var res api.PurgeResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("purge --json: %v\n%s", err, r)
	}
	return res
}

// injected sends n messages to repo and waits until each is written.
func injected(t *testing.T, e *testutil.Env, repo string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		m := send(t, e, fmt.Sprintf("To:%s: done %d", repo, i))
		waitState(t, e, m.ID, "injected")
		ids = append(ids, m.ID)
	}
	return ids
}

func serviceLog(t *testing.T, e *testutil.Env) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(e.TamqState(), "tamq.log"))
	return string(b)
}

// TestPurgeGoesThroughTheRunningService: with the service up the purge is
// the service's work (its log names the purge's receipt); with the service
// down the command does it itself, and leaves the lock free behind it.
func TestPurgeGoesThroughTheRunningService(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	injected(t, e, "net-kingdom", 3)
	res := purgeJSON(t, e, "--before", "0s")
	if res.Deleted != 3 || res.Matching != 3 || res.PurgeID == "" || res.FileBytesBefore == 0 {
		t.Fatalf("purge with the service up: %+v", res)
	}
	if log := serviceLog(t, e); !strings.Contains(log, `msg="history purged" purge_id=`+res.PurgeID+" deleted=3") {
		t.Errorf("the service's log does not show the purge %s:\n%s", res.PurgeID, log)
	}
	if rs := receipts(t, e, "history.purged"); len(rs) != 1 || rs[0]["subject_id"] != res.PurgeID || rs[0]["limit"] != float64(3) {
		t.Errorf("purge receipts %v", rs)
	}

	injected(t, e, "net-kingdom", 2)
	e.Tamq(t, "stop")
	res = purgeJSON(t, e, "--before", "0s")
	if res.Deleted != 2 || res.PurgeID == "" {
		t.Fatalf("purge with the service down: %+v", res)
	}
	if log := serviceLog(t, e); strings.Contains(log, res.PurgeID) {
		t.Errorf("the stopped service logged the purge %s", res.PurgeID)
	}
	if rs := receipts(t, e, "history.purged"); len(rs) != 2 || rs[1]["subject_id"] != res.PurgeID {
		t.Errorf("purge receipts %v", rs)
	}
	// The lock went with the purge: the service starts.
	e.Tamq(t, "start", "--detach")
	if n := len(history(t, e)); n != 0 {
		t.Errorf("%d messages left", n)
	}
}

// TestConcurrentPurgesAndSendsLoseNothing: purges of one repo's history
// through the service, while messages to another repo are being sent: every
// send is queued and kept, and only what the purges chose goes.
func TestConcurrentPurgesAndSendsLoseNothing(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom", "railiance")
	old := injected(t, e, "railiance", 10)
	var wg sync.WaitGroup
	sent := make(chan string, 40)
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				r := e.Run(t, "tamq", "send", "--json", fmt.Sprintf("To:net-kingdom: sender %d message %d", w, i))
				var m api.Message
				if r.Status != 0 || json.Unmarshal([]byte(r.Stdout), &m) != nil {
					t.Errorf("send during a purge: %s", r)
					continue
				}
				sent <- m.ID
			}
		})
	}
	deleted := 0
	for range 3 {
		r := e.Run(t, "tamq", "purge", "--repo", "railiance", "--before", "0s", "--yes", "--json")
		var res api.PurgeResult
		if r.Status != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil {
			t.Errorf("purge beside sends: %s", r)
		}
		deleted += res.Deleted
	}
	wg.Wait()
	close(sent)
	if deleted != len(old) {
		t.Errorf("the purges deleted %d messages, want %d", deleted, len(old))
	}
	kept := map[string]bool{}
	for _, m := range history(t, e) {
		kept[m.ID] = true
	}
	n := 0
	for id := range sent {
		n++
		if !kept[id] {
			t.Errorf("message %s, sent during the purges, is gone", id)
		}
	}
	for _, id := range old {
		if kept[id] {
			t.Errorf("message %s was not purged", id)
		}
	}
	if n != 40 || len(kept) != 40 {
		t.Errorf("%d sent, %d in the history; want 40", n, len(kept))
	}
}

// TestPurgeWithTheServiceDownHoldsItsLock: from its plan to its end, a purge
// run with the service stopped holds the service's lock; a service started
// meanwhile refuses to start, naming the purge, and starts once it is done.
func TestPurgeWithTheServiceDownHoldsItsLock(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	injected(t, e, "net-kingdom", 1)
	e.Tamq(t, "stop")

	// The purge waits at its question on a terminal: the event the test
	// starts the service on.
	cmd := e.Command(context.Background(), "tamq", "purge", "--before", "0s")
	out := testutil.OnTerminalWith(t, cmd, "[y/N] ", func() {
		r := e.Run(t, "tamq", "start", "--detach")
		want := fmt.Sprintf("cannot start: tamq purge (pid %d) is writing to the database in %s", cmd.Process.Pid, e.TamqState())
		if r.Status != 13 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "start the service again once it has finished") {
			t.Errorf("start during a purge: %s\nwant %q", r, want)
		}
		if r := e.Run(t, "tamq", "ping"); r.Status != 8 {
			t.Errorf("a service runs beside the purge: %s", r)
		}
		// A second purge refuses too, rather than wait at its own question.
		if r := e.Run(t, "tamq", "purge", "--before", "0s", "--yes"); r.Status != 13 || !strings.Contains(r.Stderr, "tamq purge (pid") {
			t.Errorf("a second purge: %s", r)
		}
	}, "y\n")
	if !strings.Contains(out, "purged 1 messages") {
		t.Errorf("purge printed:\n%s", out)
	}
	e.Tamq(t, "start", "--detach")
	if n := len(history(t, e)); n != 0 {
		t.Errorf("%d messages left", n)
	}
}

// databaseAt makes the test's database at schema version v (one beyond the
// binary's when v is past its migrations), holding one injected message,
// closed cleanly.
func databaseAt(t *testing.T, e *testutil.Env, v int) {
	t.Helper()
	ms := store.Migrations
	if v < len(ms) {
		ms = ms[:v]
	}
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{Path: e.Database(), Migrations: ms})
	if err != nil {
		t.Fatal(err)
	}
	err = db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
			max_attempts, policy_profile, config_version, created_at, updated_at)
			VALUES ('m1', 'm1', 'operator', 'operator', 'net-kingdom', 'hello', 'injected', 'injected', 3, 'p', 'c', 1, 1)`); err != nil {
			return err
		}
		if v > len(store.Migrations) {
			_, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestNoCommandMigratesBesideTheService: while the service holds its lock,
// the commands that read the database read it as it is, whatever its schema,
// and never migrate it; purge, which would migrate when it writes the
// database itself, refuses.
func TestNoCommandMigratesBesideTheService(t *testing.T) {
	t.Parallel()
	latest := sqlitedb.LatestVersion(store.Migrations)
	for _, v := range []int{1, latest + 1} {
		t.Run(fmt.Sprintf("schema %d", v), func(t *testing.T) {
			t.Parallel()
			e := testutil.NewEnv(t)
			databaseAt(t, e, v)
			// As a service does for its lifetime (one of an older or a newer
			// build, which this one cannot reach).
			lock, err := lockfile.TryLock(filepath.Join(e.TamqState(), "tamq.lock"))
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Release()
			before := fileHash(t, e.Database())
			for _, args := range append(readCommands, []string{"purge", "--before", "0s", "--yes"}) {
				r := e.Run(t, "tamq", args...)
				deletes := args[0] == "purge" && args[len(args)-1] == "--yes"
				// status and db-version report a newer schema; the others refuse it.
				reports := args[0] == "status" || args[0] == "db-version"
				if v > latest && !reports && !deletes && (r.Status != 7 || !strings.Contains(r.Stderr, "left untouched")) {
					t.Errorf("%v on a newer schema: %s", args, r)
				}
				if deletes && (r.Status != 8 || !strings.Contains(r.Stderr, "holds "+filepath.Join(e.TamqState(), "tamq.lock")+" but does not answer; nothing was deleted")) {
					t.Errorf("purge beside a service that does not answer: %s", r)
				}
				if got := fileHash(t, e.Database()); got != before {
					t.Fatalf("%v changed the database", args)
				}
			}
			info, err := sqlitedb.Inspect(e.Database(), latest)
			if err != nil || info.SchemaVersion != v {
				t.Errorf("schema version %d (%v), want %d", info.SchemaVersion, err, v)
			}
			if _, err := os.Stat(filepath.Join(e.TamqState(), "backups")); err == nil {
				t.Error("a command backed the database up, as a migration does")
			}
		})
	}
}
