// Package enginetest is what the engine's tests that run the real programs
// share: a Loop (the engine, tamq, gita and a private tmux server as
// processes, with scripted agents in windows) and a Hub (the reference State
// Hub served in the test), for the engine's tests (internal/engine/service)
// and the cluster tests (clustertest/engine), which live in a module of their
// own and so cannot see a test file of package service_test.
package enginetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the driver MarkedPublished opens the engine's database with

	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Loop is one test's world: a private tmux server, gita, tamq and the engine
// (real processes), and the scripted agent's log.
type Loop struct {
	Env  *testutil.Env
	Tmux *testutil.Tmux
	// LogFile is the file the scripted agents log to (AgentLog reads it).
	LogFile string
	// AgentEnv is more environment for the scripted agents ("K=V ...").
	AgentEnv string
}

const tamqConfig = "[delivery]\nenter_pause_ms = 20\n"

// NewLoop starts the engine with engineConfig, registers repos in gita and
// starts a private tmux server; OpenAgent opens the windows.
func NewLoop(t testing.TB, engineConfig string, repos ...string) *Loop {
	t.Helper()
	return NewLoopIn(t, testutil.NewEnv(t), engineConfig, repos...)
}

// NewLoopIn is NewLoop in e, which the test may have prepared (a state
// directory on a small disk).
func NewLoopIn(t testing.TB, e *testutil.Env, engineConfig string, repos ...string) *Loop {
	t.Helper()
	e.WriteConfig(t, tamqConfig)
	if !strings.Contains(engineConfig, "[statehub]") {
		// No State Hub: a closed port, never another test's hub.
		engineConfig = "[statehub]\napi_base = \"http://127.0.0.1:9\"\n\n" + engineConfig
	}
	e.WriteEngineConfig(t, engineConfig)
	e.Gita(t, repos...)
	tm := testutil.NewTmux(t)
	l := &Loop{Env: e, Tmux: tm, LogFile: filepath.Join(e.Root, "agent.log")}
	t.Cleanup(func() {
		e.Run(t, "tamq", "stop")
		e.Run(t, "coordination-engine", "stop")
	})
	e.Engine(t, "start", "--detach")
	return l
}

// OpenAgent opens repo's window running the scripted agent with plan.
func (l *Loop) OpenAgent(t testing.TB, repo, plan string, extra ...string) {
	t.Helper()
	agent := "env SCRIPTED_AGENT_PLAN='" + plan + "' SCRIPTED_AGENT_LOG='" + l.LogFile + "' " + l.AgentEnv + " " + filepath.Join(l.Env.Bin, "scriptedagent")
	if len(extra) == 0 {
		extra = []string{"--mode", "trigger"}
	}
	args := append([]string{"open", "--tmux-socket", l.Tmux.Name, "--command", agent}, extra...)
	l.Env.Tamq(t, append(args, repo)...)
	testutil.WaitFor(t, "the agent of "+repo, func() bool { return strings.Contains(l.AgentLog(), "ready") })
}

// AgentLog is what the scripted agents have logged so far.
func (l *Loop) AgentLog() string {
	b, _ := os.ReadFile(l.LogFile)
	return string(b)
}

// EngineLog is the last 40 lines of the engine's log that say any of words.
func (l *Loop) EngineLog(words ...string) string {
	b, _ := os.ReadFile(filepath.Join(l.Env.EngineState(), "coordination-engine.log"))
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// Status is the engine's status report, asked in this process: tests poll
// it, and a process per poll would cost more than what is tested.
func (l *Loop) Status(t testing.TB) api.StatusReport {
	t.Helper()
	s, err := client.New(l.PathsOf(t, paths.Engine)).Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return s
}

// WaitAttached waits until the engine has n attached endpoints hosting repo,
// each with its agent running as tamq says.
func (l *Loop) WaitAttached(t testing.TB, repo string, n int) {
	t.Helper()
	testutil.WaitFor(t, "tamq to attach "+repo, func() bool {
		hosting := 0
		for _, ep := range l.Status(t).Endpoints {
			for _, w := range ep.Windows {
				if ep.State == "attached" && w.Repo == repo && (w.AgentRunning == nil || *w.AgentRunning) {
					hosting++
				}
			}
		}
		return hosting == n
	})
}

// Wake runs `coordination-engine wake --json` with args and returns its result.
func (l *Loop) Wake(t testing.TB, args ...string) api.WakeResult {
	t.Helper()
	r := l.Env.Engine(t, append([]string{"wake", "--json"}, args...)...)
	var res api.WakeResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("wake --json: %v\n%s", err, r)
	}
	return res
}

// PathsOf is where program keeps its files in this loop.
func (l *Loop) PathsOf(t testing.TB, program paths.Program) paths.Paths {
	return l.Env.Paths(t, program)
}

// Explain is the engine's explanation of task, asked in this process.
func (l *Loop) Explain(t testing.TB, task string) api.ExplainResult {
	t.Helper()
	res, err := client.New(l.PathsOf(t, paths.Engine)).Explain(context.Background(), task)
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

// MarkedPublished reads the ids of the receipts the engine's database says
// State Hub has.
func (l *Loop) MarkedPublished(t testing.TB) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(l.Env.EngineState(), "coordination.sqlite3")+"?mode=ro")
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
