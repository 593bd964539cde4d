package cli_test

import (
	"strings"
	"testing"
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
