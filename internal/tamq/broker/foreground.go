package broker

import (
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/tamq/program"
)

// Foreground follows whether an agent is the foreground program of the
// broker's terminal: the terminal's foreground process group, not just the
// program the window started. A shell gets no delivery and routes nothing
// it prints; an agent started by hand in that shell is the window's agent
// while it runs (program.Judge says which is which).
type Foreground struct {
	// PID is the broker's child (what runs the window's command); 0 while
	// none runs.
	PID func() int
	// Argv is the child's argv, and Command the window's command in it (""
	// for the user's shell), as program.ArgvCommand reads it.
	Argv    []string
	Command string
	// Extra are program names the configuration adds to the known agents
	// (delivery.agent_programs).
	Extra []string
	// Read reads the foreground of a process's terminal; nil is
	// proc.ForegroundOf.
	Read func(pid int) (proc.Foreground, error)

	mu    sync.Mutex
	at    time.Time
	last  program.Verdict
	known bool // last holds a verdict
}

// lookEvery bounds how often Look reads the process table: a look is two
// small reads of /proc, and output comes in many chunks a second.
const lookEvery = 100 * time.Millisecond

// Look returns the verdict, read again when the last is older than
// lookEvery.
func (f *Foreground) Look() program.Verdict {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.at.IsZero() && time.Since(f.at) < lookEvery {
		return f.last
	}
	return f.readLocked()
}

// Fresh reads the verdict now: right before a delivery's first byte.
func (f *Foreground) Fresh() program.Verdict {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readLocked()
}

// readLocked reads the verdict. When the process table cannot say (the
// child has not started, or is exiting or has exited and what it printed
// last is still being read, or the foreground leader is), the last verdict
// stands, and before any, the child's own: it
// starts in the foreground. So the last words of an agent that prints and
// exits at once are still its own.
func (f *Foreground) readLocked() program.Verdict {
	f.at = time.Now()
	if !f.known {
		f.last = program.Judge(program.Foreground{Argv: f.Argv, OwnGroup: true}, f.Command, f.Extra)
		f.known = true
	}
	pid := 0
	if f.PID != nil {
		pid = f.PID()
	}
	if pid <= 0 {
		return f.last
	}
	read := f.Read
	if read == nil {
		read = proc.ForegroundOf
	}
	fg, err := read(pid)
	if err != nil || fg.PGID <= 0 || fg.Argv == nil {
		// Not known. Most often something is exiting: the kernel takes the
		// terminal from a process before it is a zombie (no group in the
		// foreground then), and its argv before that.
		return f.last
	}
	f.last = program.Judge(program.Foreground{Argv: fg.Argv, OwnGroup: fg.OwnGroup}, f.Command, f.Extra)
	return f.last
}
