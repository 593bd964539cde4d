package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The commands here run as the user runs them: the real binary against the
// engine's own database, with the engine stopped and running.

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

func enginePaths(t *testing.T, e *testutil.Env) paths.Paths { return e.Paths(t, paths.Engine) }

// seedStore opens the engine's database at p (made when missing) for a
// test to write what a running engine would have; close its DB when done,
// before the programs read it.
func seedStore(t *testing.T, p paths.Paths) *store.Store {
	t.Helper()
	if err := paths.EnsurePrivateDir(p.StateDir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), p, time.Second, clock.System)
	if err != nil {
		t.Fatal(err)
	}
	st.PolicyProfile, st.ConfigVersion = "default@1", "cfg"
	return st
}

// seedLease writes what one woken task leaves in the engine's database: a
// trigger for T-1, its lease offered, a wake that failed, the agent's ack
// and release. It returns the lease id.
func seedLease(t *testing.T, p paths.Paths) string {
	t.Helper()
	ctx := context.Background()
	st := seedStore(t, p)
	defer st.DB.Close()
	timing := lease.Timing{AckTimeout: time.Minute, RenewInterval: time.Minute, MissedRenewals: 3, Backoff: []time.Duration{time.Second}, MaxRetries: 2}
	tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: "1",
		TargetRepo: "alpha", TaskID: "T-1", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Leases.Offer(ctx, tr.ID, "", "", timing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Err: "tamq is not running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Leases.Ack(ctx, l.ID, 0, store.Who{By: "agent"}, timing); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Leases.Release(ctx, l.ID, string(lease.ResultCompleted), "done", 0, store.Who{By: "agent"}, timing); err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// run runs coordination-engine and decodes its --json output into v when
// it exits 0.
func run(t *testing.T, e *testutil.Env, v any, args ...string) testutil.Result {
	t.Helper()
	r := e.Run(t, "coordination-engine", args...)
	if r.Status == 0 && v != nil {
		if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, r)
		}
	}
	return r
}

// While the engine is stopped, leases, receipts and explain answer from its
// database (read-only), saying so in one line on stderr and in --json,
// with what the running engine answers from the same database. Without a
// database they say there is none (exit 8); a newer schema is refused (7).
func TestReadOnlyCommandsReadTheDatabaseWhileStopped(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	// No State Hub: a closed port, never another test's hub.
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	p := enginePaths(t, e)

	for _, args := range [][]string{{"leases"}, {"receipts"}, {"explain", "T-1"}} {
		r := run(t, e, nil, args...)
		if r.Status != 8 || !strings.Contains(r.Stderr, "not running") || !strings.Contains(r.Stderr, "has no database yet") {
			t.Errorf("%s without a database: %s", args[0], r)
		}
	}
	if _, err := os.Stat(p.StateDir); !os.IsNotExist(err) {
		t.Errorf("a read while stopped made the state directory: %v", err)
	}

	id := seedLease(t, p)
	const note = "coordination-engine: not running: this is its database as last written ("
	var leases api.LeasesResult
	r := run(t, e, &leases, "leases", "--json")
	if r.Status != 0 || strings.Count(r.Stderr, "\n") != 1 || !strings.HasPrefix(r.Stderr, note) {
		t.Fatalf("leases while stopped: %s", r)
	}
	if !leases.Offline || len(leases.Leases) != 1 || leases.Leases[0].LeaseID != id || leases.Leases[0].State != "completed" {
		t.Errorf("leases while stopped: %+v", leases)
	}
	if r := run(t, e, nil, "leases"); r.Status != 0 || !strings.HasPrefix(r.Stdout, "LEASE ") ||
		!regexp.MustCompile(`(?m)^`+id+` +T-1 +alpha +completed +1/3 +agent `).MatchString(r.Stdout) {
		t.Errorf("leases while stopped, for people: %s", r)
	}
	if r := run(t, e, nil, "leases", "--state", "sleeping"); r.Status != 15 || !strings.Contains(r.Stderr, `state "sleeping" is not a lease state`) {
		t.Errorf("leases of an unknown state while stopped: %s", r)
	}
	var receipts api.ReceiptsResult
	r = run(t, e, &receipts, "receipts", "--lease", id, "--json")
	if r.Status != 0 || !strings.HasPrefix(r.Stderr, note) || !receipts.Offline {
		t.Fatalf("receipts while stopped: %s", r)
	}
	var kinds []string
	for _, rc := range receipts.Receipts {
		kinds = append(kinds, rc.Kind)
	}
	if strings.Join(kinds, " ") != "lease.offered wake.failed lease.acknowledged lease.completed" {
		t.Errorf("receipts of the lease while stopped: %v", kinds)
	}
	var explained api.ExplainResult
	r = run(t, e, &explained, "explain", "T-1", "--json")
	if r.Status != 0 || !strings.HasPrefix(r.Stderr, note) {
		t.Fatalf("explain while stopped: %s", r)
	}
	if !explained.Offline || explained.Observed || len(explained.Triggers) != 1 || len(explained.Triggers[0].Leases) != 1 ||
		explained.Triggers[0].Leases[0].LeaseID != id || len(explained.Triggers[0].Leases[0].Wakes) != 1 ||
		explained.Verdict != "coordination-engine is not running; from its database as last written: woken (task_actionable); lease "+id+" completed" {
		t.Errorf("explain while stopped: %+v", explained)
	}
	if r := run(t, e, nil, "explain", "T-1"); r.Status != 0 || !strings.HasPrefix(r.Stdout, "task T-1: coordination-engine is not running;") {
		t.Errorf("explain while stopped, for people: %s", r)
	}

	// The running engine answers the same from the same database.
	e.Engine(t, "start", "--detach")
	var liveLeases api.LeasesResult
	var liveReceipts api.ReceiptsResult
	run(t, e, &liveLeases, "leases", "--json")
	r = run(t, e, &liveReceipts, "receipts", "--lease", id, "--json")
	if r.Stderr != "" || liveLeases.Offline || liveReceipts.Offline {
		t.Errorf("the running engine's answers say offline: %s", r)
	}
	e.Engine(t, "stop")
	leases.Offline, receipts.Offline = false, false
	if a, b := jsonOf(t, leases), jsonOf(t, liveLeases); a != b {
		t.Errorf("leases read while stopped\n%s\ndiffer from the running engine's\n%s", a, b)
	}
	if a, b := jsonOf(t, receipts), jsonOf(t, liveReceipts); a != b {
		t.Errorf("receipts read while stopped\n%s\ndiffer from the running engine's\n%s", a, b)
	}

	// A database newer than this binary is refused, and left as it is.
	db, err := sql.Open("sqlite", "file:"+p.Database)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{{"leases"}, {"receipts"}, {"explain", "T-1"}} {
		if r := run(t, e, nil, args...); r.Status != 7 || !strings.Contains(r.Stderr, "newer than this binary") {
			t.Errorf("%s on a newer schema: %s", args[0], r)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
