package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// callers says who a caller is: the window a process runs in (paneOf, from
// the panes the live view knows, listing its tmux server when it does not
// know it yet), or coordination-engine's own process.
type callers struct {
	clock     clock.Clock
	live      *live
	endpoints *endpointBook
	watcher   *watcher
	// engineProc recognises the engine's process: only it may wake.
	engineProc   *daemon.ServiceProcess
	engineSocket string

	mu sync.Mutex
	// senders are recent answers to "which window does this process run
	// in", by pid.
	senders map[int]senderSeen
}

// Who may call what, derived from the caller's process, never from what it
// claims (docs/security.md): a process in a window speaks for that window's
// repo; coordination-engine is the process listening on the engine's
// socket; anyone else is the operator.

// whois answers coordination-engine: which window does a process run in?
// It is the derivation a send uses, so both programs agree on who a caller
// is.
func (s *callers) whois(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.WhoisArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.PID <= 0 {
		return nil, errs.New(errs.BadRequest, "pid %d is not a process id", args.PID)
	}
	p, _, ok := s.paneOf(ctx, args.PID)
	if !ok {
		return api.WhoisResult{}, nil
	}
	return api.WhoisResult{Repo: p.repo}, nil
}

// senderOf derives the sender from the connecting process, never from what
// it declares: a process running in a tamq window (the pane's own process or
// one of its descendants) speaks for that window's repo; any other process is
// the operator. Only a window's broker, the pane's own process, may pass on a
// line its operator typed, as the operator's (labelled with the window's repo).
func (s *callers) senderOf(ctx context.Context, peer unixrpc.Peer, operatorLine bool) (string, queue.SenderKind, error) {
	p, self, ok := s.paneOf(ctx, peer.PID)
	switch {
	case !ok:
		return OperatorLabel, queue.FromOperator, nil
	case operatorLine && !self:
		return "", "", errs.New(errs.PermissionDeny, "only the broker of %s's window may send a line its operator typed", p.repo)
	case operatorLine:
		return p.repo, queue.FromOperator, nil
	}
	return p.repo, queue.FromWorker, nil
}

// fromEngine refuses a caller that is not coordination-engine's process:
// a wake is the engine's judgment (gates, leases, the secret scan), and a
// prompt typed on anyone else's word would skip it.
func (s *callers) fromEngine(ctx context.Context, peer unixrpc.Peer, what string) error {
	if s.engineProc.Is(ctx, peer) {
		return nil
	}
	return errs.New(errs.PermissionDeny, "only coordination-engine's own process may %s (pid %d is not the process listening on %s)",
		what, peer.PID, s.engineSocket).
		WithHint("ask the engine: `coordination-engine wake REPO`")
}

// notFromAWindow refuses a process that runs in one of tamq's windows: what
// the operator may do there (register windows, for one) an agent may not.
func (s *callers) notFromAWindow(ctx context.Context, peer unixrpc.Peer, what string) error {
	if p, _, ok := s.paneOf(ctx, peer.PID); ok {
		return errs.New(errs.PermissionDeny, "a process in %s's window may not %s", p.repo, what).
			WithHint("run it from a terminal outside tamq's windows")
	}
	return nil
}

// senderSeen is what paneOf found for a process, kept for senderTTL.
type senderSeen struct {
	pane     paneSeen
	self, ok bool
	start    uint64
	until    time.Time
}

const senderTTL = time.Second

func (s *callers) cachedSender(st proc.Stat) (senderSeen, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, hit := s.senders[st.PID]
	return c, hit && c.start == st.StartTime && s.clock.Now().Before(c.until)
}

func (s *callers) cacheSender(st proc.Stat, c senderSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.senders) > 1000 {
		clear(s.senders) // many short-lived clients: start afresh
	}
	c.start, c.until = st.StartTime, s.clock.Now().Add(senderTTL)
	s.senders[st.PID] = c
}

// paneOf finds the tamq window a process runs in: the marked pane whose
// process is the process itself or one of its ancestors, as tmux reports the
// pane's process. self says the process is the pane's own (a window's
// broker). A process in no such pane is the operator's. Only the tmux servers
// of known endpoints are asked, never one a client names: a server anyone can
// start could mark a window with any repo.
func (s *callers) paneOf(ctx context.Context, pid int32) (p paneSeen, self, ok bool) {
	// A client that sends many messages is looked up once a second: the walk
	// up the process tree reads a file per ancestor. Its answer cannot go
	// stale in a way that matters: a process never becomes a descendant of a
	// pane that starts after it.
	st, err := proc.ReadStat(int(pid))
	if err != nil {
		return paneSeen{}, false, false
	}
	if c, hit := s.cachedSender(st); hit {
		return c.pane, c.self, c.ok
	}
	p, self, ok = s.findPane(ctx, int(pid))
	s.cacheSender(st, senderSeen{pane: p, self: self, ok: ok})
	return p, self, ok
}

func (s *callers) findPane(ctx context.Context, pid int) (p paneSeen, self, ok bool) {
	chain, err := proc.Ancestors(pid)
	if err != nil || len(chain) == 0 {
		return paneSeen{}, false, false
	}
	if p, self, ok := s.live.match(chain); ok {
		return p, self, true
	}
	// A window opened since the last listing: list the servers the sender
	// runs under, and only those (serversAbove), so a sender outside tmux
	// costs no tmux call. There is no rate limit: one here let a send from a
	// window opened a moment after another send's lookup go out as the
	// operator's, and a sender in one of our servers but in no window of
	// ours (the user's own shell there) costs one listing of that server.
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		return paneSeen{}, false, false
	}
	servers := serversAbove(chain, eps)
	if len(servers) == 0 {
		return paneSeen{}, false, false
	}
	now := s.clock.Now()
	for _, ep := range servers {
		s.watcher.list(ctx, ep, now)
	}
	return s.live.match(chain)
}

// serversAbove are the connected endpoints whose tmux server is an ancestor
// of the process (chain: it and its ancestors, nearest first), the only ones
// that can have it in a pane: tmux forks every pane's process itself. So a
// sender outside tmux (the operator's shell, a script, the engine) lists no
// server, and one in a window lists its own, however many endpoints there
// are. A chain cut short by the walk's bound could hide the server: then
// every one is listed, as before.
func serversAbove(chain []proc.Stat, eps []queue.Endpoint) []queue.Endpoint {
	whole := len(chain) < proc.MaxDepth
	var out []queue.Endpoint
	for _, ep := range eps {
		if ep.State != queue.Connected {
			continue
		}
		if !whole || slices.ContainsFunc(chain, func(st proc.Stat) bool { return st.PID == ep.ServerPID }) {
			out = append(out, ep)
		}
	}
	return out
}

// engineProcess recognises coordination-engine's own process among callers.
func newEngineProcess(engine paths.Paths) *daemon.ServiceProcess {
	c := engineclient.New(engine)
	return &daemon.ServiceProcess{Listener: c.Listener}
}
