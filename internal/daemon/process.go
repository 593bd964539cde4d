package daemon

import (
	"context"
	"sync"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/protocol"
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
	Listener func(ctx context.Context) (protocol.Peer, error)

	mu sync.Mutex
	// pid and start are the listener last seen: a pid that is reused after
	// the service exited has another start time.
	pid   int32
	start uint64
}

// Is says whether peer is the other service's process. A caller that is
// not the listener last seen is checked against the socket again (the
// service may have restarted since).
func (p *ServiceProcess) Is(ctx context.Context, peer protocol.Peer) bool {
	st, err := proc.ReadStat(int(peer.PID))
	if err != nil {
		return false
	}
	p.mu.Lock()
	known := p.pid == peer.PID && p.start == st.StartTime
	p.mu.Unlock()
	if known {
		return true
	}
	if p.Listener == nil {
		return false
	}
	l, err := p.Listener(ctx)
	if err != nil || l.PID != peer.PID {
		return false
	}
	p.mu.Lock()
	p.pid, p.start = peer.PID, st.StartTime
	p.mu.Unlock()
	return true
}
