package proc

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process the reaper of the orphans among
// its descendants (PR_SET_CHILD_SUBREAPER): a process whose parent exits is
// handed to it, not to init. tamq's broker is one, so that what an agent
// starts in the background (`cmd &` in a script that then exits, `setsid`,
// a daemonizing server) stays in the agent's window's process tree, where
// both daemons place it, instead of escaping to init and passing for the
// operator's.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// ReapOrphans collects the exit status of this process's children that have
// exited, except those keep names (a child some os/exec Cmd still waits
// for: reaping it here would take its status from that Wait). A subreaper
// must reap what it adopts, or every orphan that exits stays a zombie for
// the subreaper's life. It returns how many it reaped.
//
// It never waits for "any child" (wait4(-1)): only for the pids it read as
// zombies among its own children, so it cannot race a Wait on a kept one.
func ReapOrphans(keep func(pid int) bool) int {
	n := 0
	for _, pid := range ownChildren() {
		if keep(pid) {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.State != 'Z' {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// ownChildren lists the children of every thread of this process: an
// adopted orphan's parent is whichever thread of the subreaper the kernel
// chose, and the children file is kept per thread.
func ownChildren() []int {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(w)); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// maxEnviron bounds what Environ reads: the variables tamq looks for are
// set by tamq itself, near the end of a window's environment, and a process
// may carry a large one; what lies beyond is not looked at.
const maxEnviron = 256 << 10

// Environ returns the values of the named variables in pid's environment as
// it was when the process started (a process that changes its environment
// later does not change /proc/PID/environ's view of what it inherited). A
// variable that is not set is absent from the map. Only the user's own
// processes (and root's view of all) can be read.
func Environ(pid int, names ...string) (map[string]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	r := bufio.NewReaderSize(io.LimitReader(f, maxEnviron), 4096)
	for {
		kv, err := r.ReadSlice(0)
		if err == bufio.ErrBufferFull {
			// A variable longer than the buffer is none of ours: skip it
			// whole, never read a piece of it as a value.
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice(0)
			}
		} else if k, v, ok := bytes.Cut(bytes.TrimSuffix(kv, []byte{0}), []byte{'='}); ok {
			for _, name := range names {
				if string(k) == name {
					out[name] = string(v)
				}
			}
		}
		if err != nil {
			return out, nil
		}
	}
}
