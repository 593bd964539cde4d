// Package proc reads the Linux process table (/proc): whether a process has
// exited, who its ancestors are, and when each started, which together name a
// process exactly (a pid alone is reused once its process is gone).
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Stat is what tamq needs of /proc/PID/stat.
type Stat struct {
	PID   int
	PPID  int
	State byte // R, S, D, Z, …
	// StartTime is when the process started, in clock ticks after boot: with
	// the pid it names one process for the life of the machine.
	StartTime uint64
}

// ReadStat reads the stat of pid. It runs on every send (the sender is
// looked up by its process), so it reads with one open and one read into a
// buffer on the stack rather than os.ReadFile's stat and growing buffer.
func ReadStat(pid int) (Stat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return Stat{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var buf [1024]byte // a stat line is a few hundred bytes
	n, err := syscall.Read(fd, buf[:])
	if err != nil {
		return Stat{}, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return parseStat(pid, buf[:n])
}

// parseStat reads "pid (comm) state ppid … starttime …"; comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(pid int, b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	f := bytes.Fields(b[i+2:])
	// After comm: state(3) ppid(4) … starttime(22), so index 19 here.
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	return Stat{PID: pid, PPID: ppid, State: f[0][0], StartTime: start}, nil
}

// Exited reports whether pid has exited. A zombie has: it holds no files,
// locks or sockets any more, and a detached process's zombie lasts until init
// reaps it, which some inits (a container without one) never do.
func Exited(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	st, err := ReadStat(pid)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && st.State == 'Z'
}

// MaxDepth bounds a walk up the process tree; real trees are far shallower.
const MaxDepth = 128

// Ancestors returns pid's stat followed by its parent's, its grandparent's
// and so on, up to but not including pid 1 (init adopts orphans, so it is
// nobody's meaningful ancestor) or pid 0.
func Ancestors(pid int) ([]Stat, error) {
	var out []Stat
	for p := pid; p > 1 && len(out) < MaxDepth; {
		st, err := ReadStat(p)
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			return out, nil // the chain ended while it was read
		}
		out = append(out, st)
		p = st.PPID
	}
	return out, nil
}
