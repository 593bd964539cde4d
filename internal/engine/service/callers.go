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
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Who calls the engine is derived from the caller's process, never from
// what a request says (docs/security.md): tamq's service is the process
// listening on tamq's socket; an agent is a process tamq places in one of
// its windows (tamq's `whois`, the derivation its `send` uses); anyone else
// of the user's is the operator.

// callers knows who calls the engine (tamq's service, an agent in one of
// its windows, the operator) and guards each operation by it.
type callers struct {
	store      *store.Store
	log        *slog.Logger
	clock      clock.Clock
	tamq       Tamq
	tamqSocket string
	// tamqProc recognises tamq's service among callers: a lease it
	// acknowledges or renews was so by its broker, on the agent's behalf;
	// only it attaches, detaches and publishes.
	tamqProc *daemon.ServiceProcess
	// cache remembers for a moment which window a caller runs in.
	cache callerCache
}

// caller is who made a request.
type caller struct {
	// by is lease.ByTamq, lease.ByAgent, lease.ByOperator, or byUnverified:
	// a process under a tmux server of tamq's windows while tamq cannot say
	// which window (it is not running).
	by string
	// repo is an agent's window's repo.
	repo string
}

const byUnverified = "unverified"

func (c caller) String() string {
	if c.by == lease.ByAgent {
		return "the agent in " + c.repo + "'s window"
	}
	return c.by
}

// detail is how a receipt records the caller.
func (c caller) detail(d map[string]any) map[string]any {
	d["by"] = c.by
	if c.repo != "" {
		d["by_repo"] = c.repo
	}
	return d
}

type callerKey struct{}

func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerFrom is the caller of the request ctx belongs to (the operator for
// work the engine does on its own).
func callerFrom(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{by: lease.ByOperator}
}

// whoisTimeout bounds the question to tamq: its answer comes from a walk up
// the caller's process tree.
const whoisTimeout = 2 * time.Second

// callerOf derives the caller of a connection.
func (cs *callers) callerOf(ctx context.Context, peer unixrpc.Peer) caller {
	if cs.tamqProc.Is(ctx, peer) {
		return caller{by: lease.ByTamq}
	}
	st, err := proc.ReadStat(int(peer.PID))
	if err != nil {
		return caller{by: byUnverified} // gone already: nothing it asks is done for it
	}
	if c, ok := cs.cache.get(st, cs.clock.Now()); ok {
		return c
	}
	c := cs.placeCaller(ctx, peer)
	if c.by != byUnverified {
		cs.cache.put(st, c, cs.clock.Now())
	}
	return c
}

// placeCaller asks tamq which window the caller runs in.
func (cs *callers) placeCaller(ctx context.Context, peer unixrpc.Peer) caller {
	if cs.tamq != nil {
		wctx, cancel := context.WithTimeout(ctx, whoisTimeout)
		res, err := cs.tamq.Whois(wctx, peer.PID)
		cancel()
		if err == nil {
			if res.Repo != "" {
				return caller{by: lease.ByAgent, repo: res.Repo}
			}
			return caller{by: lease.ByOperator}
		}
	}
	if cs.underTamqsTmux(ctx, peer.PID) {
		return caller{by: byUnverified}
	}
	return caller{by: lease.ByOperator}
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

// Who may call an operation.
type access int

const (
	anyone   access = iota // status, ping, hello, lease_current: nothing changes
	tamqOnly               // attach, detach, publish: tamq's service itself
	operator               // wake, leases, receipts, explain, stop: never from a window
	worker                 // an agent's commands: its own repo's leases and tasks (checked by each handler), or the operator's
)

// guard derives the caller, refuses what it may not do, and hands the
// caller to the handler in its context.
func (cs *callers) guard(a access, op string, h unixrpc.Handler) unixrpc.Handler {
	if a == anyone {
		// Nothing to refuse, and nothing done that a receipt would name:
		// status and lease_current (asked before every wake is written)
		// cost no question to tamq.
		return h
	}
	return func(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
		c := cs.callerOf(ctx, peer)
		if err := a.allows(c, op, cs.tamqSocket); err != nil {
			cs.log.Warn("request refused", "op", op, "pid", peer.PID, "caller", c.String())
			return nil, err
		}
		return h(withCaller(ctx, c), peer, req)
	}
}

func (a access) allows(c caller, op, tamqSocket string) error {
	switch {
	case a == tamqOnly && c.by != lease.ByTamq:
		return errs.New(errs.PermissionDeny, "only tamq's service may %s (the process listening on %s); you are %s", op, tamqSocket, c)
	case a == tamqOnly:
		return nil
	case c.by == byUnverified && (a == worker || op == api.OpWake):
		return errs.New(errs.Unavailable, "tamq is not running, so coordination-engine cannot tell which window you run in").
			WithHint("start tamq (`tamq start --detach`) and run the command again")
	case a == operator && c.by == lease.ByAgent:
		return errs.New(errs.PermissionDeny, "%s is the operator's; %s may not run it", op, c).
			WithHint("run it from a terminal outside tamq's windows")
	case a == worker && c.by == lease.ByTamq && op != api.OpLeaseAck && op != api.OpLeaseRenew:
		return errs.New(errs.PermissionDeny, "tamq acknowledges and renews leases for its broker; it may not %s", op)
	}
	return nil
}

// mayActOn refuses an agent acting on another repo's lease or task: the
// operator may act on any, an agent on its own repo's only.
func mayActOn(ctx context.Context, what, repo string) error {
	c := callerFrom(ctx)
	if c.by != lease.ByAgent || c.repo == repo {
		return nil
	}
	return errs.New(errs.PermissionDeny, "%s belongs to %s; %s may act only on %s's", what, repo, c, c.repo)
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
