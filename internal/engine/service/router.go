package service

import (
	"context"
	"fmt"
	"slices"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
)

// router says where a trigger's wake may go now: which endpoint hosts the
// repo's window, or the gate that stops it, or what it waits for (a
// window, the repo's agent busy, another lease of its task). The judge, the
// operator's wake and a lease's next attempt all ask it.
type router struct {
	store *store.Store
}

// hostsOf are the attached endpoints hosting repo, narrowed to endpoint
// (a tamq or a coordination endpoint id) when one is named.
func (rt *router) hostsOf(ctx context.Context, repo, endpoint string) ([]lease.Endpoint, error) {
	hosts, err := rt.store.Endpoints.Hosts(ctx, repo)
	if err != nil || endpoint == "" {
		return hosts, err
	}
	return slices.DeleteFunc(hosts, func(e lease.Endpoint) bool {
		return e.ID != endpoint && e.TamqEndpointID != endpoint
	}), nil
}

// busyWith says, in words, what the repo's agent works on when another
// live lease than except holds the repo ("" when none does): a repo's
// agent gets one lease at a time.
func (rt *router) busyWith(ctx context.Context, repo, except string) (string, error) {
	ls, err := rt.store.LeaseLists.LiveLeasesOfRepo(ctx, repo)
	if err != nil {
		return "", err
	}
	for _, l := range ls {
		if l.ID == except {
			continue
		}
		what := "lease " + l.ID
		if t, err := rt.store.Triggers.Trigger(ctx, l.TriggerID); err == nil && t.TaskID != "" {
			what = t.TaskID
		}
		return fmt.Sprintf("window busy with %s (lease %s, %s)", what, l.ID, l.State), nil
	}
	return "", nil
}

// judgeRoute says where a trigger's wake may go now, or the gate that stops
// it, or what it waits for (wait; r.Reason says it in words): another live
// lease of its task, a window, or the repo's agent busy with other work.
func (rt *router) judgeRoute(ctx context.Context, t lease.Trigger, reg func() (*gita.Registry, error), ask routeAsk) (observe.Routing, lease.Wait, error) {
	if t.TaskID != "" {
		if l, live, err := rt.store.LeaseLists.LiveLeaseOfTask(ctx, t.TaskID); err != nil || live && l.ID != ask.Lease {
			// One agent at a time on a task, whatever revision woke it.
			return observe.Routing{Reason: fmt.Sprintf("lease %s of task %s is %s", l.ID, t.TaskID, l.State)}, lease.WaitTaskLeased, err
		}
	}
	r, err := rt.route(ctx, reg, t.TargetRepo, ask.Endpoint)
	if err != nil || r.Gate != "" || r.Wait != "" {
		return r, r.Wait, err
	}
	if !ask.Force {
		busy, err := rt.busyWith(ctx, t.TargetRepo, ask.Lease)
		if err != nil || busy != "" {
			return observe.Routing{Reason: busy}, lease.WaitBusy, err
		}
	}
	return r, "", nil
}

// route says which endpoint a wake for repo goes to (endpoint narrows the
// choice to one, by either of its ids), or the gate that stops it, or what
// it waits for.
func (rt *router) route(ctx context.Context, registry func() (*gita.Registry, error), repo, endpoint string) (observe.Routing, error) {
	reg, err := registry()
	if err != nil {
		return observe.Routing{}, err
	}
	r, registered := reg.Lookup(repo)
	eps, err := rt.hostsOf(ctx, repo, endpoint)
	if err != nil {
		return observe.Routing{}, err
	}
	var hosts []observe.Host
	for _, ep := range eps {
		for _, w := range ep.Windows {
			if w.Repo == repo {
				hosts = append(hosts, observe.Host{EndpointID: ep.ID, Path: w.Path, Mode: w.Mode, NoAgent: w.NoAgent})
			}
		}
	}
	attached := len(hosts) > 0
	if !attached {
		// No window for the repo: is any tamq attached at all?
		if attached, err = rt.store.Endpoints.AnyAttached(ctx); err != nil {
			return observe.Routing{}, err
		}
	}
	return observe.Route(repo, r.Path, registered, hosts, attached), nil
}
