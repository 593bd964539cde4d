package cli_test

import (
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// Issue 40 (item 10): re-opening a repo whose agent died left a second
// window of the same name. tamq open now runs the command again in the
// dead window: one window for the repo, the same one, alive again.
func TestReopenAfterTheAgentDiedKeepsOneWindow(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exit 3", "alpha")
	win := tm.Must(t, "display", "-p", "-t", "tamq:alpha", "#{window_id}")
	testutil.WaitFor(t, "the agent to die", func() bool {
		return tm.Must(t, "display", "-p", "-t", win, "#{pane_dead}") == "1"
	})

	r := e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "sleep 600", "alpha")
	if !strings.Contains(r.Stdout, "started the command again in the window of alpha: window "+win+",") {
		t.Errorf("open did not run the command again in the dead window %s: %s", win, r)
	}
	names := strings.Fields(tm.Must(t, "list-windows", "-t", "tamq", "-F", "#{window_name}"))
	if n := strings.Count(" "+strings.Join(names, " ")+" ", " alpha "); n != 1 {
		t.Errorf("%d windows named alpha in session tamq, want 1: %q", n, names)
	}
	if dead := tm.Must(t, "display", "-p", "-t", win, "#{pane_dead}"); dead != "0" {
		t.Errorf("window %s is still dead after the open", win)
	}
}
