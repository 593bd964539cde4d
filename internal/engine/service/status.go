package service

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// probeTimeout bounds each reachability check of status.
const probeTimeout = time.Second

func (s *Service) status(ctx context.Context, _ unixrpc.Peer, _ *unixrpc.Request) (any, error) {
	now := s.opts.Clock.Now()
	r := Collect(ctx, s.opts.Paths, s.opts.Config, s.opts.Registry)
	started := s.startedAt.UTC()
	r.Service = api.ServiceStatus{
		Running: true, PID: os.Getpid(), StartedAt: &started, UptimeSeconds: now.Sub(s.startedAt).Seconds(),
		ServerVersion: buildinfo.Get().Version, Proto: unixrpc.Version,
		Socket: s.opts.Paths.Socket, LogFile: s.opts.Paths.LogFile,
		PolicyProfile: s.opts.Config.ProfileRef(), ConfigVersion: s.opts.Config.Version,
	}
	r.Tamq = api.TamqStatus{Socket: s.opts.TamqSocket}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	if _, err := s.opts.Tamq.Ping(pctx); err != nil {
		r.Tamq.Error = err.Error()
	} else {
		r.Tamq.Reachable = true
	}
	cancel()
	eps, err := s.store.Endpoints.List(ctx, false)
	if err != nil {
		r.Leases.Error = err.Error()
	}
	r.Endpoints = []api.EndpointStatus{}
	for _, e := range eps {
		r.Endpoints = append(r.Endpoints, api.EndpointStatusOf(e))
	}
	r.Leases.Counts, err = s.store.LeaseLists.LeaseCounts(ctx)
	if err != nil {
		r.Leases.Error = err.Error()
	}
	s.dialogs.Range(func(k, v any) bool {
		id := k.(string)
		if l, err := s.store.LeaseLists.Lease(ctx, id); err != nil || !l.State.Live() {
			s.dialogs.Delete(id) // ended since its last renewal
			return true
		}
		r.Leases.AtDialog = append(r.Leases.AtDialog, api.LeaseAtDialog{LeaseID: id, Dialog: v.(string)})
		return true
	})
	slices.SortFunc(r.Leases.AtDialog, func(a, b api.LeaseAtDialog) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	if next, ok, err := s.store.Deadlines.NextDue(ctx); err == nil && ok {
		next = next.UTC()
		r.Leases.NextDue = &next
	}
	r.Waiting = s.waitingStatus(ctx)
	if n, err := s.store.Receipts.UnpublishedReceipts(ctx); err == nil {
		r.StateHub.UnpublishedReceipts = n
	}
	s.hub.view.update(func(v *hubView) {
		h := &r.StateHub
		h.Paused, h.Polls, h.ObserveError, h.PublishError = v.Paused, v.Polls, v.LastError, v.PublishError
		h.EventsConnected, h.EventsOffered = v.EventsConnected, v.EventsOffered
		h.LastPoll, h.LastPublish = optionalTime(v.LastPoll), optionalTime(v.LastPublish)
	})
	Judge(&r)
	return r, nil
}

// Collect fills the sections that need no running engine: the database
// file, the gita registry and State Hub's reachability. The CLI uses it
// alone when the engine is down.
func Collect(ctx context.Context, p paths.Paths, cfg *config.Loaded, registry func() (*gita.Registry, error)) api.StatusReport {
	r := api.StatusReport{
		Service:   api.ServiceStatus{Socket: p.Socket, LogFile: p.LogFile},
		Endpoints: []api.EndpointStatus{},
		Leases:    api.LeaseCounts{Counts: map[string]int{}},
	}
	known := sqlitedb.LatestVersion(store.Migrations)
	info, err := sqlitedb.Inspect(p.Database, known)
	r.SQLite = api.SQLiteStatus{Path: p.Database, Exists: info.Exists, SchemaVersion: info.SchemaVersion,
		BinarySchemaVersion: known, SizeBytes: info.SizeBytes}
	if err != nil {
		r.SQLite.Error = err.Error()
	} else if info.SchemaVersion > known {
		r.SQLite.Error = "schema is newer than this binary supports"
	}
	if reg, err := registry(); err != nil {
		r.Registry.Error = err.Error()
	} else {
		r.Registry = api.RegistryStatus{Path: reg.ReposFile, Readable: true, RepoCount: len(reg.Repos)}
	}
	r.StateHub = api.StateHubStatus{APIBase: cfg.StateHub.APIBase, CredentialsConfigured: cfg.HasCredentialCommand()}
	if err := statehub.Probe(ctx, cfg.StateHub.APIBase, probeTimeout); err != nil {
		r.StateHub.Error = err.Error()
	} else {
		r.StateHub.Reachable = true
	}
	return r
}

// Judge sets Healthy and returns the first problem, with the code that
// becomes `status`'s exit status: the engine runs, its database and the
// registry are readable, and tamq answers. State Hub is not needed for the
// engine's local work (its observation comes later), so it does not count.
func Judge(r *api.StatusReport) error {
	var problem error
	switch {
	case !r.Service.Running:
		problem = errs.New(errs.Unavailable, "coordination-engine is not running").WithHint("start it with `coordination-engine start --detach`")
	case r.SQLite.Error != "":
		problem = errs.New(errs.Storage, "database: %s", r.SQLite.Error)
	case r.Leases.Error != "":
		problem = errs.New(errs.Storage, "leases: %s", r.Leases.Error)
	case r.Registry.Error != "":
		problem = errs.New(errs.RegistryError, "gita registry: %s", r.Registry.Error)
	case !r.Tamq.Reachable:
		problem = errs.New(errs.Unavailable, "tamq does not answer: %s", r.Tamq.Error).WithHint("start it with `tamq start --detach`")
	}
	r.Healthy = problem == nil
	return problem
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// waitingStatus is the waiting work as status shows it: counts by what it
// waits for, and the oldest 50.
func (s *Service) waitingStatus(ctx context.Context) api.WaitingStatus {
	out := api.WaitingStatus{Counts: map[string]int{}, Triggers: []api.WaitingTrigger{}}
	trs, counts, err := s.store.Triggers.WaitingWork(ctx, 50)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	for w, n := range counts {
		out.Counts[string(w)] = n
	}
	for _, t := range trs {
		wt := api.WaitingTrigger{TriggerID: t.ID, TaskID: t.TaskID, SourceID: t.SourceID, TargetRepo: t.TargetRepo,
			Waiting: string(t.Wait), WaitingFor: t.WaitDetail, Since: t.UpdatedAt.UTC()}
		if t.State == lease.TriggerLeased {
			if ls, err := s.store.LeaseLists.LeasesOfTrigger(ctx, t.ID); err == nil && len(ls) > 0 {
				wt.LeaseID = ls[len(ls)-1].ID
			}
		}
		out.Triggers = append(out.Triggers, wt)
	}
	return out
}
