// Package proc reads the Linux process table (/proc): whether a process has
// exited, who its ancestors are, and when each started, which together name a
// process exactly (a pid alone is reused once its process is gone); and which
// program is in the foreground of a process's terminal.
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
	// PGRP is the process's group; TPGID the foreground process group of
	// its controlling terminal (-1 without one): the group the terminal's
	// input goes to, which a shell changes as it runs a job.
	PGRP, TPGID int
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
	// After comm: state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8) …
	// starttime(22), so indexes 0, 1, 2, 5 and 19 here.
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	pgrp, err3 := strconv.Atoi(string(f[2]))
	tpgid, err4 := strconv.Atoi(string(f[5]))
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	return Stat{PID: pid, PPID: ppid, State: f[0][0], PGRP: pgrp, TPGID: tpgid, StartTime: start}, nil
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

// Cmdline reads the argument vector of pid. A program may rewrite it (Claude
// Code sets its process title to "claude"). A process that is exiting (its
// memory already released), a zombie or a kernel thread has none: nil. Its
// command name (comm) is not put in its place: a process whose argv is gone
// is on its way out, and "sh" alone would read as an interactive shell.
func Cmdline(pid int) ([]string, error) {
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, nil
	}
	var argv []string
	for _, a := range bytes.Split(b, []byte{0}) {
		argv = append(argv, string(a))
	}
	return argv, nil
}

// maxCmdline bounds what Cmdline reads: the program and its first
// arguments are all anyone asks of it.
const maxCmdline = 4096

// readSmall reads up to maxCmdline bytes of a /proc file with one open and
// few reads.
func readSmall(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, maxCmdline)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// Foreground is the program in the foreground of a process's terminal: the
// leader of the terminal's foreground process group.
type Foreground struct {
	// PGID is the foreground group; 0 when the process has no terminal or
	// no group is in its foreground.
	PGID int
	// Argv is the group leader's argument vector; nil when the leader is
	// exiting or has exited (a pipeline whose first program ended), or
	// cannot be read: then who is in the foreground is not known.
	Argv []string
	// OwnGroup says the foreground group is the process's own group.
	OwnGroup bool
}

// ForegroundOf reads which program is in the foreground of pid's terminal:
// two small reads, pid's stat then the leader's command line. An error means
// pid itself cannot be read (it has exited).
func ForegroundOf(pid int) (Foreground, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Foreground{}, err
	}
	if st.State == 'Z' {
		return Foreground{}, &os.PathError{Op: "read", Path: "/proc/" + strconv.Itoa(pid) + "/stat", Err: os.ErrNotExist}
	}
	if st.TPGID <= 0 {
		return Foreground{}, nil
	}
	fg := Foreground{PGID: st.TPGID, OwnGroup: st.TPGID == st.PGRP}
	fg.Argv, _ = Cmdline(st.TPGID)
	return fg, nil
}

// Children lists the processes whose parent is pid, from the kernel's list
// (/proc/PID/task/PID/children) or, where the kernel keeps none, by reading
// every process's parent.
func Children(pid int) ([]int, error) {
	p := strconv.Itoa(pid)
	if b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children"); err == nil {
		var out []int
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
		return out, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(c); err == nil && st.PPID == pid {
			out = append(out, c)
		}
	}
	return out, nil
}
