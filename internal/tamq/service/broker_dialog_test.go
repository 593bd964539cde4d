package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// Issue 10 B: a delivery while the agent shows a selection dialog must not
// press Enter into it. The agent here is a plain program (the generic rule):
// it shows a menu with a highlighted numbered option and "Press enter to
// continue", and reads one line as its answer; once answered it puts its
// terminal in raw mode (before anything lets a delivery through, so the
// recording holds the bytes as written), clears the screen and records what
// it is given.
func TestBrokerHoldsTheEnterWhileADialogShows(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nretry_backoff_seconds = [1]\nmax_attempts = 9\n"
	e, tm := emptyWorkspace(t, cfg, "net-kingdom")
	rec := filepath.Join(e.Root, "rec")
	agent := `printf 'Choose how to sign in.\n\n> 1. Sign in with a browser\n  2. Use a key\n\nPress enter to continue\n'; ` +
		`read answer; stty raw -echo; printf '%s' "$answer" > "` + rec + `/answer"; clear; exec cat > "` + rec + `/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	pane := paneOf(t, tm, "net-kingdom")
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-t", pane); return string(out) }
	testutil.WaitFor(t, "the dialog", func() bool { return strings.Contains(screen(), "Press enter to continue") })
	testutil.WaitFor(t, "the broker to attach", func() bool { return brokersAttached(t, e) == 1 })

	m := send(t, e, "To:net-kingdom: do not answer the menu")
	testutil.WaitFor(t, "the broker to refuse the delivery", func() bool {
		return strings.Contains(stateOf(t, e, m.ID).LastError, `the agent is not at its prompt: a dialog shows: "> 1. Sign in with a browser"`)
	})
	if _, err := os.Stat(filepath.Join(rec, "answer")); !os.IsNotExist(err) {
		t.Fatalf("the dialog was answered: %v", err)
	}
	if st := stateOf(t, e, m.ID); st.State == "injected" {
		t.Fatalf("the message was written into the dialog: %+v", st)
	}
	// The operator answers the dialog; then the message goes in.
	tm.Must(t, "send-keys", "-t", pane, "-l", "2")
	tm.Must(t, "send-keys", "-t", pane, "Enter")
	testutil.WaitFor(t, "the answer", func() bool { b, _ := os.ReadFile(filepath.Join(rec, "answer")); return string(b) == "2" })
	waitState(t, e, m.ID, "injected")
	// Injected means written; the agent takes its time to read it. On a
	// slow machine the delivery may come before the agent's `stty raw` ran:
	// the terminal then turns the Enter into a newline.
	var got string
	testutil.WaitFor(t, "the message and its Enter", func() bool {
		got, _ = e.Recording("net-kingdom")
		return strings.HasSuffix(got, "\r") || strings.HasSuffix(got, "\n")
	})
	if body := strings.TrimRight(got, "\r\n"); body != "From:operator/o: do not answer the menu" || len(got) != len(body)+1 {
		t.Errorf("received %q", got)
	}
}

// Issue 10 B: what the agent's hooks say counts too. The agent reports a
// permission request through `tamq hook` (as a Claude Code hook would) and
// shows nothing a screen could tell from a prompt; the delivery waits until
// the hook reports the turn's end.
func TestBrokerHoldsTheEnterWhileAHookSaysADialogIsOpen(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nretry_backoff_seconds = [1]\nmax_attempts = 9\n"
	e, tm := emptyWorkspace(t, cfg, "net-kingdom")
	rec := filepath.Join(e.Root, "rec")
	hook := filepath.Join(e.Bin, "tamq") + " hook"
	agent := `printf '{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}' | ` + hook + ` && echo HOOKED; ` +
		`read go; stty raw -echo; ` + hook + ` '{"hook_event_name":"Stop"}'; exec cat > "` + rec + `/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	pane := paneOf(t, tm, "net-kingdom")
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-t", pane); return string(out) }
	testutil.WaitFor(t, "the hook to run", func() bool { return strings.Contains(screen(), "HOOKED") })
	testutil.WaitFor(t, "the broker to attach", func() bool { return brokersAttached(t, e) == 1 })
	m := send(t, e, "To:net-kingdom: wait for the answer")
	testutil.WaitFor(t, "the broker to refuse the delivery", func() bool {
		return strings.Contains(stateOf(t, e, m.ID).LastError, "the agent asks permission for Bash (hook PermissionRequest)")
	})
	tm.Must(t, "send-keys", "-t", pane, "-l", "go")
	tm.Must(t, "send-keys", "-t", pane, "Enter")
	waitState(t, e, m.ID, "injected")
	// Injected means written; the agent takes its time to read it.
	want := "From:operator/o: wait for the answer\r"
	if got := waitRecorded(t, e, "net-kingdom", "\r"); got != want {
		t.Errorf("received %q", got)
	}
	if s := screen(); strings.Contains(s, "rm -rf") {
		t.Errorf("the hook's input reached the screen:\n%s", s)
	}
}
