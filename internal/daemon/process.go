package daemon

import (
	"context"
	"sync"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// ServiceProcess recognises another of our services among a service's
// callers by its process, never by what a request claims:
// coordination-engine takes attach, detach and publish only from tamq's own
// process, and tamq takes wakes only from the engine's. The pid is the one
// the service answers on its socket, which the client checked is the
// user's own (a socket anyone else bound is refused before a byte is
// sent); the caller's pid is the kernel's (SO_PEERCRED), and its start time
// tells a reused pid.
type ServiceProcess struct {
	// Listener says who listens on the other service's socket now.
	Listener func(ctx context.Context) (unixrpc.Peer, error)

	mu sync.Mutex
	// pid and start are the listener last seen: a pid that is reused after
	// the service exited has another start time.
	pid   int32
	start uint64
}

// Is says whether peer is the other service's process. The listener last
// seen is asked about again only when it is gone (the service restarted)
// or was never seen: a caller that is some other process costs no question.
func (p *ServiceProcess) Is(ctx context.Context, peer unixrpc.Peer) bool {
	st, err := proc.ReadStat(int(peer.PID))
	if err != nil {
		return false
	}
	p.mu.Lock()
	pid, start := p.pid, p.start
	p.mu.Unlock()
	if pid != 0 {
		if pid == peer.PID && start == st.StartTime {
			return true
		}
		// A zombie has exited (proc.Exited): it listens no more, and the
		// service started after it must be recognised before init reaps it.
		if known, err := proc.ReadStat(int(pid)); err == nil && known.StartTime == start && known.State != 'Z' {
			return false // the service seen last still runs, and this is not it
		}
	}
	if p.Listener == nil {
		return false
	}
	l, err := p.Listener(ctx)
	if err != nil {
		return false
	}
	ls, err := proc.ReadStat(int(l.PID))
	if err != nil {
		return false
	}
	p.mu.Lock()
	p.pid, p.start = l.PID, ls.StartTime
	p.mu.Unlock()
	return l.PID == peer.PID && ls.StartTime == st.StartTime
}
