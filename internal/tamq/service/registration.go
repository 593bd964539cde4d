package service

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// endpointHandlers answer the operations on endpoints: register, list,
// forget and restore (tamq start reaching a running service); at start they
// reconnect the recorded endpoints whose tmux server still runs.
type endpointHandlers struct {
	log           *slog.Logger
	config        *config.Loaded
	paths, engine paths.Paths
	registry      func() (*gita.Registry, error)
	reader        *sql.DB
	endpointTable *store.EndpointTable
	endpoints     endpointRecords
	watcher       endpointWatch
	// dispatch wakes the dispatcher: a registered endpoint's messages may
	// go now.
	dispatch wakeup.Signal
}

// endpointWatch is what registration and restore ask of the watcher.
type endpointWatch interface {
	requestList(endpointIDs ...string)
	requestRebind(endpointIDs ...string)
	rebindStranded(ctx context.Context) error
	recordEnd(ctx context.Context, ep queue.Endpoint, w queue.Window, tw tmux.Window, found bool)
}

func (s *endpointHandlers) register(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.RegisterArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	ep := args.Endpoint.Domain()
	// An endpoint is registered twice by an open: first alone, as soon as its
	// tmux server is known (before any window's program starts), then with
	// its windows.
	if ep.ID != "tmux-amq-"+strconv.Itoa(ep.ServerPID) || ep.ServerPID <= 0 || ep.TmuxSocket == "" {
		return nil, errs.New(errs.BadRequest, "register needs an endpoint id tmux-amq-<pid> matching its tmux server pid, and its tmux socket")
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	for _, w := range ep.Windows {
		repo, err := reg.Resolve(w.Repo)
		if err != nil {
			return nil, err
		}
		if repo.Path != w.RepoPath {
			return nil, errs.New(errs.Conflict, "window for %q reports path %s, but gita registers %s", w.Repo, w.RepoPath, repo.Path)
		}
		if w.Mode != queue.Trigger && w.Mode != queue.Manual && !(w.Mode == "" && w.Reused) {
			return nil, errs.New(errs.BadRequest, "window mode %q is not trigger or manual", w.Mode)
		}
	}
	if err := s.verifyRegistration(ctx, ep); err != nil {
		s.log.Warn("registration refused", "endpoint", ep.ID, "error", err.Error())
		return nil, err
	}
	if err := s.checkTriggerWindows(ctx, ep); err != nil {
		return nil, err
	}
	err = s.endpointTable.Register(ctx, ep)
	s.endpoints.changed()
	if err != nil {
		return nil, err
	}
	// The windows are looked at again (a reopened window clears what held its
	// deliveries), and messages stranded on a gone endpoint of the same
	// socket move here.
	s.watcher.requestRebind(ep.ID)
	s.dispatch.Wake()
	return map[string]string{"endpoint_id": ep.ID}, nil
}

// verifyRegistration asks the endpoint's tmux server itself whether what a
// registration says holds: the server answers with the pid the endpoint is
// named after, and each window's pane is there, in a window marked for its
// repo. A window already recorded on a live pane is never moved to another
// pane while that one still runs marked for the repo: deliveries would go
// where the registering process chose, not where the agent is.
func (s *endpointHandlers) verifyRegistration(ctx context.Context, ep queue.Endpoint) error {
	askCtx, cancel := askTmux(ctx)
	pid, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
	cancel()
	if err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "cannot register endpoint %s: cannot ask its tmux server", ep.ID)
	}
	if pid != ep.ServerPID {
		return errs.New(errs.PermissionDeny, "cannot register endpoint %s: the tmux server on %s has pid %d", ep.ID, ep.TmuxSocket, pid)
	}
	panes := map[string]tmux.Window{}
	for _, w := range wins {
		panes[w.PaneID] = w
	}
	known, err := s.endpoints.known(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]string{} // repo -> pane, on this endpoint
	for _, k := range known {
		if k.ID == ep.ID {
			for _, w := range k.Windows {
				recorded[w.Repo] = w.PaneID
			}
		}
	}
	for _, w := range ep.Windows {
		p, ok := panes[w.PaneID]
		if !ok || p.Repo != w.Repo {
			return errs.New(errs.PermissionDeny, "cannot register the window of %q: pane %s is not in a window marked for it on %s", w.Repo, w.PaneID, ep.TmuxSocket)
		}
		if old := recorded[w.Repo]; old != "" && old != w.PaneID {
			if o, ok := panes[old]; ok && !o.Dead && o.Repo == w.Repo {
				return errs.New(errs.Conflict, "cannot move the window of %q to pane %s: its pane %s still runs", w.Repo, w.PaneID, old).
					WithHint("close that window first, or use it: `tamq open %s` reuses it", w.Repo)
			}
		}
	}
	return nil
}

// checkTriggerWindows refuses a trigger-mode window whose command is the
// user's shell or another shell: coordination-engine's wakes would be
// written into it and run as commands. A reused window's command is the one
// recorded; one with none recorded (opened without --command, or without the
// service) counts as the user's shell, as the wake that would follow does.
func (s *endpointHandlers) checkTriggerWindows(ctx context.Context, ep queue.Endpoint) error {
	known, err := s.endpoints.known(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]string{}
	for _, k := range known {
		if k.ID == ep.ID {
			for _, w := range k.Windows {
				recorded[w.Repo] = w.Command
			}
		}
	}
	for _, w := range ep.Windows {
		command := w.Command
		if w.Reused {
			command = recorded[w.Repo]
		}
		if c := program.CheckTrigger(command, s.config.Delivery.AgentPrograms); w.Mode == queue.Trigger && c.Refused {
			what := "runs your shell (no agent command is recorded for it)"
			switch {
			case c.Via != "":
				what = "runs " + textsafe.Escape(c.Via) + ", which hides what it runs (" + textsafe.Escape(command) + ")"
			case command != "":
				what = "runs a shell (" + textsafe.Escape(command) + ")"
			}
			return errs.New(errs.Usage, "the window of %s %s: trigger mode would let coordination-engine type its prompts into a shell, which runs them as commands", w.Repo, what).
				WithHint("close that window, then open it with the agent: `tamq open --mode trigger --command claude %s`", w.Repo)
		}
	}
	return nil
}

func (s *endpointHandlers) listEndpoints(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.EndpointsArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	eps, err := store.Endpoints(ctx, s.reader, args.All)
	if err != nil {
		return nil, err
	}
	return api.EndpointsResult{Endpoints: status.Live(ctx, eps)}, nil
}

// forget marks an endpoint whose tmux server is gone as forgotten.
func (s *endpointHandlers) forget(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	n, err := s.endpointTable.Forget(ctx, args.ID)
	s.endpoints.changed()
	if err != nil {
		return nil, err
	}
	return api.ForgetResult{EndpointID: args.ID, FailedMessages: n}, nil
}

// reconnectEndpoints marks each recorded endpoint connected when its tmux
// server still runs with the same pid, else disconnected.
func (s *endpointHandlers) reconnectEndpoints(ctx context.Context) {
	eps, err := store.Endpoints(ctx, s.reader, false)
	if err != nil {
		s.log.Error("cannot read endpoints", "error", err.Error())
		return
	}
	for _, ep := range eps {
		state, reason := queue.Disconnected, "its tmux server is gone"
		askCtx, cancel := askTmux(ctx)
		pid, err := (tmux.Server{Socket: ep.TmuxSocket}).PID(askCtx)
		cancel()
		if err == nil && pid == ep.ServerPID {
			state, reason = queue.Connected, "its tmux server still runs"
		}
		if err := s.endpointTable.SetEndpointState(ctx, ep.ID, state, reason); err != nil {
			s.log.Error("cannot record endpoint state", "endpoint", ep.ID, "error", err.Error())
		}
	}
	s.endpoints.changed()
	s.watcher.requestRebind()
}
