package daemon

import (
	"context"
	"os/exec"
	"testing"

	"github.com/tmux-amq/tamq/internal/unixrpc"
	"golang.org/x/sys/unix"
)

// A service seen last that has exited but is not reaped yet (its zombie: a
// detached daemon's lasts until init reaps it, which an init in a container
// may never do) is gone: the service started after it, listening now, is
// recognised at once. It was taken for another caller (the operator) while
// the zombie lasted, so every `tamq stop; tamq start` had coordination-engine
// refuse tamq's attach.
func TestServiceProcessPassesOverTheZombieOfTheOneBefore(t *testing.T) {
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	peer := func(c *exec.Cmd) unixrpc.Peer { return unixrpc.Peer{PID: int32(c.Process.Pid)} }
	old := start()
	listening := old
	p := &ServiceProcess{Listener: func(context.Context) (unixrpc.Peer, error) { return peer(listening), nil }}
	ctx := context.Background()
	if !p.Is(ctx, peer(old)) {
		t.Fatal("the service listening is not recognised")
	}
	// The old service exits and stays a zombie (WNOWAIT leaves it unreaped);
	// a new one listens.
	old.Process.Kill()
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, old.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	next := start()
	listening = next
	if !p.Is(ctx, peer(next)) {
		t.Error("the service started after a zombie is not recognised")
	}
	if other := start(); p.Is(ctx, peer(other)) {
		t.Error("another process is taken for the service")
	}
}
