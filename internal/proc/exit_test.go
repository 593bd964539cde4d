package proc

import (
	"os/exec"
	"testing"
	"time"
)

// WatchExit hears a process exit (a zombie not yet reaped has), and a
// process already gone at once; one that runs on is not heard of.
func TestWatchExit(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := WatchExit(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	quick := exec.Command("true")
	if err := quick.Start(); err != nil {
		t.Fatal(err)
	}
	q, err := WatchExit(quick.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	select {
	case <-q.Exited: // not reaped: its zombie is what exited looks like
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of a process was not heard")
	}
	select {
	case <-w.Exited:
		t.Fatal("a process that runs counts as exited")
	default:
	}
	sleeper.Process.Kill()
	select {
	case <-w.Exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of a killed process was not heard")
	}
	sleeper.Wait()
	quick.Wait()
	// Reaped and gone: exited at once.
	g, err := WatchExit(quick.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	select {
	case <-g.Exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a process that is gone does not count as exited")
	}
}
