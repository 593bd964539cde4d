package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// hub is the reference State Hub, served in the test on a port of its own
// that survives going down and coming back. Token, when set, is required;
// it can change while the hub runs.
type hub struct {
	t     testing.TB
	srv   *devhub.Server
	addr  string
	token atomic.Pointer[string]
	// authorized counts requests that carried the right token.
	authorized atomic.Int64
	// noEvents makes the hub answer 404 to its event stream, as a server
	// without one does.
	noEvents atomic.Bool

	mu   sync.Mutex
	http *http.Server
}

func startHub(t testing.TB, token string) *hub {
	t.Helper()
	h := &hub{t: t, srv: &devhub.Server{}}
	h.token.Store(&token)
	if err := h.srv.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.serve(ln)
	t.Cleanup(h.down)
	return h
}

func (h *hub) url() string { return "http://" + h.addr }

func (h *hub) serve(ln net.Listener) {
	inner := h.srv.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want := *h.token.Load(); want != "" {
			if r.Header.Get("Authorization") != "Bearer "+want {
				http.Error(w, `{"error":"a bearer token is required"}`, http.StatusUnauthorized)
				return
			}
			h.authorized.Add(1)
		}
		if h.noEvents.Load() && r.URL.Path == "/v1/events" {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	h.mu.Lock()
	h.http = srv
	h.mu.Unlock()
	go srv.Serve(ln)
}

// down stops the hub: connections refused, event streams cut.
func (h *hub) down() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.http != nil {
		h.http.Close()
		h.http = nil
	}
}

// up serves again on the same address.
func (h *hub) up() {
	h.t.Helper()
	var ln net.Listener
	testutil.WaitFor(h.t, "the hub's port to be free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", h.addr)
		return err == nil
	})
	h.serve(ln)
}

// do sends one request as a State Hub user would (with the token).
func (h *hub) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, h.url()+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if tok := *h.token.Load(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (h *hub) put(wp contract.Workplan) {
	h.t.Helper()
	if status, b := h.do(http.MethodPut, "/v1/workplans/"+wp.ID, wp); status != http.StatusOK {
		h.t.Fatalf("put workplan %s: %d %s", wp.ID, status, b)
	}
}

func (h *hub) patch(task string, fields map[string]any) {
	h.t.Helper()
	if status, b := h.do(http.MethodPatch, "/v1/tasks/"+task, fields); status != http.StatusOK {
		h.t.Fatalf("patch task %s: %d %s", task, status, b)
	}
}

func (h *hub) task(id string) contract.Task {
	h.t.Helper()
	_, b := h.do(http.MethodGet, "/v1/workplans", nil)
	var res struct{ Workplans []contract.Workplan }
	if err := json.Unmarshal(b, &res); err != nil {
		h.t.Fatalf("workplans: %v", err)
	}
	for _, wp := range res.Workplans {
		for _, t := range wp.Tasks {
			if t.ID == id {
				return t
			}
		}
	}
	h.t.Fatalf("no task %s", id)
	return contract.Task{}
}

// progress is what State Hub received: the receipts, and their raw text.
func (h *hub) progress() ([]contract.Receipt, string) {
	h.t.Helper()
	_, b := h.do(http.MethodGet, "/v1/progress", nil)
	var res struct{ Receipts []contract.Receipt }
	if err := json.Unmarshal(b, &res); err != nil {
		h.t.Fatalf("progress: %v\n%s", err, b)
	}
	return res.Receipts, string(b)
}

// hubConfig is an engine configuration observing h every interval seconds,
// with more [coordination] keys.
func hubConfig(h *hub, interval int, coordination string, more ...string) string {
	return fmt.Sprintf("[statehub]\napi_base = %q\n%s\n[coordination]\nstatehub_poll_interval_seconds = %d\n%s",
		h.url(), strings.Join(more, "\n"), interval, coordination)
}

func workplan(id, repo string, tasks ...contract.Task) contract.Workplan {
	return contract.Workplan{ID: id, Repo: repo, Status: "active", Tasks: tasks}
}

func todo(id, repo string, deps ...string) contract.Task {
	return contract.Task{ID: id, Title: "task " + id, Status: "todo", Repo: repo, DependsOn: deps}
}

// agents opens the repos' windows, each running the scripted agent with
// plan, and waits until tamq has handed them to the engine.
func (l *loop) agents(t testing.TB, plan string, repos ...string) {
	t.Helper()
	for _, repo := range repos {
		l.openAgent(t, repo, plan)
	}
	for _, repo := range repos {
		l.waitAttached(t, repo, 1)
	}
}

func (l *loop) explain(t testing.TB, task string) api.ExplainResult {
	t.Helper()
	res, err := client.New(l.pathsOf(t, paths.Engine)).Explain(context.Background(), task)
	if errs.Is(err, errs.NotFound) {
		// A task put into State Hub after the engine's last look is not
		// found until its next one: the callers poll (testutil.WaitFor),
		// so it is a result that says nothing of it yet.
		return api.ExplainResult{Task: task}
	}
	if err != nil {
		t.Fatalf("explain %s: %v", task, err)
	}
	return res
}

// waitPublished waits until the engine has published every receipt, and
// checks State Hub holds each of them exactly once.
func (l *loop) waitPublished(t testing.TB, h *hub) []contract.Receipt {
	t.Helper()
	testutil.WaitFor(t, "every receipt published", func() bool { return l.status(t).StateHub.UnpublishedReceipts == 0 })
	// The engine goes on while this looks: what it had marked published
	// before State Hub is read must be there, and what State Hub holds must
	// be marked by the time it has been read.
	before := l.markedPublished(t)
	rs, _ := h.progress()
	after := l.markedPublished(t)
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

// markedPublished reads the ids of the receipts the engine's database says
// State Hub has.
func (l *loop) markedPublished(t testing.TB) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(l.e.EngineState(), "coordination.sqlite3")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var instance string
	if err := db.QueryRow(`SELECT value FROM observer_state WHERE key = 'instance'`).Scan(&instance); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT id FROM receipts WHERE projected_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	marked := map[string]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		marked[fmt.Sprintf("coordination-engine:%s:%d", instance, id)] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return marked
}

// The loop of spec section 1 across two repos: A's completion (State Hub
// says done) makes B, in another workplan and repo, actionable; B is woken
// only after that. Each is one trigger however often it is observed, and
// every receipt reaches State Hub once.
func TestStateHubDependencyChainAcrossRepos(t *testing.T) {
	t.Parallel()
	h := startHub(t, "")
	l := newLoop(t, hubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "net-kingdom", "railiance")
	l.agentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "net-kingdom", "railiance")
	h.put(workplan("W-rail", "railiance", todo("B", "railiance", "A")))
	h.put(workplan("W-net", "net-kingdom", todo("A", "net-kingdom")))
	testutil.WaitFor(t, "B done in State Hub", func() bool { return h.task("B").Status == "done" })

	log := l.agentLog()
	doneA, wakeB := strings.Index(log, "statehub A done\n"), strings.Index(log, "task=B")
	if doneA < 0 || wakeB < 0 || wakeB < doneA || !strings.Contains(log, "statehub A -> 0") {
		t.Fatalf("B was not woken after A was done:\n%s", log)
	}
	if n := strings.Count(log, "task=A"); n != 1 {
		t.Errorf("A woken %d times:\n%s", n, log)
	}
	testutil.WaitFor(t, "B's lease to complete", func() bool {
		v := l.explain(t, "B").Verdict
		return strings.Contains(v, "completed")
	})
	a, b := l.explain(t, "A"), l.explain(t, "B")
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
	text := l.e.Engine(t, "explain", "B").Stdout
	if !strings.Contains(text, "depends on A: done (net-kingdom)") || !strings.Contains(text, "completed") {
		t.Errorf("explain B:\n%s", text)
	}
	if dot := l.e.Engine(t, "explain", "B", "--format", "dot").Stdout; !strings.Contains(dot, `"A" -> "B"`) {
		t.Errorf("explain B --format dot:\n%s", dot)
	}
}

// Every gate of the contract stops its task with a receipt naming the gate,
// no lease and nothing in tamq for the repo; a secret-looking token in a
// title is found before anything of it is stored, and appears nowhere.
func TestStateHubGatesStopWithoutWaking(t *testing.T) {
	t.Parallel()
	h := startHub(t, "")
	l := newLoop(t, hubConfig(h, 1, ""), "net-kingdom", "moved")
	l.agents(t, "complete", "net-kingdom", "moved")
	// gita now registers "moved" elsewhere: its window is not the repo's.
	elsewhere := filepath.Join(l.e.Root, "src", "moved-elsewhere")
	if b, err := exec.Command("git", "init", "-q", elsewhere).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, b)
	}
	registry := filepath.Join(l.e.Config, "gita", "repos.csv")
	rows := testutil.GitaRow(filepath.Join(l.e.Root, "src", "net-kingdom"), "net-kingdom") + testutil.GitaRow(elsewhere, "moved")
	if err := os.WriteFile(registry, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	canary := "ghp_" + "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2" // a GitHub token's shape (random enough: gitleaks passes over "ghp_xxxx…")
	tasks := []contract.Task{todo("H", "net-kingdom"), todo("R", "net-kingdom"), todo("S", "net-kingdom"),
		todo("D", "net-kingdom"), todo("C", "net-kingdom"), todo("U", "ghost"), todo("M", "moved")}
	tasks[0].NeedsHuman = true
	tasks[1].InterventionNotes = []contract.Note{{ID: "n1", Text: "look first", RequestsReview: true, CreatedAt: time.Now().UTC()}}
	tasks[2].SecretsRequired = true
	tasks[3].ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "drop the old tables"}}
	tasks[4].Title = "rotate " + canary + " today"
	h.put(workplan("W", "net-kingdom", tasks...))
	want := map[string]string{"H": "human", "R": "human", "S": "secret", "D": "destructive", "C": "secret", "U": "unregistered", "M": "identity"}
	for id, gate := range want {
		testutil.WaitFor(t, id+" stopped", func() bool {
			x := l.explain(t, id)
			return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped"
		})
		x := l.explain(t, id)
		tr := x.Triggers[0]
		if tr.GateReason != gate || len(tr.Leases) != 0 || !strings.HasPrefix(tr.Why, gate) || !strings.Contains(x.Verdict, "stopped at gate "+gate) {
			t.Errorf("%s: gate %q (%q), %d leases, verdict %q; want gate %s", id, tr.GateReason, tr.Why, len(tr.Leases), x.Verdict, gate)
		}
	}
	if history := l.e.Tamq(t, "history", "--json").Stdout; strings.TrimSpace(history) != "[]" {
		t.Errorf("tamq has messages although every task was gated:\n%s", history)
	}
	if log := l.agentLog(); strings.Contains(log, "wake ") {
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
	l.e.Tamq(t, "export", filepath.Join(l.e.Root, "export.jsonl"))
	l.noCanaries(t, h, "net-kingdom", canary)
}

// With safety_gated_max_attempts, a gated task is checked again on the
// backoff schedule and stops once the checks are used up; a new revision
// supersedes the gated trigger and, with the gate gone, is woken.
func TestStateHubGatedRetriesAndSupersession(t *testing.T) {
	t.Parallel()
	h := startHub(t, "")
	cfg := hubConfig(h, 1, "safety_gated_max_attempts = 2\nretry_backoff_seconds = [1, 1]\nwake_ack_timeout_seconds = 30\n",
		"[policy]\nprofile = \"retrying\"\n[policy.profiles.retrying]\n"+
			"allow = [\"statehub_read\", \"repo_inspect\", \"repo_edit\", \"local_checks\", \"state_updates\", \"coordination_messages\", \"tmux_wake\", \"transient_retry\"]\n"+
			"require_human = [\"secrets\", \"destructive\"]\nsafety_gated_max_attempts = 2\n")
	l := newLoop(t, cfg, "net-kingdom")
	l.agentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "net-kingdom")
	g, k := todo("G", "net-kingdom"), todo("K", "net-kingdom")
	g.NeedsHuman = true
	k.ProposedActions = []contract.ProposedAction{{Category: "destructive"}}
	h.put(workplan("W", "net-kingdom", g, k))
	testutil.WaitFor(t, "K's checks used up", func() bool {
		x := l.explain(t, "K")
		return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped"
	})
	if tr := l.explain(t, "K").Triggers[0]; tr.GateReason != "destructive" || tr.GateChecks != 2 {
		t.Errorf("K: %+v", tr)
	}
	testutil.WaitFor(t, "G held", func() bool {
		x := l.explain(t, "G")
		return len(x.Triggers) >= 1 && x.Triggers[0].State != "pending"
	})
	h.patch("G", map[string]any{"needs_human": false})
	testutil.WaitFor(t, "G done", func() bool { return h.task("G").Status == "done" })
	x := l.explain(t, "G")
	if len(x.Triggers) != 2 || x.Triggers[1].State == "pending" || len(x.Triggers[1].Leases) != 1 {
		t.Fatalf("G's triggers: %+v", x.Triggers)
	}
	if first := x.Triggers[0]; first.State != "superseded" && first.State != "stopped" {
		t.Errorf("G's first trigger is %s, want superseded (or stopped, had its checks run out first)", first.State)
	}
	if strings.Count(l.agentLog(), "task=K") != 0 {
		t.Errorf("K was woken:\n%s", l.agentLog())
	}
}
