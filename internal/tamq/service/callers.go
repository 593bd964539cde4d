package service

import (
	"context"

	"github.com/tmux-amq/tamq/internal/daemon"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Who may call what, derived from the caller's process, never from what it
// claims (docs/security.md): a process in a window speaks for that window's
// repo; coordination-engine is the process listening on the engine's
// socket; anyone else is the operator.

// whois answers coordination-engine: which window does a process run in?
// It is the derivation a send uses, so both programs agree on who a caller
// is.
func (s *Service) whois(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
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

// engineProcess recognises coordination-engine's own process among callers.
func newEngineProcess(o Options) *daemon.ServiceProcess {
	c := engineclient.New(o.Engine)
	return &daemon.ServiceProcess{Listener: c.Listener}
}

// fromEngine refuses a caller that is not coordination-engine's process:
// a wake is the engine's judgment (gates, leases, the secret scan), and a
// prompt typed on anyone else's word would skip it.
func (s *Service) fromEngine(ctx context.Context, peer unixrpc.Peer, what string) error {
	if s.engineProc.Is(ctx, peer) {
		return nil
	}
	return errs.New(errs.PermissionDeny, "only coordination-engine's own process may %s (pid %d is not the process listening on %s)",
		what, peer.PID, s.opts.Engine.Socket).
		WithHint("ask the engine: `coordination-engine wake REPO`")
}

// notFromAWindow refuses a process that runs in one of tamq's windows: what
// the operator may do there (register windows, for one) an agent may not.
func (s *Service) notFromAWindow(ctx context.Context, peer unixrpc.Peer, what string) error {
	if p, _, ok := s.paneOf(ctx, peer.PID); ok {
		return errs.New(errs.PermissionDeny, "a process in %s's window may not %s", p.repo, what).
			WithHint("run it from a terminal outside tamq's windows")
	}
	return nil
}
