package proc

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// A subreaper adopts what its children leave behind when they exit, and
// ReapOrphans collects them once they exit in turn (else each stays a
// zombie for the subreaper's life). This test binary becomes one: nothing
// else in it starts processes it would not wait for.
func TestASubreaperAdoptsAndReapsOrphans(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the orphan's adoption", func() bool { st, err := ReadStat(orphan); return err == nil && st.PPID == syscall.Getpid() })
	// Kept: not reaped even once it has exited.
	syscall.Kill(orphan, syscall.SIGKILL)
	testutil.WaitFor(t, "the orphan to exit", func() bool { st, err := ReadStat(orphan); return err == nil && st.State == 'Z' })
	// (Other tests of this binary may have left orphans it adopted too.)
	ReapOrphans(func(pid int) bool { return pid == orphan })
	if st, err := ReadStat(orphan); err != nil || st.State != 'Z' {
		t.Errorf("a kept child was reaped: %v %v", st, err)
	}
	if n := ReapOrphans(func(int) bool { return false }); n < 1 {
		t.Errorf("reaped %d, want the orphan", n)
	}
	if _, err := ReadStat(orphan); err == nil {
		t.Error("the orphan is still in the process table")
	}
}

func TestEnviron(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"LONG=" + strings.Repeat("x", 10000), "TAMQ_REPO=alpha", "OTHER=x", "EMPTY="}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Right after its exec a process's environment may read empty for a
	// moment; a caller placed has long been running.
	var env map[string]string
	testutil.WaitFor(t, "the environment", func() bool {
		var err error
		env, err = Environ(cmd.Process.Pid, "TAMQ_REPO", "EMPTY", "MISSING")
		return err == nil && len(env) > 0
	})
	if len(env) != 2 || env["TAMQ_REPO"] != "alpha" || env["EMPTY"] != "" {
		t.Errorf("got %q", env)
	}
}
