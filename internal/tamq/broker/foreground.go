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
	// Command is the window's command ("" for the user's shell), as
	// program.ArgvCommand reads it from the child's argv.
	Command string
	// Extra are program names the configuration adds to the known agents
	// (delivery.agent_programs).
	Extra []string
	// Read reads the foreground of a process's terminal; nil is
	// proc.ForegroundOf.
	Read func(pid int) (proc.Foreground, error)

	mu   sync.Mutex
	at   time.Time
	last program.Verdict
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

func (f *Foreground) readLocked() program.Verdict {
	f.at = time.Now()
	f.last = program.Verdict{}
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
	if err != nil {
		return f.last
	}
	f.last = program.Judge(program.Foreground{Argv: fg.Argv, OwnGroup: fg.OwnGroup}, f.Command, f.Extra)
	return f.last
}
