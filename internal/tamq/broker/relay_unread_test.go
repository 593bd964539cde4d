package broker

import (
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// What a child wrote and the relay has not read yet counts as unread output,
// so the relay's drain does not take it for silence after the child exits.
func TestUnreadCountsWhatTheTerminalHolds(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if n := unread(ptmx); n != 0 {
		t.Fatalf("unread before any output: %d", n)
	}
	if _, err := tty.Write([]byte("last words\n")); err != nil {
		t.Fatal(err)
	}
	// The line discipline hands the bytes to the master side a moment
	// later: wait until the terminal says they can be read.
	rc, err := ptmx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000); err != nil {
			t.Error(err)
		}
	})
	if n := unread(ptmx); n == 0 {
		t.Fatal("unread after the child wrote: 0")
	}
	buf := make([]byte, 64)
	if _, err := ptmx.Read(buf); err != nil {
		t.Fatal(err)
	}
	if n := unread(ptmx); n != 0 {
		t.Fatalf("unread after the relay read it all: %d", n)
	}
}
