package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/proc"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	tamqclient "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// load is steady traffic for a campaign: 8 senders sending to the repos'
// windows, half in acknowledged mode (acknowledged as soon as they wait),
// and what the service accepted.
type load struct {
	repos    []string
	accepted sync.Map // body -> repo
	refused  atomic.Int64
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, e *testutil.Env, repos ...string) *load {
	client := &unixrpc.Client{Socket: e.Socket()}
	tamq := tamqclient.New(pathsOf(t, e))
	ctx, stop := context.WithCancel(context.Background())
	ld := &load{repos: repos, stop: stop}
	t.Cleanup(ld.halt)
	for s := range 8 {
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				repo, body := repos[n%len(repos)], fmt.Sprintf("chaos s%d-%05d", s, n)
				args := api.SendArgs{Text: "To:" + repo + ": " + body}
				if n%4 < 2 {
					args.AckMode = "acknowledged"
				}
				// Accepted means the service answered with the message; a
				// send cut off by a kill may or may not have committed, and
				// the sender, not knowing, sends something else.
				// Steady load (about 80 messages a second in all), not a
				// flood: what is measured is what a fault does to it. A
				// refused send is tried again sooner: the service is
				// restarting.
				pace := 100 * time.Millisecond
				if err := client.Call(ctx, api.OpSend, args, nil); err != nil {
					ld.refused.Add(1)
					pace = 20 * time.Millisecond
				} else {
					ld.accepted.Store(body, repo)
				}
				select {
				case <-ctx.Done():
				case <-time.After(pace):
				}
			}
		}()
	}
	// The agents acknowledge what waits for them.
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		for ctx.Err() == nil {
			for _, m := range history(t, e, "--state", "awaiting_ack") {
				tamq.Ack(ctx, m.ID)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return ld
}

// count is how many sends the service has accepted so far.
func (ld *load) count() int {
	n := 0
	ld.accepted.Range(func(any, any) bool { n++; return true })
	return n
}

func (ld *load) halt() {
	ld.stop()
	ld.wg.Wait()
}

// check stops the load, waits until no message waits for delivery any more,
// and checks every accepted message reached its window; it returns how many
// were accepted and how many deliveries were doubled.
func (ld *load) check(t *testing.T, e *testutil.Env) (accepted, doubled int) {
	t.Helper()
	ld.halt()
	var pending int
	if !testutil.Within(2*time.Minute, func() bool {
		if err := readerOf(t, e).QueryRow(`SELECT count(*) FROM messages WHERE state IN ('queued', 'delivering')`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	}) {
		t.Fatalf("%d messages still wait for delivery", pending)
	}
	// Injected means written to the terminal: the agent (the recorder) reads
	// what came last a moment later, longer on a loaded machine. A message is
	// lost only if it never shows.
	type unread struct{ repo, body string }
	var missing, twice []unread
	testutil.Within(30*time.Second, func() bool {
		missing, twice, accepted, doubled = nil, nil, 0, 0
		for _, repo := range ld.repos {
			got, _ := e.Recording(repo)
			ld.accepted.Range(func(k, v any) bool {
				body := k.(string)
				if v.(string) != repo {
					return true
				}
				accepted++
				// Bodies have a fixed width, so none is a prefix of another;
				// in a batch a body ends with a newline, not the Enter.
				switch c := strings.Count(got, ": "+body); {
				case c == 0:
					missing = append(missing, unread{repo, body})
				case c > 1:
					doubled += c - 1
					twice = append(twice, unread{repo, body})
				}
				return true
			})
		}
		return len(missing) == 0
	})
	for _, m := range missing {
		t.Errorf("%s never received %q; %s", m.repo, m.body, trail(t, e, m.body))
	}
	for i, m := range twice {
		if i == 3 {
			t.Logf("and %d more", len(twice)-i)
			break
		}
		t.Logf("%s received %q more than once; %s", m.repo, m.body, trail(t, e, m.body))
	}
	return accepted, doubled
}

// trail is what the database says became of the message with body: its
// state and every receipt, so a loss can be told from its history.
func trail(t *testing.T, e *testutil.Env, body string) string {
	t.Helper()
	db := readerOf(t, e)
	var id, state string
	var attempts int
	if err := db.QueryRow(`SELECT id, state, attempts FROM messages WHERE body LIKE '%' || ?`, body).Scan(&id, &state, &attempts); err != nil {
		return "not in the database: " + err.Error()
	}
	rows, err := db.Query(`SELECT at, COALESCE(status, ''), COALESCE(reason, ''), COALESCE(detail, '') FROM receipts WHERE subject_id = ? ORDER BY at, id`, id)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "message %s is %s after %d attempts:", id, state, attempts)
	for rows.Next() {
		var at int64
		var status, reason, detail string
		if err := rows.Scan(&at, &status, &reason, &detail); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "\n\t%s %s (%s) %s", time.UnixMilli(at).UTC().Format("15:04:05.000"), status, reason, detail)
	}
	// The service's log lines about it (ids and reasons, never bodies).
	if log, err := os.ReadFile(filepath.Join(e.TamqState(), "tamq.log")); err == nil {
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, id) {
				fmt.Fprintf(&b, "\n\tlog: %s", line)
			}
		}
	}
	return b.String()
}

// The service is killed (SIGKILL) at random moments under load (8 senders,
// two windows whose brokers relay, acknowledged and injected mode). After
// each kill the database passes the integrity check and the service starts
// again; at the end every message a sender had accepted was delivered, and
// none twice: the delivery being written at a kill is finished by its
// broker, which tells the next start what it wrote.
func TestChaosServiceKilledUnderLoad(t *testing.T) {
	t.Parallel()
	rounds := testutil.ChaosRounds(t, 3)
	rng := testutil.ChaosRand(t)
	repos := []string{"alpha", "beta"}
	e, _ := workspace(t, "[delivery]\nenter_pause_ms = 0\n", repos...)
	ld := startLoad(t, e, repos...)
	for range rounds {
		// A random moment: the pause is the campaign's schedule, not a wait
		// for something to happen.
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		pid := pingPID(t, e)
		syscall.Kill(pid, syscall.SIGKILL)
		lock := pathsOf(t, e).LockFile
		testutil.WaitFor(t, "the service to die", func() bool { return proc.Exited(pid) && testutil.LockFree(lock) })
		testutil.IntegrityCheck(t, e.Database())
		e.Tamq(t, "start", "--detach")
	}
	// Load after the last restart too: sends the new service accepted.
	before := ld.count()
	testutil.WaitFor(t, "load after the last restart", func() bool { return ld.count() >= before+20 })
	accepted, doubled := ld.check(t, e)
	if doubled > 0 {
		t.Errorf("%d messages doubled over %d kills of a service delivering to %d windows", doubled, rounds, len(repos))
	}
	testutil.IntegrityCheck(t, e.Database())
	t.Logf("%d kills: %d messages accepted, %d sends refused while the service was down, %d delivered twice",
		rounds, accepted, ld.refused.Load(), doubled)
}

// SIGTERM under load: the service exits within its grace period, delivers
// or keeps everything it accepted, and its next start finishes the work;
// nothing is delivered twice.
func TestChaosServiceStoppedUnderLoad(t *testing.T) {
	t.Parallel()
	repos := []string{"alpha", "beta"}
	e, _ := workspace(t, "[delivery]\nenter_pause_ms = 0\n[service]\nshutdown_grace_seconds = 5\n", repos...)
	ld := startLoad(t, e, repos...)
	testutil.WaitFor(t, "some load", func() bool { return ld.count() > 40 })
	pid := pingPID(t, e)
	began := time.Now()
	syscall.Kill(pid, syscall.SIGTERM)
	testutil.WaitFor(t, "the service to stop", func() bool { return proc.Exited(pid) })
	took := time.Since(began)
	// The grace period is a bound the service promises, not a speed.
	if took > 5*time.Second+time.Second {
		t.Errorf("the service took %s to stop; its grace period is 5s", took)
	}
	testutil.IntegrityCheck(t, e.Database())
	e.Tamq(t, "start", "--detach")
	accepted, doubled := ld.check(t, e)
	if doubled > 0 {
		t.Errorf("%d deliveries doubled across a clean stop", doubled)
	}
	t.Logf("SIGTERM under load: stopped in %s (grace 5s), %d messages accepted, none lost or doubled", took.Round(time.Millisecond), accepted)
}
