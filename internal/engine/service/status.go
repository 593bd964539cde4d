package service

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// statusHandlers answer what the operator reads: status, explain, and the
// lease, receipt and checkpoint listings.
type statusHandlers struct {
	opts      Options
	startedAt time.Time
	store     *store.Store
	clock     clock.Clock
	// observer is what the observer says of State Hub and its last look.
	observer interface {
		awaitFirstLook(ctx context.Context)
		explainView() *ExplainView
		report(h *api.StateHubStatus)
		stateHubUnreachableSince() *time.Time
	}
	// outbox says how publishing receipts to State Hub goes.
	outbox interface{ report(h *api.StateHubStatus) }
	// leaseOps says which leases wait at a dialog (leaseHandlers).
	leaseOps interface {
		atDialog(ctx context.Context) []api.LeaseAtDialog
	}
	// claimer says what the cluster holds ([cluster]).
	claimer interface {
		on() bool
		report() (held int, lastErr string)
		reportOthers() (map[string]int, *time.Time)
		heldFacts(task string, now time.Time) *standing.Held
		explainHeld(res *api.ExplainResult)
	}
}

func (sh *statusHandlers) ops() ops {
	return ops{
		api.OpStatus:   {door.Anyone, sh.status},
		api.OpLeases:   {door.OperatorOnly, sh.leases},
		api.OpReceipts: {door.OperatorOnly, sh.receipts},
		api.OpExplain:  {door.OperatorOnly, sh.explain},
		api.OpTasks:    {door.OperatorOnly, sh.tasks},
		// Checkpoints hold an agent's words about its work: the operator's.
		api.OpCheckpoints: {door.OperatorOnly, sh.checkpoints},
	}
}

// probeTimeout bounds each reachability check of status.
const probeTimeout = time.Second

func (sh *statusHandlers) status(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	if err := unixrpc.NoArgs(req); err != nil {
		return nil, err
	}
	now := sh.clock.Now()
	r := Collect(ctx, sh.opts.Paths, sh.opts.Config, sh.opts.Registry, sh.opts.Hub)
	r.Service = daemon.RunningStatus(sh.opts.Paths, sh.startedAt, now, sh.opts.Config.ProfileRef(), sh.opts.Config.Version, sh.opts.Orwell != nil)
	r.Tamq = api.TamqStatus{Socket: sh.opts.TamqSocket}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	if _, err := sh.opts.Tamq.Ping(pctx); err != nil {
		r.Tamq.Error = err.Error()
	} else {
		r.Tamq.Reachable = true
	}
	cancel()
	eps, err := sh.store.Endpoints.List(ctx, false)
	if err != nil {
		r.Leases.Error = err.Error()
	}
	r.Endpoints = []api.EndpointStatus{}
	for _, e := range eps {
		r.Endpoints = append(r.Endpoints, api.EndpointStatusOf(e))
	}
	r.Leases.Counts, err = sh.store.LeaseLists.LeaseCounts(ctx)
	if err != nil {
		r.Leases.Error = err.Error()
	}
	r.Leases.AtDialog = sh.leaseOps.atDialog(ctx)
	if next, ok, err := sh.store.Deadlines.NextDue(ctx); err == nil && ok {
		next = next.UTC()
		r.Leases.NextDue = &next
	}
	r.Waiting = sh.waitingStatus(ctx)
	r.Tasks = api.TaskCounts{}
	if ts, err := sh.standings(ctx, sh.observer.explainView()); err == nil {
		for _, t := range ts {
			r.Tasks[t.Kind]++
		}
	}
	if n, err := sh.store.Receipts.UnpublishedReceipts(ctx); err == nil {
		r.StateHub.UnpublishedReceipts = n
	}
	sh.observer.report(&r.StateHub)
	sh.outbox.report(&r.StateHub)
	hubReport(sh.opts.Hub, &r.StateHub)
	if sh.claimer.on() {
		held, lastErr := sh.claimer.report()
		r.Cluster = &api.ClusterStatus{HostID: sh.opts.HostID, Endpoints: redactAll(sh.opts.Config.Cluster.EtcdEndpoints), Claims: held, Error: lastErr}
		r.Cluster.Others, r.Cluster.ReadAt = sh.claimer.reportOthers()
	}
	Judge(&r)
	return r, nil
}

// Collect fills the sections that need no running engine: the database
// file, the gita registry and State Hub's reachability, through hub, the
// driver of its kind. The CLI uses it alone when the engine is down.
func Collect(ctx context.Context, p paths.Paths, cfg *config.Loaded, registry func() (*gita.Registry, error), hub statehub.Hub) api.StatusReport {
	r := api.StatusReport{
		Service:   daemon.StoppedStatus(p),
		Endpoints: []api.EndpointStatus{},
		Leases:    api.LeaseCounts{Counts: map[string]int{}},
	}
	r.SQLite = daemon.DatabaseStatus(ctx, nil, p.Database, store.Migrations)
	r.Registry = daemon.RegistryStatus(registry)
	r.StateHub = api.StateHubStatus{Kind: hub.Kind(), APIBase: textsafe.RedactURL(cfg.StateHub.APIBase), APIBaseFrom: cfg.APIBaseOrigin(), CredentialsConfigured: cfg.HasCredentialCommand(),
		Receipts: hub.Offers().Receipts}
	if err := hub.Probe(ctx, probeTimeout); err != nil {
		r.StateHub.Error = err.Error()
	} else {
		r.StateHub.Reachable = true
	}
	return r
}

// hubReport fills status with what State Hub's driver says of itself:
// its request budget, a pause it asked for, what it watches and why not.
func hubReport(hub statehub.Hub, h *api.StateHubStatus) {
	rep := hub.Report()
	h.Requests, h.NotModified = rep.Requests, rep.NotModified
	if b := rep.Budget; b != nil {
		h.Budget = &api.RateBudget{Limit: b.Limit, Remaining: b.Remaining, Reset: b.Reset.UTC()}
	}
	if rep.PausedUntil != nil && h.RetryAt == nil {
		until := rep.PausedUntil.UTC()
		h.RetryAt, h.RetryReason = &until, rep.PauseReason
	}
	for _, w := range rep.Watched {
		h.Watched = append(h.Watched, api.WatchedRepo(w))
	}
	for _, w := range rep.NotWatched {
		h.NotWatched = append(h.NotWatched, api.WatchedRepo(w))
	}
}

// Judge sets Healthy and returns the first problem, with the code that
// becomes `status`'s exit status: the engine runs, its database and the
// registry are readable, tamq answers, and the running engine's observer
// reaches State Hub. The loop is State Hub's tasks observed, then agents
// woken: with State Hub unreachable since the last good look, or refusing
// the credentials, the engine wakes no one new and its standings age, so
// that is unhealthy. A pause State Hub asked for (a rate limit) is not: it
// answered, and the observer looks again when it said.
func Judge(r *api.StatusReport) error {
	problem := daemon.StatusProblem(paths.Engine, r.Service, r.SQLite, r.Registry)
	h := r.StateHub
	switch {
	case problem != nil:
	case r.Leases.Error != "":
		problem = errs.New(errs.Storage, "leases: %s", r.Leases.Error)
	case !r.Tamq.Reachable:
		problem = errs.New(errs.Unavailable, "tamq does not answer: %s", r.Tamq.Error).WithHint("start it with `tamq start --detach`")
	case h.UnreachableSince != nil:
		problem = errs.New(errs.Unavailable, "%s: %s", api.StaleLine(h.UnreachableSince, h.LastPoll), h.ObserveError).
			WithHint("start State Hub at %s (%s) or set statehub.api_base to where it runs; the engine looks again by itself", h.APIBase, h.APIBaseFrom)
	case h.Paused:
		problem = errs.New(errs.PermissionDeny, "%s: %s", h.PausedWhy(), h.ObserveError).
			WithHint("check statehub.credential_command; the engine looks again by itself")
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
func (sh *statusHandlers) waitingStatus(ctx context.Context) api.WaitingStatus {
	out := api.WaitingStatus{Counts: map[string]int{}, Triggers: []api.WaitingTrigger{}}
	trs, counts, err := sh.store.Triggers.WaitingWork(ctx, 50)
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
			if ls, err := sh.store.LeaseLists.LeasesOfTrigger(ctx, t.ID); err == nil && len(ls) > 0 {
				wt.LeaseID = ls[len(ls)-1].ID
			}
		}
		out.Triggers = append(out.Triggers, wt)
	}
	return out
}

// redactAll is urls fit to print (textsafe.RedactURL), for the status a
// person or a script reads.
func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = textsafe.RedactURL(u)
	}
	return out
}
