package daemon

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// A child that has exited but is not reaped yet (a zombie) counts as exited:
// it holds nothing any more.
func TestExitedCountsZombies(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if Exited(os.Getpid()) {
		t.Fatal("the test process counts as exited")
	}
	// Wait for the exit but leave the child unreaped (WNOWAIT): a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !Exited(pid) {
		t.Error("a zombie does not count as exited")
	}
	cmd.Wait()
	if !Exited(pid) {
		t.Error("a reaped child does not count as exited")
	}
}
