package service

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/tmux-amq/tamq/internal/errs"
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
// are reused or opened again with their command and mode; the undelivered
// messages of a replaced endpoint move to its replacement.
func (s *endpointHandlers) restore(ctx context.Context, recreate []string) (api.RestoreResult, error) {
	res := api.RestoreResult{Endpoints: []api.Endpoint{}}
	eps, err := store.Endpoints(ctx, s.reader, false)
	if err != nil {
		return res, err
	}
	// The newest endpoint of each wanted socket.
	var wanted []queue.Endpoint
	seen := map[string]bool{}
	for _, ep := range eps { // newest first
		if seen[ep.TmuxSocket] {
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
		var repos []workspace.Repo
		for _, w := range ep.Windows {
			r, ok := reg.Lookup(w.Repo)
			if !ok {
				s.log.Warn("not restoring a window: repo no longer registered in gita", "repo", w.Repo)
				continue
			}
			repos = append(repos, workspace.Repo{Repo: r, Command: w.Command, Mode: string(w.Mode)})
		}
		opened, err := workspace.Open(ctx, srv, repos, workspace.Options{
			TamqSocket: s.paths.Socket, EngineSocket: s.engine.Socket, LockFile: s.paths.OpenLockFile,
			Broker: workspace.Broker{Exe: exe, GitaDir: reg.Dir},
			Note:   func(format string, args ...any) { s.log.Info(fmt.Sprintf(format, args...)) },
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

// restoreOp is `tamq start` reaching a service that already runs: the
// workspace comes back without a service restart.
func (s *endpointHandlers) restoreOp(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.RestoreArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return s.restore(ctx, args.Recreate)
}
