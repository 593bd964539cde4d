package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// Issue 39: `tamq open --command claude` with no claude installed said
// "opened … (trigger mode)" and exited 0; the pane died with 127, doctor
// said all was well and status only GONE. Now open watches the command
// start: the shell's 127 (not found) or 126 (not executable) is said as
// such, with exit 12 or 9, and the window is closed (no dead window is
// left for a restart to run again).
func TestOpenSaysWhenTheCommandDoesNotStart(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	e.Gita(t, "beta")
	r := e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", "claude-not-installed", "alpha")
	if r.Status != 12 || !strings.Contains(r.Stderr, "tamq: command not found: claude-not-installed") || strings.Contains(r.Stdout, "opened") {
		t.Errorf("open of a command that is not installed: %s", r)
	}
	notExecutable := filepath.Join(e.Root, "agent.sh")
	if err := os.WriteFile(notExecutable, []byte("echo hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--command", notExecutable, "alpha", "beta")
	if r.Status != 9 || !strings.Contains(r.Stderr, "tamq: command cannot be run: "+notExecutable) || strings.Contains(r.Stdout, "opened") {
		t.Errorf("open of a command that is not executable: %s", r)
	}
	if out, err := tm.Cmd("list-windows", "-a", "-F", "#{window_name}"); err == nil && (strings.Contains(string(out), "alpha") || strings.Contains(string(out), "beta")) {
		t.Errorf("a window whose command did not start is left: %q", out)
	}
	// The service recorded no window for them: status and a restart have
	// nothing of them.
	if human := e.Run(t, "tamq", "status"); strings.Contains(human.Stdout, "alpha:") || strings.Contains(human.Stdout, "beta:") {
		t.Errorf("status after the failed opens:\n%s", human.Stdout)
	}

	// A command that starts, and then exits of itself: open opens it, and
	// status and doctor name the window with the status its agent exited with.
	r = e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--command", "sleep 1; exit 3", "alpha")
	if r.Status != 0 || !strings.Contains(r.Stdout, "opened alpha") {
		t.Fatalf("open of a command that runs: %s", r)
	}
	testutil.WaitFor(t, "status to name alpha's exit", func() bool {
		return strings.Contains(e.Run(t, "tamq", "status").Stdout, "agent EXITED with status 3")
	})
	d := e.Run(t, "tamq", "doctor")
	if !strings.Contains(d.Stdout, "the window of alpha: its agent exited with status 3") {
		t.Errorf("doctor does not name the window whose agent exited:\n%s", d.Stdout)
	}
	// With the service down, both still say it, from tmux and the record.
	e.Tamq(t, "stop")
	if s := e.Run(t, "tamq", "status"); !strings.Contains(s.Stdout, "agent EXITED with status 3") {
		t.Errorf("status with the service down:\n%s", s.Stdout)
	}
	if d := e.Run(t, "tamq", "doctor"); !strings.Contains(d.Stdout, "the window of alpha: its agent exited with status 3") {
		t.Errorf("doctor with the service down:\n%s", d.Stdout)
	}
}
