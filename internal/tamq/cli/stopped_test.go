package cli_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The commands here run as the user runs them: the real binaries, a private
// tmux server, tamq's own database.

func TestMain(m *testing.M) {
	testutil.MoreParallel(4)
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// newWorkspace is an environment with repo alpha registered, no State Hub
// (a closed port, never another test's hub) and a private tmux server.
func newWorkspace(t *testing.T) (*testutil.Env, *testutil.Tmux) {
	t.Helper()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	e.Gita(t, "alpha")
	tm := testutil.NewTmux(t)
	t.Cleanup(func() { e.Run(t, "tamq", "stop") })
	return e, tm
}

// statusJSON runs tamq status --json and decodes it.
func statusJSON(t *testing.T, e *testutil.Env) (api.StatusReport, testutil.Result) {
	t.Helper()
	r := e.Run(t, "tamq", "status", "--json")
	var rep api.StatusReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	return rep, r
}

// After tamq stop, the window the service recorded is alive in tmux (its
// broker and shell live on): status says the service is not running (exit
// 8, as documented) and shows the window as recorded, alive, never GONE;
// a window closed since shows GONE.
func TestStatusAfterStopShowsRecordedWindowsAsTmuxHasThem(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	up, _ := statusJSON(t, e)
	if len(up.Endpoints) != 1 || len(up.Endpoints[0].Windows) != 1 || up.Endpoints[0].Recorded {
		t.Fatalf("endpoints while running: %+v", up.Endpoints)
	}
	win := up.Endpoints[0].Windows[0]
	e.Tamq(t, "stop")

	down, r := statusJSON(t, e)
	if r.Status != 8 || down.Service.Running || !strings.Contains(r.Stderr, "tamq is not running") {
		t.Errorf("status after stop: %s", r)
	}
	if len(down.Endpoints) != 1 || len(down.Endpoints[0].Windows) != 1 {
		t.Fatalf("endpoints after stop: %+v", down.Endpoints)
	}
	ep := down.Endpoints[0]
	if got := ep.Windows[0]; !ep.Recorded || !got.Alive || got.PaneID != win.PaneID || got.Broker {
		t.Errorf("recorded window after stop: recorded %v, %+v", ep.Recorded, got)
	}
	human := e.Run(t, "tamq", "status")
	flat := strings.Join(strings.Fields(human.Stdout), " ")
	for _, want := range []string{
		"service NOT RUNNING",
		"endpoints as the service last recorded them (it is not running)",
		"alpha: window " + win.WindowID + " pane " + win.PaneID + ", manual, (shell), alive",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("status lacks %q:\n%s", want, human.Stdout)
		}
	}
	if human.Status != 8 || strings.Contains(human.Stdout, ", GONE") {
		t.Errorf("status after stop: %s", human)
	}

	// Closed since: gone in tmux, so GONE.
	tm.Must(t, "kill-window", "-t", win.WindowID)
	down, _ = statusJSON(t, e)
	if len(down.Endpoints) != 1 || down.Endpoints[0].Windows[0].Alive {
		t.Errorf("a closed window shows alive: %+v", down.Endpoints)
	}
}
