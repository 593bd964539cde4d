package service_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// One workplan whose tasks stand every way a person reads in `tasks`: a human
// gate, a secret, a destructive action proposed, a dependency, no window for
// a repo, a live lease, done, and a task whose title is hostile. The
// list puts what needs a person first, and --needs-you, --state, --repo,
// --tree and --json agree with it. (A retry, exhausted retries and a dialog
// are standings the unit tests of internal/engine/standing reach.)
func TestTasksSayWhatEachTaskWaitsFor(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\nlease_renew_interval_seconds = 300\n"), "alpha", "beta", "delta")
	l.agents(t, "ackstall", "alpha")

	human := enginetest.Todo("T-human", "beta")
	human.InterventionNotes = []contract.Note{{ID: "N-3", Text: "look first", RequestsReview: true}}
	secret := enginetest.Todo("T-secret", "beta")
	secret.SecretsRequired = true
	destructive := enginetest.Todo("T-destructive", "beta")
	destructive.ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "drop the table"}}
	done := enginetest.Todo("T-done", "beta")
	done.Status = "done"
	hostile := enginetest.Todo("T-hostile", "beta")
	hostile.Title = "\x1b]0;pwned\x07\x1b[2J title"
	hostile.NeedsHuman = true
	h.Put(enginetest.Workplan("W-1", "alpha",
		enginetest.Todo("T-work", "alpha"), enginetest.Todo("T-after", "beta", "T-work"), enginetest.Todo("T-nowin", "delta"),
		human, secret, destructive, done))
	h.Put(enginetest.Workplan("W-2", "beta", hostile))

	ec := client.New(l.PathsOf(t, paths.Engine))
	var res api.TasksResult
	testutil.WaitFor(t, "both workplans observed, T-work's lease acknowledged and T-nowin waiting for its window", func() bool {
		var err error
		res, err = ec.Tasks(context.Background(), api.TasksArgs{})
		return err == nil && len(res.Tasks) == 8 && enginetest.StandingOf(res, "T-hostile").Kind == "needs_you" &&
			enginetest.StandingOf(res, "T-work").Kind == "working" && enginetest.StandingOf(res, "T-work").AckedBy != "" &&
			enginetest.StandingOf(res, "T-nowin").Wait != ""
	})
	want := map[string]string{
		"T-human":       "needs you: human gate (note N-3 on the task requests review)",
		"T-secret":      "needs you: secret required",
		"T-destructive": "needs you: destructive action proposed",
		"T-after":       "waiting: dependency T-work (todo, alpha)",
		"T-nowin":       "waiting: no window for repo delta",
		"T-hostile":     "needs you: human gate (the task needs a human)",
		"T-done":        "done",
	}
	for id, words := range want {
		if got := enginetest.StandingOf(res, id).Words; got != words {
			t.Errorf("%s: %q, want %q", id, got, words)
		}
	}
	work := enginetest.StandingOf(res, "T-work")
	if !strings.HasPrefix(work.Words, "working: lease "+work.LeaseID+" attempt 1, acked by agent ") || work.RenewedAt == nil {
		t.Errorf("T-work: %+v", work)
	}
	// What needs a person comes first, done last.
	if first, last := res.Tasks[0], res.Tasks[len(res.Tasks)-1]; first.Kind != "needs_you" || last.ID != "T-done" {
		t.Errorf("order: first %s %s, last %s", first.ID, first.Kind, last.ID)
	}
	if res.Counts["needs_you"] != 4 || res.Counts["working"] != 1 || res.Counts["waiting"] != 2 || res.Counts["done"] != 1 {
		t.Errorf("counts: %v", res.Counts)
	}

	// The command: a header, a line each, hostile text inert.
	out := l.Env.Engine(t, "tasks").Stdout
	if !strings.HasPrefix(out, "TASK") || !strings.Contains(out, "needs you: secret required") || !textsafe.Inert(out) {
		t.Errorf("tasks:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(res.Tasks) {
		t.Errorf("tasks printed %d lines for %d tasks:\n%s", len(lines), len(res.Tasks), out)
	}
	needs := l.Env.Engine(t, "tasks", "--needs-you").Stdout
	if strings.Count(strings.TrimSpace(needs), "\n") != 4 || strings.Contains(needs, "T-work") {
		t.Errorf("tasks --needs-you:\n%s", needs)
	}
	if w := l.Env.Engine(t, "tasks", "--state", "waiting", "--repo", "delta").Stdout; !strings.Contains(w, "T-nowin") || strings.Contains(w, "T-after") {
		t.Errorf("tasks --state waiting --repo delta:\n%s", w)
	}
	tree := l.Env.Engine(t, "tasks", "--tree").Stdout
	if !strings.Contains(tree, "workplan W-1\n") || !strings.Contains(tree, "└─ T-after") || !textsafe.Inert(tree) {
		t.Errorf("tasks --tree:\n%s", tree)
	}
	var parsed api.TasksResult
	if err := json.Unmarshal([]byte(l.Env.Engine(t, "tasks", "--json").Stdout), &parsed); err != nil || len(parsed.Tasks) != len(res.Tasks) {
		t.Errorf("tasks --json: %v, %d tasks", err, len(parsed.Tasks))
	}
	if r := l.Env.Run(t, "coordination-engine", "tasks", "--state", "sleeping"); r.Status != 2 || !strings.Contains(r.Stderr, "needs_you") {
		t.Errorf("tasks --state sleeping: %s", r)
	}

	// Everywhere a person looks: tmux's status bar, status, doctor.
	if line := l.Env.Tamq(t, "status", "--tmux-line").Stdout; line != "4 need you · 1 working\n" {
		t.Errorf("tamq status --tmux-line: %q", line)
	}
	if st := l.Env.Run(t, "coordination-engine", "status").Stdout; !strings.Contains(st, "tasks:     4 need you, 1 working, 2 waiting, 1 done (") {
		t.Errorf("status:\n%s", st)
	}
	var doc struct {
		Checks []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(l.Env.Run(t, "coordination-engine", "doctor", "--json").Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range doc.Checks {
		if c.Name == "tasks" {
			found = c.Status == "warn" && strings.HasPrefix(c.Detail, "4 need you")
		}
	}
	if !found {
		t.Errorf("doctor's tasks check: %+v", doc.Checks)
	}
	topShowsTheLoop(t, l)

	// The engine stopped: the status bar shows nothing, without an error.
	l.Env.Engine(t, "stop")
	if r := l.Env.Run(t, "tamq", "status", "--tmux-line"); r.Status != 0 || r.Stdout != "" || r.Stderr != "" {
		t.Errorf("tamq status --tmux-line, engine stopped: %s", r)
	}
}

// topShowsTheLoop runs `tamq top` in a window of the agents' tmux server with
// a real client attached (a PTY), and drives it as a person does, with keys:
// the loop pane lists what needs the person, the live lease and what waits
// (not what is done), the arrows
// pick T-work, Enter switches the client to alpha's window, e explains the
// task and c shows its checkpoint.
func topShowsTheLoop(t *testing.T, l *loop) {
	t.Helper()
	argv := []string{"new-session", "-d", "-s", "watch", "-x", "150", "-y", "45", "env"}
	argv = append(argv, l.Env.Vars...)
	l.Tmux.Must(t, append(argv, filepath.Join(l.Env.Bin, "tamq"), "top", "--interval", "200ms")...)
	client := exec.Command("tmux", "-L", l.Tmux.Name, "attach", "-t", "watch")
	client.Env = append(os.Environ(), "TERM=xterm-256color")
	ptmx, err := pty.StartWithSize(client, &pty.Winsize{Rows: 45, Cols: 150})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ptmx.Close()
		client.Process.Kill()
		client.Wait()
	}()
	go io.Copy(io.Discard, ptmx) // the client's screen; the pane is read with capture-pane
	screen := func() string { return l.Tmux.Must(t, "capture-pane", "-p", "-t", "watch:0") }
	waitScreen := func(what string) string {
		t.Helper()
		var got string
		testutil.WaitFor(t, what+" in tamq top", func() bool { got = screen(); return strings.Contains(got, what) })
		return got
	}
	got := waitScreen("loop: 4 need you · 1 working")
	for _, want := range []string{"> T-destructive", "needs you: secret required", "T-work", "working: lease "} {
		if !strings.Contains(got, want) {
			t.Errorf("tamq top lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "waiting: dependency T-work") || strings.Contains(got, "T-done") {
		t.Errorf("the loop pane lacks the waiting work, or shows done work:\n%s", got)
	}
	for range 4 {
		l.Tmux.Must(t, "send-keys", "-t", "watch:0", "Down")
	}
	waitScreen("> T-work")

	// Enter: the client goes to alpha's window.
	var alpha string
	var st tamqapi.StatusReport
	if err := json.Unmarshal([]byte(l.Env.Run(t, "tamq", "status", "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		for _, w := range ep.Windows {
			if w.Repo == "alpha" {
				alpha = w.WindowID
			}
		}
	}
	l.Tmux.Must(t, "send-keys", "-t", "watch:0", "Enter")
	testutil.WaitFor(t, "the client in alpha's window", func() bool {
		return strings.TrimSpace(l.Tmux.Must(t, "list-clients", "-F", "#{window_id}")) == alpha
	})
	l.Tmux.Must(t, "switch-client", "-t", "watch")

	l.Tmux.Must(t, "send-keys", "-t", "watch:0", "e")
	waitScreen("explain T-work: woken (task_actionable): lease ")
	l.Tmux.Must(t, "send-keys", "-t", "watch:0", "Escape")
	testutil.WaitFor(t, "Esc to leave the explain", func() bool { return !strings.Contains(screen(), "(Esc goes back)") })
	l.Tmux.Must(t, "send-keys", "-t", "watch:0", "c")
	got = waitScreen("latest checkpoint of T-work")
	if !strings.Contains(got, "summary: half of the scripted work") || !strings.Contains(got, "next: the other half") {
		t.Errorf("the checkpoint:\n%s", got)
	}
	l.Tmux.Must(t, "send-keys", "-t", "watch:0", "q")
}

// The standings that take time to reach, with real agents of the scripted
// kind: an agent that asks for a permission holds its task at a dialog (the
// broker says so at its renewals), and an agent that fails every attempt
// puts its task into a retry, then out of retries.
func TestTasksNeedYouAtADialogAndAfterRetries(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, `wake_ack_timeout_seconds = 10
lease_renew_interval_seconds = 1
lease_missed_renewals = 2
max_attempts = 1
retry_backoff_seconds = [5]
`), "eta", "theta")
	l.OpenAgent(t, "theta", "fail fail")
	l.WaitAttached(t, "theta", 1)
	hold := l.openHeldAgent(t, "eta", "workask")
	defer os.Remove(hold)
	h.Put(enginetest.Workplan("W-1", "eta", enginetest.Todo("T-ask", "eta"), enginetest.Todo("T-fail", "theta")))

	ec := client.New(l.PathsOf(t, paths.Engine))
	standing := func(id string) api.TaskStanding {
		res, err := ec.Tasks(context.Background(), api.TasksArgs{})
		if err != nil {
			t.Fatalf("tasks: %v", err)
		}
		return enginetest.StandingOf(res, id)
	}
	var s api.TaskStanding
	testutil.WaitFor(t, "T-ask at its dialog", func() bool { s = standing("T-ask"); return s.Dialog != "" })
	if s.Kind != "needs_you" || s.Words != "needs you: dialog open in window "+s.Dialog+" (lease "+s.LeaseID+")" ||
		!strings.HasPrefix(s.Dialog, "eta: ") {
		t.Errorf("T-ask: %+v", s)
	}
	testutil.WaitFor(t, "T-fail waiting for its retry", func() bool { s = standing("T-fail"); return s.Kind == "retry" })
	if !strings.HasPrefix(s.Words, "retry at ") || s.RetryAt == nil || s.Attempt != 2 {
		t.Errorf("T-fail in its retry: %+v", s)
	}
	testutil.WaitFor(t, "T-fail out of retries", func() bool { s = standing("T-fail"); return s.Kind == "needs_you" })
	if s.Words != "needs you: retries exhausted (lease "+s.LeaseID+", 2 attempts): failed: scripted failure" {
		t.Errorf("T-fail out of retries: %+v", s)
	}
	if out := l.Env.Engine(t, "tasks", "--needs-you").Stdout; !strings.Contains(out, "T-ask") || !strings.Contains(out, "T-fail") {
		t.Errorf("tasks --needs-you:\n%s", out)
	}
}
