package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
)

// The router says where a trigger's wake may go: the one window of its
// repo, as gita registers it; a gate a person must decide (the repo not
// registered, two windows, a window elsewhere); or what it waits for (a
// window, tamq, the window's mode or agent, another lease of its task, the
// repo's agent busy). A named endpoint narrows the choice; the lease
// asking, or an operator's force, is not kept waiting by itself or by
// other work.
//
// The cases share one engine, each with a repo, tasks and tamq endpoints
// of its own; the last detaches every endpoint.
func TestTheRouterSaysWhereAWakeMayGo(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for i, tc := range []struct {
		name string
		// arrange changes the case's place (one window of its repo, in
		// trigger mode, on its first endpoint) and says which trigger is
		// routed, asked how.
		arrange func(t *testing.T, p routePlace) (lease.Trigger, routeAsk)
		to      int // the case's endpoint it goes to (1 or 2; 0 none)
		gate    string
		wait    lease.Wait
	}{
		{"its repo's window", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			return p.trigger(t, "T-1"), routeAsk{}
		}, 1, "", ""},
		{"a repo gita does not register", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.repo = "ghost"
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, observe.GateUnregistered, ""},
		{"a registered repo without a window", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 1, lease.Window{Repo: "other", Path: p.dir, Mode: lease.ModeTrigger})
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, "", lease.WaitNoWindow},
		{"two windows of the repo", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 2, lease.Window{Repo: p.repo, Path: p.dir, Mode: lease.ModeTrigger})
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, observe.GateAmbiguous, ""},
		{"two windows, one named", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 2, lease.Window{Repo: p.repo, Path: p.dir, Mode: lease.ModeTrigger})
			return p.trigger(t, "T-1"), routeAsk{Endpoint: p.endpoint(2)}
		}, 2, "", ""},
		{"an endpoint named that has no window of it", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 2, lease.Window{Repo: "other", Path: p.dir, Mode: lease.ModeTrigger})
			return p.trigger(t, "T-1"), routeAsk{Endpoint: p.endpoint(2)}
		}, 0, "", lease.WaitNoWindow},
		{"its window in another directory than gita's", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 1, lease.Window{Repo: p.repo, Path: t.TempDir(), Mode: lease.ModeTrigger})
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, observe.GateIdentity, ""},
		{"its window in manual mode", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 1, lease.Window{Repo: p.repo, Path: p.dir, Mode: lease.ModeManual})
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, "", lease.WaitManual},
		{"no agent in its window", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.attach(t, 1, lease.Window{Repo: p.repo, Path: p.dir, Mode: lease.ModeTrigger, NoAgent: true})
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, "", lease.WaitNoAgent},
		{"another trigger of its task leased", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.offer(t, p.trigger(t, "T-1"))
			return p.triggerAt(t, "T-1", "r2"), routeAsk{}
		}, 0, "", lease.WaitTaskLeased},
		{"its task's lease asking, for its next attempt", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			tr := p.trigger(t, "T-1")
			return tr, routeAsk{Lease: p.offer(t, tr).ID}
		}, 1, "", ""},
		{"the repo's agent busy with another task", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.offer(t, p.trigger(t, "T-2"))
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, "", lease.WaitBusy},
		{"the repo's agent busy, forced", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			p.offer(t, p.trigger(t, "T-2"))
			return p.trigger(t, "T-1"), routeAsk{Force: true}
		}, 1, "", ""},
		{"no tamq attached", func(t *testing.T, p routePlace) (lease.Trigger, routeAsk) {
			if _, err := p.w.s.store.Endpoints.DetachAll(context.Background(), "gone"); err != nil {
				t.Fatal(err)
			}
			return p.trigger(t, "T-1"), routeAsk{}
		}, 0, "", lease.WaitTamq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := routePlace{w: w, repo: fmt.Sprint("repo-", i), dir: t.TempDir(), n: i}
			w.reg.Repos = append(w.reg.Repos, gita.Repo{Name: p.repo, Path: p.dir})
			p.attach(t, 1, lease.Window{Repo: p.repo, Path: p.dir, Mode: lease.ModeTrigger})
			tr, ask := tc.arrange(t, p)
			rt := &router{store: w.s.store}
			r, wait, err := rt.judgeRoute(context.Background(), tr, func() (*gita.Registry, error) { return w.reg, nil }, ask)
			if err != nil {
				t.Fatal(err)
			}
			if r.Gate != tc.gate || wait != tc.wait || r.Wait != "" && r.Wait != wait {
				t.Fatalf("gate %q, wait %q (%q): %s; want gate %q, wait %q", r.Gate, wait, r.Wait, r.Reason, tc.gate, tc.wait)
			}
			if (tc.gate != "" || tc.wait != "") != (r.Reason != "") {
				t.Errorf("reason %q", r.Reason)
			}
			want := ""
			if tc.to > 0 {
				want = p.endpoint(tc.to)
			}
			if got := p.tamqEndpoint(t, r.EndpointID); got != want {
				t.Errorf("goes to %q, want %q", got, want)
			}
		})
	}
}

// routePlace is a case's own part of the router's world: its repo (in
// gita at dir), its tasks, its two tamq endpoints.
type routePlace struct {
	w    *engineWorld
	repo string
	dir  string
	n    int
}

// endpoint is the case's tamq endpoint i (1 or 2).
func (p routePlace) endpoint(i int) string { return fmt.Sprintf("tmux-amq-%d-%d", p.n, i) }

// trigger is a new trigger of the case's task at its first revision.
func (p routePlace) trigger(t *testing.T, task string) lease.Trigger {
	t.Helper()
	return p.triggerAt(t, task, "r1")
}

// triggerAt is a new trigger of the case's task at revision rev, recorded.
func (p routePlace) triggerAt(t *testing.T, task, rev string) lease.Trigger {
	t.Helper()
	task = fmt.Sprint(p.n, "-", task)
	tr, _, err := p.w.s.store.Triggers.AddTrigger(context.Background(), lease.Trigger{Source: lease.SourceTask, SourceID: task,
		SourceRevision: rev, TargetRepo: p.repo, TaskID: task, Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// offer offers a lease of tr, live from now.
func (p routePlace) offer(t *testing.T, tr lease.Trigger) lease.Lease {
	t.Helper()
	l, err := p.w.s.store.Leases.Offer(context.Background(), tr.ID, "", "", p.w.s.judge.timing)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// attach attaches the case's tamq endpoint i with the windows given
// (replacing its windows when it is attached already).
func (p routePlace) attach(t *testing.T, i int, windows ...lease.Window) {
	t.Helper()
	p.w.attach(t, p.endpoint(i), windows...)
}

// tamqEndpoint is the tamq endpoint id of the coordination endpoint id
// that hosts the case's repo ("" for none).
func (p routePlace) tamqEndpoint(t *testing.T, id string) string {
	t.Helper()
	if id == "" {
		return ""
	}
	eps, err := p.w.s.store.Endpoints.Hosts(context.Background(), p.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.ID == id {
			return ep.TamqEndpointID
		}
	}
	t.Fatalf("no endpoint %s hosts %s", id, p.repo)
	return ""
}
