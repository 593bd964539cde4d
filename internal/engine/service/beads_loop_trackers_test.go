//go:build trackers

package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// beadsPeople is beads as the people who use it have it: the real bd
// (TAMQ_TEST_BD, which `make test-trackers` builds) run in a HOME of
// theirs, and a shim the engine is configured to run instead, which
// notes each bd process it starts (its subcommand, one line each) before
// it execs the real one.
type beadsPeople struct {
	bd, home, shim, runs string
}

func newBeadsPeople(t *testing.T) *beadsPeople {
	t.Helper()
	bd := os.Getenv("TAMQ_TEST_BD")
	if bd == "" {
		t.Fatal("TAMQ_TEST_BD is unset: run `make test-trackers`, which builds the pinned bd (scripts/install-bd) and sets it")
	}
	dir := t.TempDir()
	p := &beadsPeople{bd: bd, home: filepath.Join(dir, "home"), shim: filepath.Join(dir, "bd"), runs: filepath.Join(dir, "bd-runs")}
	if err := os.Mkdir(p.home, 0o700); err != nil {
		t.Fatal(err)
	}
	shim := "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '" + p.runs + "'\nexec '" + bd + "' \"$@\"\n"
	if err := os.WriteFile(p.shim, []byte(shim), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// command is bd as a person runs it in repo. BD_DISABLE_METRICS: a test
// sends no usage reports to bd's authors.
func (p *beadsPeople) command(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(p.bd, args...)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.home, "BD_NON_INTERACTIVE=1", "BD_DISABLE_METRICS=1",
		"BEADS_DIR=" + filepath.Join(repo, ".beads")}
	return cmd
}

func (p *beadsPeople) run(t testing.TB, repo string, args ...string) []byte {
	t.Helper()
	out, err := p.command(repo, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bd %v in %s: %v\n%s%s", args, repo, err, out, stderr)
	}
	return out
}

// init makes a beads database in each repo, all at once: `bd init` takes
// some two seconds.
func (p *beadsPeople) init(t testing.TB, repos map[string]string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(repos))
	for name, path := range repos {
		wg.Go(func() {
			if out, err := p.command(path, "init", "--quiet", "--prefix", name, "--non-interactive").CombinedOutput(); err != nil {
				errs <- fmt.Errorf("bd init in %s: %v\n%s", path, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// create makes an issue in repo's database and returns bd's id of it.
func (p *beadsPeople) create(t testing.TB, repo, title string, more ...string) string {
	t.Helper()
	var made struct {
		ID string `json:"id"`
	}
	out := p.run(t, repo, append([]string{"create", title, "--json"}, more...)...)
	if err := json.Unmarshal(out, &made); err != nil || made.ID == "" {
		t.Fatalf("bd create printed no issue (%v):\n%s", err, out)
	}
	return made.ID
}

// issue is one issue as `bd list --json` prints it.
type beadsIssue struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	CloseReason string `json:"close_reason"`
}

func (p *beadsPeople) issue(t testing.TB, repo, id string) beadsIssue {
	t.Helper()
	var list []beadsIssue
	out := p.run(t, repo, "list", "--json", "--all", "--limit", "0")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("bd list: %v\n%s", err, out)
	}
	for _, is := range list {
		if is.ID == id {
			return is
		}
	}
	t.Fatalf("bd list in %s has no %s:\n%s", repo, id, out)
	return beadsIssue{}
}

// engineRuns are the bd processes the engine started, by subcommand.
func (p *beadsPeople) engineRuns() []string {
	b, _ := os.ReadFile(p.runs)
	return strings.Fields(string(b))
}

// The loop driven from beads, end to end with real tmux, both daemons,
// scripted agents and the real bd: alpha and beta each keep a beads
// database; B (in beta) waits for A (in alpha) through bd's link to
// another repo's issue. A's repo is woken, its agent reads A and sets it
// done through the engine, which closes it in bd; beta is woken for B
// only then. H, labelled human, wakes nobody and explain names the gate.
// Once nothing changes, the engine's looks start no bd process: a look
// at an unchanged database is a stat of its files.
func TestBeadsDriveTheLoop(t *testing.T) {
	t.Parallel()
	people := newBeadsPeople(t)
	e := testutil.NewEnv(t)
	repos := e.Gita(t, "alpha", "beta")
	people.init(t, repos)
	alpha, beta := repos["alpha"], repos["beta"]
	// Made before the engine starts, so that no look sees B without its
	// link: every issue in a watched database is a task, and B alone
	// would be woken.
	a := people.create(t, alpha, "A", "-p", "1", "-d", "Do A first.\nThen say so.")
	b := people.create(t, beta, "B", "-p", "1")
	people.run(t, beta, "dep", "add", b, "external:alpha:"+a)
	idA, idB := beads.TaskID("alpha", a), beads.TaskID("beta", b)

	cfg := fmt.Sprintf("[statehub]\nkind = \"beads\"\n\n[statehub.beads]\ncommand = %q\n\n"+
		"[coordination]\nstatehub_poll_interval_seconds = 1\nwake_ack_timeout_seconds = 30\n", people.shim)
	l := newLoopIn(t, e, cfg)
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"

	// Before any window: B waits for A, found in the other database.
	testutil.WaitFor(t, "the first look", func() bool { return l.Explain(t, idB).Observed })
	if x := l.Explain(t, idB); x.Actionable || len(x.Dependencies) != 1 || x.Dependencies[0].ID != idA ||
		!x.Dependencies[0].Found || x.Dependencies[0].Done {
		t.Fatalf("B does not wait for %s: actionable %v, dependencies %+v (%s)", idA, x.Actionable, x.Dependencies, x.Waiting)
	}

	l.agents(t, "complete", "alpha", "beta")
	// The label comes with the issue (one bd command): an H first made
	// without it would be an ungated task until labelled, and could be
	// woken in between.
	h := people.create(t, alpha, "H", "-p", "0", "--labels", "human")
	idH := beads.TaskID("alpha", h)
	testutil.WaitFor(t, "H to stop at its gate", func() bool { return l.Explain(t, idH).Gate == "human" })

	// The engine's view is waited on, not bd's: a bd list per poll would
	// cost a third of a CPU-second each and contend for the databases'
	// locks with the engine's own bd.
	testutil.WaitFor(t, "the engine to see A done", func() bool { return l.Explain(t, idA).Status == "done" })
	if is := people.issue(t, alpha, a); is.Status != "closed" {
		t.Fatalf("A is %q in bd, not closed", is.Status)
	}
	testutil.WaitFor(t, "the engine to see B done", func() bool { return l.Explain(t, idB).Status == "done" })
	if is := people.issue(t, beta, b); is.Status != "closed" {
		t.Fatalf("B is %q in bd, not closed", is.Status)
	}
	log := l.AgentLog()
	doneA, wakeB := strings.Index(log, "statehub "+idA+" done\n"), strings.Index(log, "task="+idB)
	if doneA < 0 || wakeB < doneA || strings.Count(log, "task="+idA) != 1 || strings.Count(log, "task="+idB) != 1 {
		t.Fatalf("A then B, once each, not so:\n%s", log)
	}
	if !strings.Contains(log, "taskshow "+idA+" -> 0") || !strings.Contains(log, "statehub "+idA+" -> 0") {
		t.Errorf("A's agent did not read and close its task through the engine:\n%s", log)
	}
	if x := l.Explain(t, idH); x.Gate != "human" || len(x.Triggers) == 0 || x.URL != "" {
		t.Errorf("explain %s: gate %q, %d triggers, url %q", idH, x.Gate, len(x.Triggers), x.URL)
	}
	if out := e.Engine(t, "explain", idH).Stdout; !strings.Contains(out, "needs a human") {
		t.Errorf("coordination-engine explain %s does not say it needs a human:\n%s", idH, out)
	}
	st := l.Status(t).StateHub
	if st.Kind != "beads" || len(st.Watched) != 2 || st.Receipts != "local" || st.ObserveError != "" {
		t.Errorf("status: %+v", st)
	}

	// Settled: B's agent has released its lease, and the engine has read
	// B's close. From here nothing changes, and the looks that follow must
	// start no bd. Status's probe of bd (`bd version`) is this test's
	// doing, not a look's; the looks are counted by the time of the last
	// one, which explain tells without a probe.
	testutil.WaitFor(t, "B's lease to complete", func() bool {
		for _, tr := range l.Explain(t, idB).Triggers {
			for _, ls := range tr.Leases {
				if ls.State == string(lease.Completed) {
					return true
				}
			}
		}
		return false
	})
	// The engine may learn of B's close from its own write before a look
	// reads it from bd: the look that reads it is still to come. Two looks
	// after the lease completed mean one began after it, and read all.
	settled := map[time.Time]bool{}
	testutil.WaitFor(t, "two looks after B's lease completed", func() bool {
		if at := l.Explain(t, idH).ObservedAt; at != nil {
			settled[*at] = true
		}
		return len(settled) >= 3
	})
	before := people.engineRuns()
	polls := l.Status(t).StateHub.Polls
	looks := map[time.Time]bool{}
	testutil.WaitFor(t, "three more looks", func() bool {
		if at := l.Explain(t, idH).ObservedAt; at != nil {
			looks[*at] = true
		}
		return len(looks) >= 4
	})
	st = l.Status(t).StateHub
	if st.Polls < polls+3 {
		t.Errorf("%d looks while waiting for three", st.Polls-polls)
	}
	after := people.engineRuns()
	for _, r := range after[len(before):] {
		if r != "version" {
			t.Errorf("unchanged looks started bd: %v", after[len(before):])
			break
		}
	}
	// What status counts is what the engine ran (the probe before the
	// count included).
	if st.Requests != int64(len(after)) {
		t.Errorf("status counts %d bd processes; the engine started %d", st.Requests, len(after))
	}
	if log := l.AgentLog(); strings.Contains(log, "task="+idH) {
		t.Errorf("H woke an agent:\n%s", log)
	}
	t.Logf("the engine's bd processes: %d (%s)", len(after), summarize(after))
}

// summarize counts the subcommands of runs.
func summarize(runs []string) string {
	n := map[string]int{}
	var order []string
	for _, r := range runs {
		if n[r] == 0 {
			order = append(order, r)
		}
		n[r]++
	}
	var parts []string
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%s %d", r, n[r]))
	}
	return strings.Join(parts, ", ")
}
