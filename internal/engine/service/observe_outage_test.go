package service_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// State Hub goes away: the observer backs off (one warning, not one per
// try), the engine's local work goes on, receipts wait; when State Hub is
// back the observer resumes, the same task is still one trigger, and the
// outbox drains exactly once.
func TestStateHubDownThenBack(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "net-kingdom")
	l.agents(t, "complete", "net-kingdom")
	h.Put(enginetest.Workplan("W", "net-kingdom", enginetest.Todo("A", "net-kingdom")))
	testutil.WaitFor(t, "A woken", func() bool { return strings.Contains(l.AgentLog(), "task=A") })
	// The repo's agent takes one lease at a time: A's ends first.
	testutil.WaitFor(t, "A's lease to complete", func() bool {
		x := l.Explain(t, "A")
		return len(x.Triggers) == 1 && len(x.Triggers[0].Leases) == 1 && x.Triggers[0].Leases[0].State == "completed"
	})
	l.waitPublished(t, h)
	h.Down()
	testutil.WaitFor(t, "the observer to notice", func() bool { return l.Status(t).StateHub.ObserveError != "" })
	// Local work goes on: an operator's wake is leased and delivered,
	// its receipts wait for State Hub.
	res := l.Wake(t, "net-kingdom")
	if res.Lease == nil {
		t.Fatalf("wake while State Hub is down: %+v", res)
	}
	testutil.WaitFor(t, "the manual wake completed", func() bool { return l.lease(t, res.Lease.LeaseID).State == "completed" })
	if n := l.Status(t).StateHub.UnpublishedReceipts; n == 0 {
		t.Error("no receipts wait while State Hub is down")
	}
	before := l.Status(t).StateHub.Polls
	h.Up()
	testutil.WaitFor(t, "the observer to resume", func() bool {
		s := l.Status(t).StateHub
		return s.ObserveError == "" && s.Polls > before
	})
	l.waitPublished(t, h)
	if x := l.Explain(t, "A"); len(x.Triggers) != 1 {
		t.Errorf("A has %d triggers after the outage", len(x.Triggers))
	}
	logText, _ := os.ReadFile(filepath.Join(l.Env.EngineState(), "coordination-engine.log"))
	if n := strings.Count(string(logText), "State Hub is not reachable"); n != 1 {
		t.Errorf("the outage was logged %d times at warning level", n)
	}
}

// The credential command's token is sent and kept nowhere; when State Hub
// refuses it, observation pauses with a clear status and receipts wait,
// until the command gives a token State Hub accepts.
func TestStateHubCredentialsAndRefusal(t *testing.T) {
	t.Parallel()
	token := "tok-" + strings.Repeat("k3", 10)
	h := enginetest.StartHub(t, token)
	e := testutil.NewEnv(t) // only for a place to keep the credential script
	script := filepath.Join(e.Root, "credential.sh")
	writeScript := func(tok string) {
		if err := os.WriteFile(script+".new", []byte("#!/bin/sh\necho "+tok+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(script+".new", script); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(token)
	l := newLoop(t, enginetest.HubConfig(h, 1, "", fmt.Sprintf("credential_command = [%q]\n", script)), "net-kingdom")
	testutil.WaitFor(t, "an authorized look", func() bool { return l.Status(t).StateHub.Polls > 0 })
	if h.Authorized.Load() == 0 {
		t.Fatal("no request carried the token")
	}
	l.waitPublished(t, h)
	// State Hub now wants another token; the command still prints the old.
	newToken := "tok-" + strings.Repeat("q9", 10)
	h.Token.Store(&newToken)
	testutil.WaitFor(t, "observation paused", func() bool { return l.Status(t).StateHub.Paused })
	st := l.Env.Run(t, "coordination-engine", "status").Stdout // not healthy: no tamq here
	if !strings.Contains(st, "PAUSED: State Hub refused the credentials") {
		t.Errorf("status does not say observation is paused:\n%s", st)
	}
	l.Wake(t, "net-kingdom") // receipts: stopped at unavailable (no window), waiting
	if n := l.Status(t).StateHub.UnpublishedReceipts; n == 0 {
		t.Error("no receipts wait while State Hub refuses the credentials")
	}
	writeScript(newToken)
	testutil.WaitFor(t, "observation resumed", func() bool { return !l.Status(t).StateHub.Paused })
	l.waitPublished(t, h)
	l.Env.Run(t, "coordination-engine", "stop")
	for _, tok := range []string{token, newToken} {
		err := filepath.WalkDir(l.Env.Root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), tok) {
				t.Errorf("the token is in %s", path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// With State Hub's event stream, a change wakes the agent at once, far
// inside the (long) poll interval.
func TestStateHubEventsWakeAtOnce(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 3600, "wake_ack_timeout_seconds = 30\n"), "net-kingdom")
	l.agents(t, "complete", "net-kingdom")
	testutil.WaitFor(t, "the event stream", func() bool { return l.Status(t).StateHub.EventsConnected })
	h.Put(enginetest.Workplan("W", "net-kingdom", enginetest.Todo("E", "net-kingdom")))
	// WaitFor's 30 s is far less than the hour between polls: only an
	// event can have brought the change.
	testutil.WaitFor(t, "E woken", func() bool { return strings.Contains(l.AgentLog(), "task=E") })
	// An unread message that requests action wakes its repo; the prompt
	// names it, and the body stays in State Hub.
	msg := contract.Message{ID: "m-1", ToRepo: "net-kingdom", From: "railiance", Subject: "rebase onto main", RequestsAction: true}
	if status, b := h.Do(http.MethodPost, "/v1/messages", msg); status != http.StatusOK {
		t.Fatalf("post message: %d %s", status, b)
	}
	testutil.WaitFor(t, "the message's wake", func() bool { return strings.Count(l.AgentLog(), "run lease release") == 2 })
	history := l.Env.Tamq(t, "history", "--json", "--body").Stdout
	if !strings.Contains(history, `Message m-1 from railiance: \"rebase onto main\". Read it with: coordination-engine message show m-1; once it is handled: coordination-engine message read m-1`) {
		t.Errorf("no prompt for the message in tamq's history:\n%s", history)
	}
}

// Checkpoints agents post to State Hub: one on a live lease is recorded on
// it (once, however often observed); one whose lease ended without a
// release (its attempts ran out) resumes the work of its open task when it
// names a next action, with its text in the prompt, and stops at its gate
// when blocked. A checkpoint counts only for a lease the engine issued, to
// the repo and task it names: a made-up lease, another repo or another
// task wakes nothing and is recorded nowhere.
func TestStateHubCheckpoints(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	// One attempt per lease, acknowledged within 2 s: a wake nobody takes
	// ends unreleased at once.
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 2\nlease_renew_interval_seconds = 60\nmax_attempts = 0\n"), "net-kingdom", "railiance")
	l.agents(t, "ackstall stall stall complete", "net-kingdom")
	// Z and Y are open (in progress) but not actionable as tasks: only a
	// checkpoint (or the operator) wakes them.
	z, y := enginetest.Todo("Z", "net-kingdom"), enginetest.Todo("Y", "net-kingdom")
	z.Status, y.Status = "in_progress", "in_progress"
	h.Put(enginetest.Workplan("W", "net-kingdom", enginetest.Todo("A", "net-kingdom"), z, y))
	leaseOf := func(task, state string) string {
		var id string
		testutil.WaitFor(t, task+"'s lease "+state, func() bool {
			x := l.Explain(t, task)
			if len(x.Triggers) == 0 || len(x.Triggers[len(x.Triggers)-1].Leases) != 1 {
				return false
			}
			ls := x.Triggers[len(x.Triggers)-1].Leases[0]
			id = ls.LeaseID
			return ls.State == state
		})
		return id
	}
	leaseID := leaseOf("A", "checkpointed")
	// State Hub names each checkpoint posted (c1, c2, ...).
	post := func(cp contract.Checkpoint) string {
		t.Helper()
		status, b := h.Do(http.MethodPost, "/v1/checkpoints", cp)
		if err := json.Unmarshal(b, &cp); status != http.StatusOK || err != nil {
			t.Fatalf("post checkpoint: %d %s", status, b)
		}
		return cp.ID
	}
	// Forged ones first: on A's live lease for another repo or task, and on
	// a lease nobody issued.
	forged := []string{
		post(contract.Checkpoint{Repo: "railiance", LeaseID: leaseID, TaskID: "A", Summary: "FORGED-1", NextAction: "x"}),
		post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: leaseID, TaskID: "Z", Summary: "FORGED-2", NextAction: "x"}),
		post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: "made-up", TaskID: "Z", Summary: "FORGED-3", NextAction: "x"}),
	}
	// A flood of them (40 posts with made-up leases) makes no lease either.
	for i := range 40 {
		forged = append(forged, post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: fmt.Sprintf("flood-%d", i), TaskID: "Y",
			Summary: "FORGED-FLOOD", NextAction: "x"}))
	}
	first := post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: leaseID, TaskID: "A", Summary: "posted to State Hub", NextAction: "finish"})
	recorded := func(id string) int {
		n := 0
		for _, r := range l.receipts(t, leaseID) {
			if r.Kind == "checkpoint.recorded" && r.Detail["statehub_checkpoint_id"] == id {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, "the State Hub checkpoint on the lease", func() bool { return recorded(first) == 1 })
	for _, id := range forged {
		if n := recorded(id); n != 0 {
			t.Errorf("forged checkpoint %s recorded on lease %s", id, leaseID)
		}
	}
	for _, task := range []string{"Z", "Y"} {
		if x := l.Explain(t, task); len(x.Triggers) != 0 {
			t.Errorf("a forged checkpoint woke %s: %+v", task, x.Triggers)
		}
	}
	// The repo's agent takes one lease at a time: A's ends first. Then Z
	// and Y are woken by hand, and their agent never takes the wakes.
	l.Env.Engine(t, "lease", "release", leaseID, "--result", "completed")
	l.Env.Engine(t, "wake", "net-kingdom", "--task", "Z")
	zLease := leaseOf("Z", "stopped")
	l.Env.Engine(t, "wake", "net-kingdom", "--task", "Y")
	yLease := leaseOf("Y", "stopped")
	resume := post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: zLease, TaskID: "Z", Summary: "half done", NextAction: "the rest"})
	post(contract.Checkpoint{Repo: "net-kingdom", LeaseID: yLease, TaskID: "Y", Summary: "stuck", BlockedReason: "human"})
	testutil.WaitFor(t, "Z resumed", func() bool { return strings.Count(l.AgentLog(), "task=Z") == 2 })
	zx := l.Explain(t, "Z")
	if len(zx.Triggers) != 2 || zx.Triggers[1].Source != "checkpoint" || zx.Triggers[1].Reason != "checkpoint_resume" || zx.Triggers[1].SourceID != resume {
		t.Errorf("Z: %+v", zx.Triggers)
	}
	// The prompt carries the checkpoint it resumes from, never a forged one.
	history := l.Env.Tamq(t, "history", "--json", "--body").Stdout
	if !strings.Contains(history, `): half done\nNext action you recorded: the rest`) {
		t.Errorf("the resume prompt lacks the checkpoint's text:\n%s", history)
	}
	if strings.Contains(history, "FORGED") {
		t.Errorf("a forged checkpoint reached a prompt:\n%s", history)
	}
	testutil.WaitFor(t, "Y stopped at its gate", func() bool {
		y := l.Explain(t, "Y")
		return len(y.Triggers) == 2 && y.Triggers[1].State == "stopped"
	})
	if y := l.Explain(t, "Y").Triggers[1]; y.GateReason != "human" || len(y.Leases) != 0 {
		t.Errorf("Y: %+v", y)
	}
	if n := recorded(first); n != 1 {
		t.Errorf("the State Hub checkpoint was recorded %d times", n)
	}
}

// State Hub goes away while both daemons run: the engine's loop cannot
// work, so status is unhealthy (exit 8, unavailable), and tasks, top and
// the tmux line say since when and how old their standings are. When State
// Hub is back, all of it clears.
func TestStateHubDownMarksOldStandings(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, ""), "net-kingdom")
	l.agents(t, "complete", "net-kingdom") // tamq runs: status is healthy but for State Hub
	q := enginetest.Todo("Q", "net-kingdom")
	q.NeedsHuman = true
	h.Put(enginetest.Workplan("W", "net-kingdom", q))
	testutil.WaitFor(t, "Q to need you", func() bool { return l.Status(t).Tasks["needs_you"] == 1 })
	if r := l.Env.Run(t, "coordination-engine", "status"); r.Status != 0 {
		t.Fatalf("status with State Hub up: %s", r)
	}
	if r := l.Env.Tamq(t, "status", "--tmux-line"); r.Stdout != "1 need you\n" {
		t.Fatalf("tmux line with State Hub up: %q", r.Stdout)
	}
	stale := regexp.MustCompile(`State Hub unreachable since \d\d:\d\d:\d\d; standings as of \d\d:\d\d:\d\d`)

	h.Down()
	testutil.WaitFor(t, "the observer to notice", func() bool { return l.Status(t).StateHub.ObserveError != "" })
	if r := l.Env.Run(t, "coordination-engine", "status"); r.Status != 8 || !strings.Contains(r.Stdout, "NOT healthy") || !stale.MatchString(r.Stderr) {
		t.Errorf("status with State Hub down: %s", r)
	}
	if r := l.Env.Run(t, "coordination-engine", "status", "--json"); r.Status != 8 || !strings.Contains(r.Stdout, `"unreachable_since"`) {
		t.Errorf("status --json with State Hub down: %s", r)
	}
	tasks := l.Env.Engine(t, "tasks").Stdout
	if first, _, _ := strings.Cut(tasks, "\n"); !stale.MatchString(first) || !strings.Contains(tasks, "Q") {
		t.Errorf("tasks with State Hub down:\n%s", tasks)
	}
	var res struct {
		Since *time.Time `json:"statehub_unreachable_since"`
		At    *time.Time `json:"observed_at"`
	}
	if err := json.Unmarshal([]byte(l.Env.Engine(t, "tasks", "--json").Stdout), &res); err != nil || res.Since == nil || res.At == nil || res.Since.Before(*res.At) {
		t.Errorf("tasks --json with State Hub down: %+v, %v", res, err)
	}
	if top := l.Env.Tamq(t, "top", "--once").Stdout; !stale.MatchString(top) {
		t.Errorf("top with State Hub down:\n%s", top)
	}
	if r := l.Env.Tamq(t, "status", "--tmux-line"); r.Stdout != "State Hub down · 1 need you\n" {
		t.Errorf("tmux line with State Hub down: %q", r.Stdout)
	}

	h.Up()
	testutil.WaitFor(t, "status healthy again", func() bool { return l.Env.Run(t, "coordination-engine", "status").Status == 0 })
	if tasks := l.Env.Engine(t, "tasks").Stdout; stale.MatchString(tasks) {
		t.Errorf("tasks with State Hub back:\n%s", tasks)
	}
	if r := l.Env.Tamq(t, "status", "--tmux-line"); r.Stdout != "1 need you\n" {
		t.Errorf("tmux line with State Hub back: %q", r.Stdout)
	}
}
