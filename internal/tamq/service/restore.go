package service

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tamq/workspace"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// restore brings back the workspace recorded for the tmux sockets that are
// wanted: every socket whose server runs now, and the sockets named in
// recreate (the one the user asked for, or tmux's default), whose server is
// started again if it is gone. Other sockets, such as the private servers of
// old experiments, are left alone. For each, the newest endpoint's windows
// whose agent was running are reused or opened again with their command and
// mode; the undelivered messages of a replaced endpoint move to its
// replacement. A window whose agent exited, or that was closed while its
// tmux server ran, is never opened again and its command never run again:
// a person quit it or closed it (or it could not start), and a re-run would
// route its To: lines a second time (reopenable).
func (s *endpointHandlers) restore(ctx context.Context, recreate []string) (api.RestoreResult, error) {
	res := api.RestoreResult{Endpoints: []api.Endpoint{}}
	eps, err := store.Endpoints(ctx, s.reader, false)
	if err != nil {
		return res, err
	}
	wanted := s.wantedEndpoints(ctx, eps, recreate)
	if len(wanted) == 0 {
		return res, nil
	}
	reg, err := s.registry()
	if err != nil {
		return res, errs.Wrap(errs.CodeOf(err), err, "cannot restore windows without the gita registry")
	}
	exe, err := os.Executable() // restored windows run under the broker, as opened ones do
	if err != nil {
		return res, errs.Wrap(errs.Internal, err, "cannot restore windows: cannot find the tamq executable")
	}
	defer s.endpoints.changed()
	var failed error
	for _, ep := range wanted {
		// By its label where it has one: restoring may start the server, and
		// tmux then checks its directory first.
		srv := tmux.ServerAt(ep.TmuxSocket, os.Getenv)
		repos := s.reposToReopen(ctx, ep, reg)
		opened, err := workspace.Open(ctx, srv, repos, workspace.Options{
			TamqSocket: s.paths.Socket, EngineSocket: s.engine.Socket, LockFile: s.paths.OpenLockFile,
			Broker: workspace.Broker{Exe: exe, GitaDir: reg.Dir}, LeaveEnded: true,
			Note: func(format string, args ...any) { s.log.Info(fmt.Sprintf(format, args...)) },
			Announce: func(ep api.Endpoint) error {
				err := s.endpointTable.Register(ctx, ep.Domain())
				s.endpoints.changed()
				return err
			},
		})
		if err != nil {
			s.log.Error("cannot restore windows", "endpoint", ep.ID, "error", err.Error())
			failed = err
			continue
		}
		if len(opened.Endpoint.Windows) == 0 {
			continue
		}
		rec := opened.Endpoint
		if err := s.endpointTable.Register(ctx, rec.Domain()); err != nil {
			s.log.Error("cannot record restored windows", "endpoint", rec.ID, "error", err.Error())
			failed = err
			continue
		}
		res.Endpoints = append(res.Endpoints, rec)
		if rec.ID != ep.ID {
			if err := s.endpointTable.SetEndpointState(ctx, ep.ID, queue.Disconnected, "replaced by "+rec.ID); err != nil {
				s.log.Error("cannot record a replaced endpoint", "endpoint", ep.ID, "error", err.Error())
				failed = err
			}
			s.log.Info("workspace restored", "endpoint", rec.ID, "replaces", ep.ID, "windows", len(rec.Windows))
		}
	}
	s.endpoints.changed()
	if err := s.watcher.rebindStranded(ctx); err != nil {
		s.log.Error("cannot move messages to the restored endpoints; will try again", "error", err.Error())
		s.watcher.requestRebind()
	}
	s.watcher.requestList()
	return res, failed
}

// wantedEndpoints are the newest endpoint of each socket whose tmux server
// runs or is to be started again (recreate).
func (s *endpointHandlers) wantedEndpoints(ctx context.Context, eps []queue.Endpoint, recreate []string) []queue.Endpoint {
	var wanted []queue.Endpoint
	seen := map[string]bool{}
	for _, ep := range eps { // newest first
		// An endpoint without windows (an open whose every command failed
		// to start) has nothing to bring back, and must not hide an older
		// one of the same socket that has.
		if seen[ep.TmuxSocket] || len(ep.Windows) == 0 {
			continue
		}
		seen[ep.TmuxSocket] = true
		askCtx, cancel := askTmux(ctx)
		alive := (tmux.Server{Socket: ep.TmuxSocket}).Alive(askCtx)
		cancel()
		if slices.Contains(recreate, ep.TmuxSocket) || alive {
			wanted = append(wanted, ep)
		} else {
			s.log.Debug("not restoring the windows of a tmux server that is gone", "endpoint", ep.ID, "socket", ep.TmuxSocket)
		}
	}
	return wanted
}

// reposToReopen are the windows of ep to open again: those whose agent was
// running and whose repo gita still registers.
func (s *endpointHandlers) reposToReopen(ctx context.Context, ep queue.Endpoint, reg *gita.Registry) []workspace.Repo {
	askCtx, cancel := askTmux(ctx)
	pid, wins, snapErr := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
	cancel()
	var now []tmux.Window // the windows of the endpoint's very server, when it runs
	if snapErr == nil && pid == ep.ServerPID {
		now = wins
	}
	var repos []workspace.Repo
	for _, w := range ep.Windows {
		if ended := s.reopenable(ctx, ep, w, now); ended != "" {
			s.log.Info("not reopening a window whose agent ended", "repo", w.Repo, "endpoint", ep.ID, "how", ended)
			continue
		}
		r, ok := reg.Lookup(w.Repo)
		if !ok {
			s.log.Warn("not restoring a window: repo no longer registered in gita", "repo", w.Repo)
			continue
		}
		repos = append(repos, workspace.Repo{Repo: r, Command: w.Command, Mode: string(w.Mode)})
	}
	return repos
}

// reopenable says how the agent of a recorded window ended, or "" when it
// was running and the window comes back. now lists the windows of the
// endpoint's very tmux server when it still runs (nil when it is gone or
// another server runs on its socket): there, what tmux shows wins, and is
// recorded (the service may have been down when the agent exited or the
// window closed); a window of the repo that runs is reused. A server that is
// gone (a reboot) shows nothing: the end recorded while the service ran, or
// as it stopped, decides, except that a program ended by SIGHUP or SIGTERM
// was ended by the shutdown, not by a person (queue.Window.EndedByShutdown).
func (s *endpointHandlers) reopenable(ctx context.Context, ep queue.Endpoint, w queue.Window, now []tmux.Window) string {
	if now == nil {
		if w.EndedByShutdown() {
			return ""
		}
		return w.EndText()
	}
	var recorded tmux.Window
	found := false
	for _, tw := range now {
		if tw.Repo == w.Repo && !tw.Dead {
			return ""
		}
		if tw.PaneID == w.PaneID {
			recorded, found = tw, true
		}
	}
	end, status, known := windowEnd(w, recorded, found)
	if !known {
		// Its pane is no longer marked for the repo, and no window runs for it.
		end, status = queue.WindowClosed, -1
	}
	s.watcher.recordEnd(ctx, ep, w, recorded, found)
	return queue.Window{Ended: end, ExitStatus: status}.EndText()
}

// restoreOp is `tamq start` reaching a service that already runs: the
// workspace comes back without a service restart.
func (s *endpointHandlers) restoreOp(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.RestoreArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return s.restore(ctx, args.Recreate)
}
