package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// agents opens the repos' windows, each running the scripted agent with
// plan, and waits until tamq has handed them to the engine.
func (l *loop) agents(t testing.TB, plan string, repos ...string) {
	t.Helper()
	for _, repo := range repos {
		l.OpenAgent(t, repo, plan)
	}
	for _, repo := range repos {
		l.WaitAttached(t, repo, 1)
	}
}

// waitPublished waits until the engine has published every receipt, and
// checks State Hub holds each of them exactly once.
func (l *loop) waitPublished(t testing.TB, h *enginetest.Hub) []contract.Receipt {
	t.Helper()
	testutil.WaitFor(t, "every receipt published", func() bool { return l.Status(t).StateHub.UnpublishedReceipts == 0 })
	// The engine goes on while this looks: what it had marked published
	// before State Hub is read must be there, and what State Hub holds must
	// be marked by the time it has been read.
	before := l.MarkedPublished(t)
	rs, _ := h.Progress()
	after := l.MarkedPublished(t)
	seen := map[string]bool{}
	var ours []contract.Receipt
	for _, r := range rs {
		if seen[r.ID] {
			t.Errorf("receipt %s published twice", r.ID)
		}
		seen[r.ID] = true
		if r.Source == "coordination-engine" {
			ours = append(ours, r)
			if !after[r.ID] {
				t.Errorf("receipt %s is at State Hub but not marked published", r.ID)
			}
		}
	}
	for id := range before {
		if !seen[id] {
			t.Errorf("receipt %s was marked published but is not at State Hub", id)
		}
	}
	return ours
}

// The loop of spec section 1 across two repos: A's completion (State Hub
// says done) makes B, in another workplan and repo, actionable; B is woken
// only after that. Each is one trigger however often it is observed, and
// every receipt reaches State Hub once.
func TestStateHubDependencyChainAcrossRepos(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "net-kingdom", "railiance")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "net-kingdom", "railiance")
	h.Put(enginetest.Workplan("W-rail", "railiance", enginetest.Todo("B", "railiance", "A")))
	h.Put(enginetest.Workplan("W-net", "net-kingdom", enginetest.Todo("A", "net-kingdom")))
	testutil.WaitFor(t, "B done in State Hub", func() bool { return h.Task("B").Status == "done" })

	log := l.AgentLog()
	doneA, wakeB := strings.Index(log, "statehub A done\n"), strings.Index(log, "task=B")
	if doneA < 0 || wakeB < 0 || wakeB < doneA || !strings.Contains(log, "statehub A -> 0") {
		t.Fatalf("B was not woken after A was done:\n%s", log)
	}
	if n := strings.Count(log, "task=A"); n != 1 {
		t.Errorf("A woken %d times:\n%s", n, log)
	}
	testutil.WaitFor(t, "B's lease to complete", func() bool {
		v := l.Explain(t, "B").Verdict
		return strings.Contains(v, "completed")
	})
	a, b := l.Explain(t, "A"), l.Explain(t, "B")
	if len(a.Triggers) != 1 || a.Triggers[0].Reason != "task_actionable" || len(a.Triggers[0].Leases) != 1 {
		t.Fatalf("A: %+v", a)
	}
	if w := a.Triggers[0].Leases[0].Wakes; len(w) != 1 || w[0].MessageID == "" || w[0].Status != "resumed" {
		t.Errorf("A's wakes: %+v", w)
	}
	if len(b.Triggers) != 1 || b.Triggers[0].Reason != "dependency_satisfied" || b.Triggers[0].WorkplanID != "W-rail" {
		t.Errorf("B's triggers: %+v", b.Triggers)
	}
	if len(b.Dependencies) != 1 || !b.Dependencies[0].Done || b.Dependencies[0].Repo != "net-kingdom" {
		t.Errorf("B's dependencies: %+v", b.Dependencies)
	}
	if len(a.Dependents) != 1 || a.Dependents[0].ID != "B" {
		t.Errorf("A's dependents: %+v", a.Dependents)
	}
	// The prompt named the task, its title and workplan.
	m := l.tamqMessage(t, b.Triggers[0].Leases[0].LocalLeaseID)
	if m.Body == nil || !strings.Contains(*m.Body, `Task B "task B" in workplan W-rail.`) {
		t.Errorf("B's prompt: %v", m.Body)
	}
	ours := l.waitPublished(t, h)
	for _, r := range ours {
		if r.PolicyProfile == "" || r.ConfigVersion == "" {
			t.Errorf("receipt %s without its profile or config version", r.ID)
		}
	}
	// explain's text and dot forms say the same.
	text := l.Env.Engine(t, "explain", "B").Stdout
	if !strings.Contains(text, "depends on A: done (net-kingdom)") || !strings.Contains(text, "completed") {
		t.Errorf("explain B:\n%s", text)
	}
	if dot := l.Env.Engine(t, "explain", "B", "--format", "dot").Stdout; !strings.Contains(dot, `"A" -> "B"`) {
		t.Errorf("explain B --format dot:\n%s", dot)
	}
}

// Every gate of the contract stops its task with a receipt naming the gate,
// no lease and nothing in tamq for the repo; a secret-looking token in a
// title is found before anything of it is stored, and appears nowhere.
func TestStateHubGatesStopWithoutWaking(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, ""), "net-kingdom", "moved")
	l.agents(t, "complete", "net-kingdom", "moved")
	// gita now registers "moved" elsewhere: its window is not the repo's.
	elsewhere := filepath.Join(l.Env.Root, "src", "moved-elsewhere")
	if b, err := exec.Command("git", "init", "-q", elsewhere).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, b)
	}
	registry := filepath.Join(l.Env.Config, "gita", "repos.csv")
	rows := testutil.GitaRow(filepath.Join(l.Env.Root, "src", "net-kingdom"), "net-kingdom") + testutil.GitaRow(elsewhere, "moved")
	if err := os.WriteFile(registry, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	canary := "ghp_" + "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2" // a GitHub token's shape (random enough: gitleaks passes over "ghp_xxxx…")
	tasks := []contract.Task{enginetest.Todo("H", "net-kingdom"), enginetest.Todo("R", "net-kingdom"), enginetest.Todo("S", "net-kingdom"),
		enginetest.Todo("D", "net-kingdom"), enginetest.Todo("C", "net-kingdom"), enginetest.Todo("U", "ghost"), enginetest.Todo("M", "moved")}
	tasks[0].NeedsHuman = true
	tasks[1].InterventionNotes = []contract.Note{{ID: "n1", Text: "look first", RequestsReview: true, CreatedAt: time.Now().UTC()}}
	tasks[2].SecretsRequired = true
	tasks[3].ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "drop the old tables"}}
	tasks[4].Title = "rotate " + canary + " today"
	h.Put(enginetest.Workplan("W", "net-kingdom", tasks...))
	want := map[string]string{"H": "human", "R": "human", "S": "secret", "D": "destructive", "C": "secret", "U": "unregistered", "M": "identity"}
	for id, gate := range want {
		testutil.WaitFor(t, id+" stopped", func() bool {
			x := l.Explain(t, id)
			return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped"
		})
		x := l.Explain(t, id)
		tr := x.Triggers[0]
		if tr.GateReason != gate || len(tr.Leases) != 0 || !strings.HasPrefix(tr.Why, gate) || !strings.Contains(x.Verdict, "stopped at gate "+gate) {
			t.Errorf("%s: gate %q (%q), %d leases, verdict %q; want gate %s", id, tr.GateReason, tr.Why, len(tr.Leases), x.Verdict, gate)
		}
	}
	if history := l.Env.Tamq(t, "history", "--json").Stdout; strings.TrimSpace(history) != "[]" {
		t.Errorf("tamq has messages although every task was gated:\n%s", history)
	}
	if log := l.AgentLog(); strings.Contains(log, "wake ") {
		t.Errorf("an agent was woken:\n%s", log)
	}
	ours := l.waitPublished(t, h)
	stopped := 0
	for _, r := range ours {
		if r.Kind == "trigger.stopped" {
			stopped++
		}
	}
	if stopped != len(want) {
		t.Errorf("%d trigger.stopped receipts at State Hub, want %d", stopped, len(want))
	}
	// The canary: in no database, log, receipt, export or terminal.
	l.Env.Tamq(t, "export", filepath.Join(l.Env.Root, "export.jsonl"))
	l.noCanaries(t, h, "net-kingdom", canary)
}

// With safety_gated_max_attempts, a gated task is checked again on the
// backoff schedule and stops once the checks are used up; a new revision
// supersedes the gated trigger and, with the gate gone, is woken.
func TestStateHubGatedRetriesAndSupersession(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	cfg := enginetest.HubConfig(h, 1, "safety_gated_max_attempts = 2\nretry_backoff_seconds = [1, 1]\nwake_ack_timeout_seconds = 30\n",
		"[policy]\nprofile = \"retrying\"\n[policy.profiles.retrying]\n"+
			"allow = [\"statehub_read\", \"repo_inspect\", \"repo_edit\", \"local_checks\", \"state_updates\", \"coordination_messages\", \"tmux_wake\", \"transient_retry\"]\n"+
			"require_human = [\"secrets\", \"destructive\"]\nsafety_gated_max_attempts = 2\n")
	l := newLoop(t, cfg, "net-kingdom")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "net-kingdom")
	g, k := enginetest.Todo("G", "net-kingdom"), enginetest.Todo("K", "net-kingdom")
	g.NeedsHuman = true
	k.ProposedActions = []contract.ProposedAction{{Category: "destructive"}}
	h.Put(enginetest.Workplan("W", "net-kingdom", g, k))
	testutil.WaitFor(t, "K's checks used up", func() bool {
		x := l.Explain(t, "K")
		return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped"
	})
	if tr := l.Explain(t, "K").Triggers[0]; tr.GateReason != "destructive" || tr.GateChecks != 2 {
		t.Errorf("K: %+v", tr)
	}
	testutil.WaitFor(t, "G held", func() bool {
		x := l.Explain(t, "G")
		return len(x.Triggers) >= 1 && x.Triggers[0].State != "pending"
	})
	h.Patch("G", map[string]any{"needs_human": false})
	testutil.WaitFor(t, "G done", func() bool { return h.Task("G").Status == "done" })
	x := l.Explain(t, "G")
	if len(x.Triggers) != 2 || x.Triggers[1].State == "pending" || len(x.Triggers[1].Leases) != 1 {
		t.Fatalf("G's triggers: %+v", x.Triggers)
	}
	if first := x.Triggers[0]; first.State != "superseded" && first.State != "stopped" {
		t.Errorf("G's first trigger is %s, want superseded (or stopped, had its checks run out first)", first.State)
	}
	if strings.Count(l.AgentLog(), "task=K") != 0 {
		t.Errorf("K was woken:\n%s", l.AgentLog())
	}
}
