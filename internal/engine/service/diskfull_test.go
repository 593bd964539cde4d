package service_test

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The disk holding coordination-engine's state directory fills up while
// State Hub brings work and the operator wakes agents: wakes are refused
// with storage_error saying the disk is full, observation waits, the engine
// keeps running; when space returns every task is woken and done, each with
// one trigger and one lease, every receipt reaches State Hub exactly once,
// and the database passes the integrity check.
func TestChaosEngineDiskFull(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	repos := []string{"alpha", "beta"}
	e := testutil.NewEnv(t)
	disk := e.SmallDisk(t, e.EngineState())
	l := newLoopIn(t, e, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), repos...)
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", repos...)
	engineDB := filepath.Join(e.EngineState(), "coordination.sqlite3")
	logPath := filepath.Join(e.EngineState(), "coordination-engine.log")

	h.Put(enginetest.Workplan("W0", "alpha", enginetest.Todo("A0", "alpha")))
	testutil.WaitFor(t, "A0 done", func() bool { return h.Task("A0").Status == "done" })
	l.waitPublished(t, h)
	pid := enginePID(t, l)
	logFrom := fileSize(logPath)

	filled := time.Now()
	disk.Fill(t, pid)
	// Work arrives while the disk is full: tasks in State Hub, and the
	// operator's wakes. A wake may still fit now and then (SQLite reuses
	// its WAL after a checkpoint); one that does is a lease like any other.
	h.Put(enginetest.Workplan("W1", "alpha", enginetest.Todo("A1", "alpha"), enginetest.Todo("B1", "beta", "A1")))
	var leases []string
	wake := func() testutil.Result {
		r := e.Run(t, "coordination-engine", "wake", "beta", "--json")
		if r.Status == 0 {
			var res struct {
				Lease *struct {
					LeaseID string `json:"lease_id"`
				} `json:"lease"`
			}
			if err := json.Unmarshal([]byte(r.Stdout), &res); err == nil && res.Lease != nil {
				leases = append(leases, res.Lease.LeaseID)
			}
		}
		return r
	}
	var refused testutil.Result
	testutil.WaitFor(t, "a wake refused", func() bool { refused = wake(); return refused.Status != 0 })
	firstRefusal := time.Since(filled)
	var said struct {
		Error struct{ Code, Message, Hint string } `json:"error"`
	}
	json.Unmarshal([]byte(refused.Stderr), &said)
	if refused.Status != errs.ExitStatus(errs.Storage) || said.Error.Code != string(errs.Storage) || !strings.HasPrefix(said.Error.Message, disk.Says()) {
		t.Errorf("wake on a full disk: %s\nwant exit %d and %q first", refused, errs.ExitStatus(errs.Storage), disk.Says())
	}
	// Some looks at State Hub fail too while the disk stays full.
	polls := l.Status(t).StateHub.Polls
	testutil.WaitFor(t, "two more looks at State Hub", func() bool { return l.Status(t).StateHub.Polls >= polls+2 })
	if got := enginePID(t, l); got != pid {
		t.Fatalf("the engine was replaced while the disk was full (pid %d, was %d)", got, pid)
	}

	disk.Free(t)
	freed := time.Now()
	testutil.WaitFor(t, "a wake accepted again", func() bool { return wake().Status == 0 })
	recovered := time.Since(freed)
	for _, id := range []string{"A1", "B1"} {
		testutil.WaitFor(t, id+" done", func() bool {
			if time.Since(freed) > 20*time.Second {
				t.Fatalf("%s not done: %+v\nlog:\n%s", id, l.Explain(t, id), testutil.ReadFrom(t, logPath, logFrom))
			}
			return h.Task(id).Status == "done"
		})
	}
	for _, id := range leases {
		testutil.WaitFor(t, "the wake "+id+" completed", func() bool { return l.lease(t, id).State == "completed" })
	}
	l.waitPublished(t, h)
	testutil.IntegrityCheck(t, engineDB)
	if got := enginePID(t, l); got != pid {
		t.Errorf("the engine was replaced (pid %d, was %d)", got, pid)
	}

	db, err := sql.Open("sqlite", "file:"+engineDB+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range []string{"A0", "A1", "B1"} {
		var triggers, leases int
		if err := db.QueryRow(`SELECT count(DISTINCT t.id), count(l.lease_id) FROM triggers t LEFT JOIN leases l ON l.trigger_id = t.id
			WHERE t.task_id = ?`, id).Scan(&triggers, &leases); err != nil {
			t.Fatal(err)
		}
		if triggers != 1 || leases != 1 {
			t.Errorf("task %s: %d triggers, %d leases; want one of each", id, triggers, leases)
		}
	}
	logged := testutil.ReadFrom(t, logPath, logFrom)
	lines := strings.Count(logged, "\n")
	if lines > 60 {
		t.Errorf("%d log lines while the disk was full and after:\n%s", lines, logged)
	}
	t.Logf("engine disk full (%s): first wake refused %s after the fill; error: %q; a wake accepted again %s after space returned; "+
		"%d wakes accepted while full; tasks done with one trigger and lease each, receipts published once; %d log lines; integrity_check ok",
		disk.Method, firstRefusal.Round(time.Millisecond), said.Error.Message+" (hint: "+said.Error.Hint+")", recovered.Round(time.Millisecond),
		len(leases)-1, lines)
}

func enginePID(t *testing.T, l *loop) int {
	t.Helper()
	var ping daemon.PingResult
	if err := json.Unmarshal([]byte(l.Env.Engine(t, "ping", "--json").Stdout), &ping); err != nil {
		t.Fatal(err)
	}
	return ping.PID
}
