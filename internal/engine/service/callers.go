package service

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Who calls the engine is derived from the caller's process, never from
// what a request says (docs/security.md): tamq's service is the process
// listening on tamq's socket; an agent is a process tamq places in one of
// its windows (tamq's `whois`, the derivation its `send` uses); anyone else
// of the user's is the operator.

// callers knows who calls the engine (tamq's service, an agent in one of
// its windows, the operator, or a process it cannot place) and guards each
// operation by the one door policy both daemons keep (internal/door).
type callers struct {
	store      *store.Store
	log        *slog.Logger
	clock      clock.Clock
	tamq       Tamq
	tamqSocket string
	policy     door.Policy
	// tamqProc recognises tamq's service among callers: a lease it
	// acknowledges or renews was so by its broker, on the agent's behalf;
	// only it attaches, detaches and publishes.
	tamqProc *daemon.ServiceProcess
	// cache remembers for a moment which window a caller runs in.
	cache callerCache
}

// caller is who made a request: door's Caller, whose kinds are what
// receipts record as `by` (lease.ByAgent, ByOperator, ByTamq).
type caller = door.Caller

// callerDetail is how a receipt records the caller.
func callerDetail(c caller, d map[string]any) map[string]any {
	d["by"] = string(c.Kind)
	if c.Repo != "" {
		d["by_repo"] = c.Repo
	}
	return d
}

// callerFrom is the caller of the request ctx belongs to (the operator for
// work the engine does on its own).
func callerFrom(ctx context.Context) caller { return door.CallerOf(ctx) }

// whoisTimeout bounds the question to tamq: its answer comes from a walk up
// the caller's process tree.
const whoisTimeout = 2 * time.Second

// callerOf derives the caller of a connection.
func (cs *callers) callerOf(ctx context.Context, peer unixrpc.Peer) caller {
	if cs.tamqProc.Is(ctx, peer) {
		return caller{Kind: door.Tamq}
	}
	st, err := proc.ReadStat(int(peer.PID))
	if err != nil {
		// Gone already: nothing it asks is done for it.
		return caller{Kind: door.Unverified, Why: "had exited before you could be placed"}
	}
	if c, ok := cs.cache.get(st, cs.clock.Now()); ok {
		return c
	}
	c := cs.placeCaller(ctx, peer)
	if !c.Down {
		cs.cache.put(st, c, cs.clock.Now())
	}
	return c
}

// placeCaller asks tamq which window the caller runs in; tamq places it
// as its own sends are placed (an agent of a repo, the operator, or a
// process it cannot place). Without tamq, the engine looks for itself at
// what it can see: a process under one of tamq's tmux servers cannot be
// placed until tamq is back, and one whose environment says it came from a
// window or runs under an agent is not the operator.
func (cs *callers) placeCaller(ctx context.Context, peer unixrpc.Peer) caller {
	if cs.tamq != nil {
		wctx, cancel := context.WithTimeout(ctx, whoisTimeout)
		res, err := cs.tamq.Whois(wctx, peer.PID)
		cancel()
		if err == nil {
			return res.Caller()
		}
	}
	u := door.Unplaced{UnderTamqTmux: cs.underTamqsTmux(ctx, peer.PID)}
	if env, err := proc.Environ(int(peer.PID), door.EnvVars...); err == nil {
		u.EnvRepo, u.AgentAbove = door.Marks(env)
	}
	return door.Place(u)
}

// underTamqsTmux says whether a process runs under one of the tmux servers
// tamq attached (an endpoint id names its server's pid): without tamq to
// say which window, such a process may be any repo's agent.
func (cs *callers) underTamqsTmux(ctx context.Context, pid int32) bool {
	eps, err := cs.store.Endpoints.List(ctx, false)
	if err != nil {
		return true // unknown: not the operator's to claim
	}
	servers := map[int]bool{}
	for _, ep := range eps {
		if n, err := strconv.Atoi(strings.TrimPrefix(ep.TamqEndpointID, "tmux-amq-")); err == nil {
			servers[n] = true
		}
	}
	chain, err := proc.Ancestors(int(pid))
	if err != nil {
		return true
	}
	for _, st := range chain {
		if servers[st.PID] {
			return true
		}
	}
	return false
}

// guard derives the caller, refuses what it may not do, and hands the
// caller to the handler in its context.
func (cs *callers) guard(a door.Access, op string, h unixrpc.Handler) unixrpc.Handler {
	if a == door.Anyone {
		// Nothing to refuse, and nothing done that a receipt would name:
		// status and lease_current (asked before every wake is written)
		// cost no question to tamq.
		return h
	}
	return func(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
		c := cs.callerOf(ctx, peer)
		if err := cs.policy.Allows(a, c, op); err != nil {
			cs.log.Warn("request refused", "op", op, "pid", peer.PID, "caller", c.String())
			return nil, err
		}
		return h(door.WithCaller(ctx, c), peer, req)
	}
}

// mayActOn refuses an agent acting on another repo's lease or task: the
// operator may act on any, an agent on its own repo's only.
func mayActOn(ctx context.Context, what, repo string) error {
	return door.Owns(callerFrom(ctx), what, repo)
}

// callerCache remembers for a second where a process runs (by pid and start
// time, so a reused pid is another process), as tamq remembers a sender: an
// agent's commands come in bursts, and a process never joins a window's tree
// after it started.
type callerCache struct {
	mu   sync.Mutex
	seen map[proc.Stat]cachedCaller
}

type cachedCaller struct {
	c  caller
	at time.Time
}

const (
	callerFresh    = time.Second
	callerCacheMax = 1024
)

func (cc *callerCache) get(st proc.Stat, now time.Time) (caller, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.seen[callerKeyOf(st)]
	if !ok || now.Sub(e.at) > callerFresh {
		return caller{}, false
	}
	return e.c, true
}

func (cc *callerCache) put(st proc.Stat, c caller, now time.Time) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.seen == nil || len(cc.seen) >= callerCacheMax {
		cc.seen = map[proc.Stat]cachedCaller{} // a second's worth at most: start afresh
	}
	cc.seen[callerKeyOf(st)] = cachedCaller{c: c, at: now}
}

// callerKeyOf keeps what names a process for good: its pid and start time.
func callerKeyOf(st proc.Stat) proc.Stat { return proc.Stat{PID: st.PID, StartTime: st.StartTime} }
