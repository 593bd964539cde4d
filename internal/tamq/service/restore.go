package service

import (
	"context"
	"fmt"
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tamq/workspace"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// restore brings back the workspace recorded for each tmux socket (the newest
// endpoint of each): the server is created or reused and every recorded window
// is reused or opened again with its command and mode. A replaced endpoint's
// undelivered messages move to its replacement.
func (s *Service) restore(ctx context.Context) {
	eps, err := store.Endpoints(ctx, s.db.Reader)
	if err != nil {
		s.log.Error("cannot read endpoints to restore", "error", err.Error())
		return
	}
	reg, err := s.opts.Registry()
	if err != nil {
		s.log.Warn("cannot restore windows without the gita registry", "error", err.Error())
		return
	}
	defer s.endpointsChanged()
	seen := map[string]bool{}
	for _, ep := range eps { // newest first
		if seen[ep.TmuxSocket] {
			continue
		}
		seen[ep.TmuxSocket] = true
		var repos []workspace.Repo
		for _, w := range ep.Windows {
			r, ok := reg.Lookup(w.Repo)
			if !ok {
				s.log.Warn("not restoring a window: repo no longer registered in gita", "repo", w.Repo)
				continue
			}
			repos = append(repos, workspace.Repo{Repo: r, Command: w.Command, Mode: w.Mode})
		}
		note := func(format string, args ...any) { s.log.Info(fmt.Sprintf(format, args...)) }
		exe, _ := os.Executable() // restored windows run under the broker, as opened ones do
		brk := workspace.Broker{Exe: exe, GitaDir: reg.Dir}
		res, err := workspace.Open(ctx, tmux.Server{Socket: ep.TmuxSocket}, repos, s.opts.Paths.Socket, brk, note)
		if err != nil {
			s.log.Error("cannot restore windows", "endpoint", ep.ID, "error", err.Error())
			continue
		}
		if len(res.Endpoint.Windows) == 0 {
			continue
		}
		rec := res.Endpoint
		if err := s.store.Register(ctx, rec); err != nil {
			s.log.Error("cannot record restored windows", "endpoint", rec.ID, "error", err.Error())
			continue
		}
		if rec.ID != ep.ID {
			s.store.SetEndpointState(ctx, ep.ID, "disconnected")
			n, err := s.store.Rebind(ctx, ep.ID, rec.ID)
			if err != nil {
				s.log.Error("cannot move messages to the restored endpoint", "error", err.Error())
			}
			s.log.Info("workspace restored", "endpoint", rec.ID, "replaces", ep.ID, "windows", len(rec.Windows), "messages_moved", n)
		}
	}
}
