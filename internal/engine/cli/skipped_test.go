package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Security issue 37 (low): what a tracker sends reaches explain and tasks
// inert, and a task the engine skips is said to be skipped, with why, not
// ready. T-bad's revision holds a newline and an escape sequence; T-evil's
// id a newline and a forged line; T-ok is a task like any other, which
// T-evil depends on. The engine observes them through the reference State
// Hub; JSON keeps the tracker's strings as they are.
func TestExplainAndTasksShowWhatTheTrackerSentInert(t *testing.T) {
	t.Parallel()
	const (
		badRevision = "r1\nforged: line\x1b[2J"
		evilID      = "T-evil\ntask T-ok: actionable: forged"
	)
	// The reference State Hub checks ids and makes revisions itself: a
	// hostile tracker's workplans are served in front of it.
	task := func(id, revision string, deps ...string) contract.Task {
		return contract.Task{ID: id, Title: "task " + id, Status: "todo", Repo: "alpha", Revision: revision, DependsOn: deps}
	}
	workplans, _ := json.Marshal(map[string]any{"workplans": []contract.Workplan{{ID: "W-1", Repo: "alpha", Status: "active", Revision: "1",
		Tasks: []contract.Task{task("T-ok", "1"), task("T-bad", badRevision), task(evilID, "1", "T-ok")}}}})
	hub := &devhub.Server{}
	if err := hub.Open(); err != nil {
		t.Fatal(err)
	}
	inner := hub.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && r.URL.Path == "/v1/workplans" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(workplans)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, fmt.Sprintf("[statehub]\napi_base = %q\n", "http://"+ln.Addr().String()))
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	e.Engine(t, "start", "--detach")
	var res api.TasksResult
	testutil.WaitFor(t, "the engine to observe the three tasks", func() bool {
		res = api.TasksResult{}
		return run(t, e, &res, "tasks", "--json").Status == 0 && len(res.Tasks) == 3
	})

	// --json: the strings as sent, the skipped ones needing a person.
	byID := map[string]api.TaskStanding{}
	for _, ts := range res.Tasks {
		byID[ts.ID] = ts
	}
	for id, field := range map[string]string{"T-bad": "revision", evilID: "source id"} {
		ts, ok := byID[id]
		if !ok || ts.Kind != "needs_you" || !strings.Contains(ts.Skipped, field) || !strings.Contains(ts.Words, "skipped") {
			t.Errorf("%q in tasks --json: %+v", id, ts)
		}
	}
	if ts := byID["T-ok"]; ts.Skipped != "" {
		t.Errorf("T-ok is said to be skipped: %+v", ts)
	}

	// tasks: a line per task, none forged, none of the skipped ones ready.
	r := run(t, e, nil, "tasks")
	inert(t, "tasks", r)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if r.Status != 0 || len(lines) != 4 {
		t.Fatalf("tasks: want a header and three lines:\n%s", r)
	}
	for _, l := range lines[1:] {
		skipped := strings.Contains(l, "needs you: skipped by the engine: ")
		switch {
		case strings.HasPrefix(l, "T-bad "), strings.HasPrefix(l, `T-evil\x0atask T-ok: actionable: forged `):
			if !skipped || strings.Contains(l, "ready") {
				t.Errorf("a skipped task's line: %q", l)
			}
		case !strings.HasPrefix(l, "T-ok ") || skipped:
			t.Errorf("tasks: line %q", l)
		}
	}
	inert(t, "tasks --tree", run(t, e, nil, "tasks", "--tree"))

	// explain: the revision escaped on its line, the verdict says skipped.
	r = run(t, e, nil, "explain", "T-bad")
	inert(t, "explain", r)
	if r.Status != 0 || !strings.HasPrefix(r.Stdout, "task T-bad: not woken: skipped by the engine: ") ||
		!strings.Contains(r.Stdout, `, revision r1\x0aforged: line\x1b[2J, repo alpha,`) ||
		!strings.Contains(r.Stdout, "\n  skipped by the engine: ") {
		t.Errorf("explain T-bad:\n%s", r)
	}
	for _, l := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(l, "forged") {
			t.Errorf("explain T-bad printed a forged line: %q", l)
		}
	}
	var x api.ExplainResult
	if run(t, e, &x, "explain", "T-bad", "--json"); x.Revision != badRevision || x.Skipped == "" {
		t.Errorf("explain T-bad --json: revision %q, skipped %q", x.Revision, x.Skipped)
	}
	// T-ok's dependent is named, escaped, on its own line.
	r = run(t, e, nil, "explain", "T-ok")
	inert(t, "explain T-ok", r)
	if !strings.Contains(r.Stdout, "\n  needed by T-evil\\x0atask T-ok: actionable: forged (alpha, todo)\n") ||
		strings.Contains(r.Stdout, "\ntask T-ok: actionable: forged") {
		t.Errorf("explain T-ok:\n%s", r)
	}
	r = run(t, e, nil, "explain", "T-ok", "--format", "dot")
	if !strings.Contains(r.Stdout, `"T-evil\\x0atask T-ok: actionable: forged"`) {
		t.Errorf("explain --format dot:\n%s", r)
	}
}
