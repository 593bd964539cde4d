package service_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// windowLines lists the windows of tamq's session as "name dead", sorted:
// what a person sees of them, marked for a repo or not.
func windowLines(t *testing.T, tm *testutil.Tmux) []string {
	t.Helper()
	out, err := tm.Cmd("list-windows", "-t", "=tamq:", "-F", "#{window_name} #{pane_dead}")
	if err != nil {
		return nil // the server is gone
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(lines)
	return lines
}

// endedWindow is a window as `tamq status --json` shows it, with how its
// agent ended (read from the JSON, so that this test builds on a tamq
// that never said it).
type endedWindow struct {
	Repo       string `json:"repo"`
	Alive      bool   `json:"alive"`
	Ended      string `json:"ended"`
	ExitStatus *int   `json:"exit_status"`
}

// connectedWindow is repo's window on a connected endpoint, as status
// shows it; the zero window when there is none.
func connectedWindow(t *testing.T, e *testutil.Env, repo string) endedWindow {
	t.Helper()
	var st struct {
		Endpoints []struct {
			State   string        `json:"state"`
			Windows []endedWindow `json:"windows"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(e.Run(t, "tamq", "status", "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		for _, w := range ep.Windows {
			if w.Repo == repo && ep.State == "connected" {
				return w
			}
		}
	}
	return endedWindow{}
}

// waitEnded waits until status says how repo's window's agent ended
// (status -1: with no exit status).
func waitEnded(t *testing.T, e *testutil.Env, repo, ended string, status int) endedWindow {
	t.Helper()
	var w endedWindow
	testutil.WaitFor(t, repo+"'s window to be recorded "+ended, func() bool {
		w = connectedWindow(t, e, repo)
		return w.Ended == ended && (status < 0 && w.ExitStatus == nil || w.ExitStatus != nil && *w.ExitStatus == status)
	})
	return w
}

// Issue 39: `tamq start` ran an agent command that had exited again, in a
// new window each time (a test script's To: line went out five times), and
// brought back an agent the user had quit. Now a start reopens only the
// windows whose agent was running: one whose agent exited (while the
// service ran or while it was down) or that a person closed stays ended,
// on the same tmux server and after a reboot; no window is added, none is
// run again, nothing is routed twice. `tamq open` runs a command again in
// its dead window, not in a new one.
func TestStartNeverRevivesWhatEnded(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "runs")
	e.Gita(t, "script", "quit", "closed")
	// A script that says one thing and exits.
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", `printf 'To:runs: from the script\n\n'; exit 0`, "script")
	// An agent a person quits (here, once the service is down).
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", `read line; exit 4`, "quit")
	// An agent whose window a person closes.
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exec sleep 600", "closed")
	testutil.WaitFor(t, "the script's message", func() bool { got, _ := bodiesTo(t, e, "runs"); return len(got) == 1 })
	tm.Must(t, "kill-window", "-t", "=tamq:closed")
	wantWindows := []string{"quit 0", "runs 0", "script 1"}
	testutil.WaitFor(t, "the script to exit and closed's window to close", func() bool {
		return slices.Equal(windowLines(t, tm), wantWindows)
	})

	// The agent is quit while the service is down; the service then starts.
	e.Tamq(t, "stop")
	tm.Must(t, "send-keys", "-t", "=tamq:quit", "q", "Enter")
	testutil.WaitFor(t, "quit's agent to exit", func() bool {
		return slices.Contains(windowLines(t, tm), "quit 1")
	})
	started := e.Tamq(t, "start", "--detach", "--tmux-socket", tm.Name).Stdout
	for range 4 {
		// The service runs: a restore alone, which says the same.
		again := e.Tamq(t, "start", "--tmux-socket", tm.Name).Stdout
		for _, out := range []string{started, again} {
			// Start names what it left as it was, and how to run it again.
			for _, repo := range []string{"quit", "script", "closed"} {
				if !strings.Contains(out, "left as it was: the window of "+repo+": ") {
					t.Errorf("start does not name %s's window:\n%s", repo, out)
				}
			}
			if !strings.Contains(out, "`tamq open --command CMD ") || strings.Contains(out, "the window of runs") {
				t.Errorf("start's note of the windows left:\n%s", out)
			}
		}
	}
	if got := windowLines(t, tm); !slices.Equal(got, []string{"quit 1", "runs 0", "script 1"}) {
		t.Errorf("windows after five starts: %q", got)
	}
	if got, _ := bodiesTo(t, e, "runs"); len(got) != 1 {
		t.Errorf("the script's line was routed %d times: %q", len(got), got)
	}
	if w := waitEnded(t, e, "quit", "exited", 4); w.Alive {
		t.Errorf("quit's window: %+v", w)
	}
	waitEnded(t, e, "script", "exited", 0)
	human := e.Run(t, "tamq", "status").Stdout
	for _, want := range []string{"agent EXITED with status 4", "agent EXITED with status 0"} {
		if !strings.Contains(human, want) {
			t.Errorf("status does not say %q:\n%s", want, human)
		}
	}

	// A reboot: the tmux server is gone. Only the agents that ran come back,
	// among them one whose window the shutdown's SIGTERM ended a moment
	// before its tmux server.
	e.Gita(t, "term")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exec sleep 600", "term")
	pid, err := strconv.Atoi(tm.Must(t, "display", "-p", "-t", "=tamq:term", "#{pane_pid}"))
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	waitEnded(t, e, "term", "exited", 128+int(syscall.SIGTERM))
	e.Tamq(t, "stop")
	tm.Cmd("kill-server")
	e.Tamq(t, "start", "--detach", "--tmux-socket", tm.Name)
	testutil.WaitFor(t, "runs' window to be back", func() bool { _, w := windowStatus(t, e, "runs"); return w.Alive })
	if got := windowLines(t, tm); !slices.Equal(got, []string{"runs 0", "term 0"}) {
		t.Errorf("windows after a reboot: %q", got)
	}
	e.Tamq(t, "start", "--tmux-socket", tm.Name)
	if got, _ := bodiesTo(t, e, "runs"); len(got) != 1 {
		t.Errorf("after a reboot the script's line was routed %d times: %q", len(got), got)
	}
	send(t, e, "To:runs: after the reboot") // the window that came back takes messages

	// A person opens the ended agent again: it runs in that window, not
	// in a second one.
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exec sleep 600", "quit")
	first := paneOf(t, tm, "quit")
	tm.Must(t, "send-keys", "-t", first, "C-c")
	testutil.WaitFor(t, "quit's agent to end", func() bool { return slices.Contains(windowLines(t, tm), "quit 1") })
	r := e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exec sleep 600", "quit")
	if !strings.Contains(r.Stdout, "started the command again in the window of quit") {
		t.Errorf("open of an ended agent: %s", r)
	}
	if got := windowLines(t, tm); !slices.Equal(got, []string{"quit 0", "runs 0", "term 0"}) || paneOf(t, tm, "quit") != first {
		t.Errorf("windows after opening the ended agent again: %q (pane %s, was %s)", got, paneOf(t, tm, "quit"), first)
	}
	testutil.WaitFor(t, "quit's window to run again", func() bool {
		w := connectedWindow(t, e, "quit")
		return w.Alive && w.Ended == "" && w.ExitStatus == nil
	})
}
