package service

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/workspace"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// callers says who a caller is: the window a process runs in (paneOf, from
// the panes the live view knows, listing its tmux server when it does not
// know it yet), coordination-engine's own process, the operator, or a
// process it cannot place; and guards each operation by the one door policy
// both daemons keep (internal/door).
type callers struct {
	clock clock.Clock
	// match finds the pane a process chain runs in among the panes the live
	// view knows; list has the watcher list a tmux server's windows into it.
	match     func(chain []proc.Stat) (p paneSeen, self, ok bool)
	list      func(ctx context.Context, ep queue.Endpoint, now time.Time)
	endpoints endpointLister
	// engineProc recognises the engine's process: only it may wake.
	engineProc *daemon.ServiceProcess
	policy     door.Policy
	// agents are the programs besides the known agents that count as one
	// (delivery.agent_programs): a process under one outside every window
	// is not the operator.
	agents []string
	log    *slog.Logger

	mu sync.Mutex
	// senders are recent answers to "who is this process", by pid.
	senders map[int]senderSeen
}

// endpointLister are the recorded endpoints (endpointBook).
type endpointLister interface {
	known(ctx context.Context) ([]queue.Endpoint, error)
}

// Who may call what, derived from the caller's process, never from what it
// claims (docs/security.md): a process in a window speaks for that window's
// repo; coordination-engine is the process listening on the engine's
// socket; one that belongs near a window but in no repo's agent pane (or
// runs under an agent outside tamq's windows) cannot be placed; anyone else
// is the operator.

// guard derives the caller of an operation, refuses what it may not do,
// and hands the caller to the handler in its context.
func (s *callers) guard(a door.Access, op string, h unixrpc.Handler) unixrpc.Handler {
	if a == door.Anyone {
		return h
	}
	return func(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
		var c door.Caller
		if a == door.EngineOnly {
			// Only the engine may; asking who else it is costs a walk up
			// the process tree for nothing.
			if s.engineProc.Is(ctx, peer) {
				c = door.Caller{Kind: door.Engine}
			}
		} else {
			c, _, _ = s.place(ctx, peer.PID)
		}
		if err := s.policy.Allows(a, c, op); err != nil {
			if a == door.EngineOnly {
				err = errs.New(errs.PermissionDeny, "only coordination-engine's own process may %s (pid %d is not the process listening on %s)",
					engineOps[op], peer.PID, s.policy.EngineSocket).WithHint("ask the engine: `coordination-engine wake REPO`")
			}
			s.log.Warn("request refused", "op", op, "pid", peer.PID, "caller", c.String())
			return nil, err
		}
		return h(door.WithCaller(ctx, c), peer, req)
	}
}

// engineOps say what the engine's operations do, for their refusals.
var engineOps = map[string]string{api.OpWake: "wake an agent", api.OpCancelWake: "cancel a wake", api.OpWakeHeld: "ask what holds a wake"}

// whois answers coordination-engine: which window does a process run in,
// or why can it not be placed? It is the derivation a send uses, so both
// programs agree on who a caller is.
func (s *callers) whois(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.WhoisArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.PID <= 0 {
		return nil, errs.New(errs.BadRequest, "pid %d is not a process id", args.PID)
	}
	c, _, _ := s.place(ctx, args.PID)
	switch c.Kind {
	case door.Agent:
		return api.WhoisResult{Repo: c.Repo}, nil
	case door.Unverified:
		return api.WhoisResult{Unverified: c.Why}, nil
	}
	return api.WhoisResult{AtShellOf: c.Repo}, nil
}

// senderOf derives the sender of a send from its caller (placed by the
// guard): a process running in a tamq window (the pane's own process or one
// of its descendants) speaks for that window's repo; the operator is the
// operator. Only a window's broker, the pane's own process, may pass on a
// line its operator typed, as the operator's (labelled with the window's
// repo); a send the operator typed at a window's shell is labelled so too.
func (s *callers) senderOf(ctx context.Context, peer unixrpc.Peer, operatorLine bool) (string, queue.SenderKind, error) {
	c, _, self := s.place(ctx, peer.PID)
	switch {
	case c.Kind == door.Operator && c.Repo != "":
		return c.Repo, queue.FromOperator, nil
	case c.Kind == door.Operator:
		return OperatorLabel, queue.FromOperator, nil
	case c.Kind != door.Agent:
		return "", "", s.policy.Allows(door.Window, c, api.OpSend)
	case operatorLine && !self:
		return "", "", errs.New(errs.PermissionDeny, "only the broker of %s's window may send a line its operator typed", c.Repo)
	case operatorLine:
		return c.Repo, queue.FromOperator, nil
	}
	return c.Repo, queue.FromWorker, nil
}

// senderSeen is what place found for a process, kept for senderTTL.
type senderSeen struct {
	caller door.Caller
	pane   paneSeen
	self   bool
	start  uint64
	until  time.Time
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
// broker).
func (s *callers) paneOf(ctx context.Context, pid int32) (p paneSeen, self, ok bool) {
	c, p, self := s.place(ctx, pid)
	return p, self, c.Kind == door.Agent
}

// place says who a process is: the agent of the window whose marked pane it
// runs in (self: it is the pane's own process, the window's broker), unless
// the person typed it at that window's shell (typedAtShell: the operator),
// or, in none, the operator or a process that cannot be placed
// (door.Place).
// Only the tmux servers of known endpoints are asked, never one a client
// names: a server anyone can start could mark a window with any repo.
func (s *callers) place(ctx context.Context, pid int32) (c door.Caller, p paneSeen, self bool) {
	// A client that sends many messages is looked up once a second: the walk
	// up the process tree reads a file per ancestor. Its answer cannot go
	// stale in a way that matters: a process never becomes a descendant of a
	// pane that starts after it.
	st, err := proc.ReadStat(int(pid))
	if err != nil {
		return door.Caller{Kind: door.Unverified, Why: "had exited before you could be placed"}, paneSeen{}, false
	}
	if seen, hit := s.cachedSender(st); hit {
		return seen.caller, seen.pane, seen.self
	}
	chain, err := proc.Ancestors(int(pid))
	if err != nil || len(chain) == 0 {
		return door.Caller{Kind: door.Unverified, Why: "could not be read in the process table"}, paneSeen{}, false
	}
	servers, err := s.serversOf(ctx, chain)
	if err != nil {
		return door.Caller{Kind: door.Unverified, Why: "could not be placed: " + err.Error()}, paneSeen{}, false
	}
	p, self, ok := s.findPane(ctx, chain, servers)
	switch {
	case ok && typedAtShell(chain, p.pid, s.agents):
		c = door.Caller{Kind: door.Operator, Repo: p.repo}
	case ok:
		c = door.Caller{Kind: door.Agent, Repo: p.repo}
	default:
		c = s.placeOutside(ctx, chain, servers)
	}
	s.cacheSender(st, senderSeen{caller: c, pane: p, self: self})
	return c, p, self
}

// typedAtShell says whether a process in a window's pane is a command the
// person typed at that window's shell (issue 40: operators in their own
// shell window): the window's own program (the broker's child, or the
// pane's process in a window without a broker) is an interactive shell,
// the process is that shell's child, and it is in its terminal's
// foreground, as a command typed at the prompt is. An agent's commands run
// under the agent (its tool's shell, a script), never as children of the
// window's shell, and an agent started by hand in that shell is the
// shell's child itself, so what it runs is a grandchild: both stay the
// agent's. An agent's mark in the environment (CLAUDECODE, …) is a reason
// to refuse, never to allow.
func typedAtShell(chain []proc.Stat, panePID int, agents []string) bool {
	k := slices.IndexFunc(chain, func(st proc.Stat) bool { return st.PID == panePID })
	if k < 1 {
		return false // the pane's own process (a broker), or not in it
	}
	paneArgv, err := proc.Cmdline(panePID)
	if err != nil {
		return false
	}
	own := k // the window's own program's place in chain
	if _, ok := program.BrokerChild(paneArgv); ok {
		own = k - 1
	}
	if own != 1 || chain[0].TPGID <= 0 || chain[0].PGRP != chain[0].TPGID {
		return false
	}
	argv, err := proc.Cmdline(chain[1].PID)
	if err != nil || program.Classify(argv, agents).Kind != program.Shell {
		return false
	}
	// An agent started by hand at the prompt is the window's agent, not
	// the person, if it calls itself.
	if own, err := proc.Cmdline(chain[0].PID); err != nil || program.AgentName(own, agents) != "" {
		return false
	}
	env, err := proc.Environ(chain[0].PID, door.EnvVars...)
	if err != nil {
		return false
	}
	_, agent := door.Marks(env)
	return agent == ""
}

// serversOf are the connected endpoints whose tmux server the process runs
// under (serversAbove).
func (s *callers) serversOf(ctx context.Context, chain []proc.Stat) ([]queue.Endpoint, error) {
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		return nil, err
	}
	return serversAbove(chain, eps), nil
}

func (s *callers) findPane(ctx context.Context, chain []proc.Stat, servers []queue.Endpoint) (p paneSeen, self, ok bool) {
	if p, self, ok := s.match(chain); ok {
		return p, self, true
	}
	// A window opened since the last listing: list the servers the sender
	// runs under, and only those (serversAbove), so a sender outside tmux
	// costs no tmux call. There is no rate limit: one here let a send from a
	// window opened a moment after another send's lookup go out as the
	// operator's, and a sender in one of our servers but in no window of
	// ours (the user's own shell there) costs one listing of that server.
	if len(servers) == 0 {
		return paneSeen{}, false, false
	}
	now := s.clock.Now()
	for _, ep := range servers {
		s.list(ctx, ep, now)
	}
	return s.match(chain)
}

// placeOutside is who a process in no repo's agent pane is (door.Place):
// which pane of tamq's tmux servers it runs in, if any (a split pane of a
// repo's window, a window of tamq's session, or the user's own), what its
// environment says it came from, and whether an agent runs above it.
func (s *callers) placeOutside(ctx context.Context, chain []proc.Stat, servers []queue.Endpoint) door.Caller {
	u := door.Unplaced{Listed: true}
	for _, ep := range servers {
		if !slices.ContainsFunc(chain, func(st proc.Stat) bool { return st.PID == ep.ServerPID }) {
			continue // listed only because the chain was cut short
		}
		u.UnderTamqTmux = true
		askCtx, cancel := askTmux(ctx)
		panes, err := (tmux.Server{Socket: ep.TmuxSocket}).ListPanes(askCtx)
		cancel()
		if err != nil {
			continue // in none of its panes we know of: unverified
		}
		if w, ok := paneHolding(panes, chain); ok {
			u.InPane, u.PaneRepo, u.TamqSession = true, w.Repo, w.Session == workspace.SessionName
		}
	}
	if env, err := proc.Environ(chain[0].PID, door.EnvVars...); err == nil {
		u.EnvRepo, u.AgentAbove = door.Marks(env)
	}
	if u.AgentAbove == "" {
		for _, st := range chain[1:] {
			argv, _ := proc.Cmdline(st.PID)
			if name := program.AgentName(argv, s.agents); name != "" {
				u.AgentAbove = name
				break
			}
		}
	}
	return door.Place(u)
}

// paneHolding is the pane whose process is the nearest of chain's.
func paneHolding(panes []tmux.Window, chain []proc.Stat) (tmux.Window, bool) {
	for _, st := range chain {
		for _, w := range panes {
			if w.PanePID == st.PID && !w.Dead {
				return w, true
			}
		}
	}
	return tmux.Window{}, false
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
