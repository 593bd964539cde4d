package daemon

import (
	"os"
	"os/exec"
	"testing"
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
	// Not reaped yet: wait for the kernel to make it a zombie.
	for !Exited(pid) {
	}
	cmd.Wait()
	if !Exited(pid) {
		t.Error("a reaped child does not count as exited")
	}
}
