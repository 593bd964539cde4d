package broker

import (
	"errors"
	"testing"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/tamq/program"
)

// The verdict follows the process table; where it cannot say (before the
// child starts, once it has exited) the last verdict stands, and before any,
// the child's own: a window's command starts in the foreground.
func TestForegroundVerdict(t *testing.T) {
	pid, reads := 0, 0
	var fg proc.Foreground
	var readErr error
	f := &Foreground{PID: func() int { return pid }, Argv: []string{"/bin/sh", "-c", "printf 'To:x: bye'"}, Command: "printf 'To:x: bye'",
		Read: func(int) (proc.Foreground, error) { reads++; return fg, readErr }}
	if v := f.Fresh(); !v.Running || reads != 0 {
		t.Fatalf("before the child starts: %+v, %d reads", v, reads)
	}
	pid = 42
	fg = proc.Foreground{PGID: 42, Argv: []string{"/bin/sh", "-c", "printf 'To:x: bye'"}, OwnGroup: true}
	if v := f.Fresh(); !v.Running || reads != 1 {
		t.Fatalf("the window's command: %+v", v)
	}
	// Exiting: first its argv goes (cmdline empty), then its terminal
	// (no foreground group), then the process.
	fg = proc.Foreground{PGID: 42, OwnGroup: true}
	if v := f.Fresh(); !v.Running {
		t.Fatalf("while the child exits (no argv): %+v", v)
	}
	fg = proc.Foreground{}
	if v := f.Fresh(); !v.Running {
		t.Fatalf("while the child exits (no terminal): %+v", v)
	}
	readErr = errors.New("exited")
	if v := f.Fresh(); !v.Running {
		t.Fatalf("after the child exited: %+v", v)
	}
	// Look reads at most every lookEvery; Fresh always.
	readErr = nil
	fg = proc.Foreground{PGID: 43, Argv: []string{"vim"}}
	if v := f.Look(); !v.Running || reads != 4 {
		t.Fatalf("Look within %v read again: %+v, %d reads", lookEvery, v, reads)
	}
	if v := f.Fresh(); v.Running || v.Program != "vim" {
		t.Fatalf("another program in the foreground: %+v", v)
	}

	// A shell window: nothing runs until an agent takes the foreground.
	shell := &Foreground{PID: func() int { return 0 }, Argv: []string{"/bin/bash"}, Command: program.ArgvCommand([]string{"/bin/bash"})}
	if v := shell.Fresh(); v.Running || v.Program != "bash" {
		t.Fatalf("a shell window: %+v", v)
	}
}
