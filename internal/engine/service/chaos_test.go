package service_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// coordination-engine is killed (SIGKILL) at random moments while State Hub
// keeps bringing work: a chain of three tasks across three repos per round,
// observed, leased, woken, released and published while the engine dies
// and comes back. After each kill its database passes the integrity check;
// at the end every task is done, each with one trigger and one lease (a
// retried wake is an attempt of it, never a second lease), and every
// receipt reached State Hub exactly once.
func TestChaosEngineKilledDuringTheLoop(t *testing.T) {
	t.Parallel()
	rounds := testutil.ChaosRounds(t, 3)
	rng := testutil.ChaosRand(t)
	h := enginetest.StartHub(t, "")
	repos := []string{"alpha", "beta", "gamma"}
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 5\nlease_renew_interval_seconds = 1\nlease_missed_renewals = 2\n"+
		"retry_backoff_seconds = [1]\nmax_attempts = 9\n"), repos...)
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", repos...)
	engineDB := filepath.Join(l.Env.EngineState(), "coordination.sqlite3")

	var tasks []string
	for round := range rounds {
		var chain []contract.Task
		for i, repo := range repos {
			id := fmt.Sprintf("R%03d-%s", round, repo)
			var deps []string
			if i > 0 {
				deps = []string{chain[i-1].ID}
			}
			chain = append(chain, enginetest.Todo(id, repo, deps...))
			tasks = append(tasks, id)
		}
		h.Put(enginetest.Workplan(fmt.Sprintf("W%03d", round), repos[0], chain...))
		// A random moment: the pause is the campaign's schedule.
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		var ping daemon.PingResult
		if err := json.Unmarshal([]byte(l.Env.Engine(t, "ping", "--json").Stdout), &ping); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(ping.PID, syscall.SIGKILL)
		lock := l.Env.Paths(t, paths.Engine).LockFile
		testutil.WaitFor(t, "the engine to die", func() bool { return proc.Exited(ping.PID) && testutil.LockFree(lock) })
		testutil.IntegrityCheck(t, engineDB)
		l.Env.Engine(t, "start", "--detach")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range tasks {
		if !testutil.Within(time.Until(deadline), func() bool { return h.Task(id).Status == "done" }) {
			log := l.AgentLog()
			t.Fatalf("task %s is not done: %+v\nthe agents' log ends:\n%s\ntamq:\n%s\nthe engine's starts, attaches and gates:\n%s", id, l.Explain(t, id),
				log[max(0, len(log)-3000):], l.Env.Tamq(t, "history", "--limit", "15").Stdout, l.EngineLog("started", "attached", "gate"))
		}
	}
	testutil.WaitFor(t, "no lease live", func() bool {
		c := l.Status(t).Leases.Counts
		return c["offered"]+c["acknowledged"]+c["running"]+c["checkpointed"]+c["retry_wait"] == 0
	})
	l.waitPublished(t, h)

	db, err := sql.Open("sqlite", "file:"+engineDB+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	attempts, retried := 0, 0
	for _, id := range tasks {
		var triggers, leases, completed, maxAttempt int
		err := db.QueryRow(`SELECT count(DISTINCT t.id), count(l.lease_id), count(CASE WHEN l.state = 'completed' THEN 1 END), COALESCE(max(l.attempt), 0)
			FROM triggers t LEFT JOIN leases l ON l.trigger_id = t.id WHERE t.task_id = ?`, id).Scan(&triggers, &leases, &completed, &maxAttempt)
		if err != nil {
			t.Fatal(err)
		}
		if triggers != 1 || leases != 1 {
			t.Errorf("task %s: %d triggers, %d leases; want one of each", id, triggers, leases)
		}
		attempts += maxAttempt
		if maxAttempt > 1 {
			retried++
		}
	}
	var doubleLive int
	if err := db.QueryRow(`SELECT count(*) FROM (SELECT trigger_id FROM leases WHERE state NOT IN ('completed', 'stopped')
		GROUP BY trigger_id HAVING count(*) > 1)`).Scan(&doubleLive); err != nil || doubleLive != 0 {
		t.Errorf("%d triggers with two live leases (%v)", doubleLive, err)
	}
	t.Logf("%d kills: %d tasks done, one lease each, %d attempts in all (%d tasks woken again after a kill); every receipt published once",
		rounds, len(tasks), attempts, retried)
}
