package cli_test

import (
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// markFor marks a window for repo by hand, as a user would with
// `tmux set-option -w @tamq_repo`.
func markFor(t *testing.T, tm *testutil.Tmux, windowID, repo string) {
	t.Helper()
	tm.Must(t, "set-option", "-w", "-t", windowID, tmux.RepoOption, repo)
}

// marked is the window's @tamq_repo mark, "" when it has none.
func marked(tm *testutil.Tmux, windowID string) string {
	out, err := tm.Cmd("show-options", "-w", "-v", "-t", windowID, tmux.RepoOption)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// A second window marked by hand for a repo, listed before the window
// whose pane runs tamq's broker, is the one unmarked by tamq open and by
// tamq start's restore: the brokered window keeps taking the messages.
func TestHandMarkedWindowIsReconciledTowardTheBroker(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	brokered := tm.Must(t, "display", "-p", "-t", "tamq:alpha", "#{window_id}")
	// Session "a-hand" sorts before "tamq": tmux lists its window first.
	tm.Must(t, "new-session", "-d", "-s", "a-hand")
	hand := tm.Must(t, "display", "-p", "-t", "a-hand:", "#{window_id}")
	markFor(t, tm, hand, "alpha")

	r := e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	if !strings.Contains(r.Stdout, "reusing the window of alpha: window "+brokered+",") {
		t.Errorf("open did not keep the brokered window %s: %s", brokered, r)
	}
	if !strings.Contains(r.Stderr, "window "+hand+" was a second window for alpha; it is no longer used for messages (window "+brokered+" keeps them)") {
		t.Errorf("open did not say which window it kept: %s", r)
	}
	if marked(tm, brokered) != "alpha" || marked(tm, hand) != "" {
		t.Errorf("marks after open: brokered %s %q, hand-made %s %q", brokered, marked(tm, brokered), hand, marked(tm, hand))
	}

	// The same at start: the service's restore reconciles the recorded windows.
	markFor(t, tm, hand, "alpha")
	e.Tamq(t, "stop")
	e.Tamq(t, "start", "--detach", "--tmux-socket", tm.Name)
	testutil.WaitFor(t, "the restore to unmark the hand-made window", func() bool { return marked(tm, hand) == "" })
	if marked(tm, brokered) != "alpha" {
		t.Errorf("start unmarked the brokered window %s", brokered)
	}
	up, _ := statusJSON(t, e)
	if len(up.Endpoints) == 0 || len(up.Endpoints[0].Windows) != 1 || up.Endpoints[0].Windows[0].WindowID != brokered {
		t.Errorf("recorded windows after start: %+v", up.Endpoints)
	}
}
