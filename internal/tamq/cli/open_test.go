package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// --mode trigger refuses a command whose program runs behind a wrapper
// that is not a known agent (security issue 37: `script …` was accepted,
// and a task title's `$(…)` ran in the shell script started): a usage
// error (exit 2) naming the wrapper and saying to run the agent itself,
// before anything starts (no window, no service).
func TestTriggerModeRefusesWrappers(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	for _, tc := range []struct{ command, says string }{
		{"script -q /dev/null", "script runs its program out of tamq's sight (the window's foreground is script, whatever runs behind it), and it runs a shell"},
		{"script -q -c 'id > pwned' /dev/null", "is for a shell, and tamq cannot tell which program it ends in"},
		{"ssh -t localhost", "ssh runs its program out of tamq's sight"},
		{"sudo -s", "sudo runs its program out of tamq's sight"},
		{"docker run -it ubuntu", "the image's own runs"},
		{"tmux new-session claude", "it is a terminal multiplexer"},
		{"env TERM=xterm expect -f agent.exp", "expect runs its program out of tamq's sight"},
	} {
		r := e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", tc.command, "alpha")
		if r.Status != 2 || !strings.Contains(r.Stderr, "tamq: --mode trigger with --command") || !strings.Contains(r.Stderr, tc.says) ||
			!strings.Contains(r.Stderr, "run the agent itself: --command claude") || r.Stdout != "" {
			t.Errorf("open --command %q: %s", tc.command, r)
		}
	}
	if names, _ := tm.Cmd("list-windows", "-a", "-F", "#{window_name}"); strings.Contains(string(names), "alpha") {
		t.Fatalf("a refused open opened a window: %q", names)
	}
	if r := e.Run(t, "tamq", "ping"); r.Status == 0 {
		t.Errorf("a refused open started the service")
	}
}

// After an open, stderr says once how to see the windows (issue 40): from
// outside tmux the attach command for the server they went to (-L as
// given), from inside tmux in another session the switch-client command;
// nothing with --quiet, nor when the caller is in session tamq already.
func TestOpenSaysHowToSeeTheWindows(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	e.Gita(t, "beta")
	attach := "tamq: the windows are in tmux session tamq; to see them: tmux -L " + tm.Name + " attach -t tamq\n"
	r := e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha", "beta")
	if strings.Count(r.Stderr, "to see them") != 1 || !strings.Contains(r.Stderr, attach) {
		t.Errorf("open outside tmux: %s", r)
	}
	if r := e.Tamq(t, "open", "--quiet", "--tmux-socket", tm.Name, "alpha"); r.Stderr != "" {
		t.Errorf("open --quiet: %s", r)
	}

	// Inside tmux: $TMUX names the server's socket and the client's session.
	socket := tm.Must(t, "display-message", "-p", "-t", "=work:", "#{socket_path}")
	inSession := func(session string) []string {
		id := tm.Must(t, "display-message", "-p", "-t", "="+session+":", "#{session_id}")
		return append(append([]string{}, e.Vars...), "TMUX="+socket+",1,"+strings.TrimPrefix(id, "$"))
	}
	ctx := context.Background()
	cmd := e.Command(ctx, "tamq", "open", "alpha")
	cmd.Env = inSession("work")
	if r := testutil.RunCmd(t, cmd); r.Status != 0 || !strings.Contains(r.Stderr, "tamq: the windows are in tmux session tamq; to switch to it: tmux switch-client -t tamq\n") ||
		strings.Contains(r.Stderr, "attach") {
		t.Errorf("open inside tmux, session work: %s", r)
	}
	cmd = e.Command(ctx, "tamq", "open", "alpha")
	cmd.Env = inSession("tamq")
	if r := testutil.RunCmd(t, cmd); r.Status != 0 || r.Stderr != "" {
		t.Errorf("open inside tmux, session tamq: %s", r)
	}
}
