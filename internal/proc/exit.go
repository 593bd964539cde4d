package proc

import (
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ExitWatch tells when a process exits, any process of the user (not only a
// child): Exited is closed when it has. It waits on the kernel's event (a
// pidfd, readable once the process has exited, through Go's poller), not by
// looking again and again. Stop ends the watch; a watch that is not
// stopped holds a file descriptor.
type ExitWatch struct {
	Exited <-chan struct{}
	stop   func()
}

// Stop ends the watch (Exited stays open if the process still runs).
func (w ExitWatch) Stop() { w.stop() }

// WatchExit starts watching pid. A process that is gone already gives a
// watch whose Exited is closed.
func WatchExit(pid int) (ExitWatch, error) {
	exited := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(exited)
		return ExitWatch{Exited: exited, stop: func() {}}, nil
	}
	if err != nil {
		return ExitWatch{}, os.NewSyscallError("pidfd_open", err)
	}
	// Non-blocking, so the file joins Go's poller: a read waits on epoll
	// without holding a thread, and closing the file ends the wait.
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return ExitWatch{}, err
	}
	go func() {
		var gone bool
		// The poller calls back at once, then after each readiness it
		// reports; readable (POLLIN) is the process's exit.
		rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			gone = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
			return gone
		})
		if gone {
			close(exited)
		}
	}()
	var once sync.Once
	return ExitWatch{Exited: exited, stop: func() { once.Do(func() { f.Close() }) }}, nil
}
