package service

import (
	"context"
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
func TestTheRouterSaysWhereAWakeMayGo(t *testing.T) {
	const other = "tmux-amq-2"
	for _, tc := range []struct {
		name string
		// arrange changes the world (one window of alpha, in trigger
		// mode, on tmux-amq-1) and says which trigger is routed, asked
		// how.
		arrange func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk)
		to      string // the tamq endpoint it goes to
		gate    string
		wait    lease.Wait
	}{
		{"its repo's window", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, worldEndpoint, "", ""},
		{"a repo gita does not register", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			return w.trigger(t, "T-1", "ghost"), routeAsk{}
		}, "", observe.GateUnregistered, ""},
		{"a registered repo without a window", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.reg.Repos = append(w.reg.Repos, gita.Repo{Name: "beta", Path: t.TempDir()})
			return w.trigger(t, "T-1", "beta"), routeAsk{}
		}, "", "", lease.WaitNoWindow},
		{"no tamq attached", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			if _, err := w.s.store.Endpoints.DetachAll(context.Background(), "gone"); err != nil {
				t.Fatal(err)
			}
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", "", lease.WaitTamq},
		{"two windows of the repo", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, other, lease.Window{Repo: worldRepo, Path: w.dir, Mode: lease.ModeTrigger})
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", observe.GateAmbiguous, ""},
		{"two windows, one named", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, other, lease.Window{Repo: worldRepo, Path: w.dir, Mode: lease.ModeTrigger})
			return w.trigger(t, "T-1", worldRepo), routeAsk{Endpoint: other}
		}, other, "", ""},
		{"an endpoint named that has no window of it", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, other, lease.Window{Repo: "beta", Path: w.dir, Mode: lease.ModeTrigger})
			return w.trigger(t, "T-1", worldRepo), routeAsk{Endpoint: other}
		}, "", "", lease.WaitNoWindow},
		{"its window in another directory than gita's", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, worldEndpoint, lease.Window{Repo: worldRepo, Path: t.TempDir(), Mode: lease.ModeTrigger})
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", observe.GateIdentity, ""},
		{"its window in manual mode", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, worldEndpoint, lease.Window{Repo: worldRepo, Path: w.dir, Mode: lease.ModeManual})
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", "", lease.WaitManual},
		{"no agent in its window", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.attach(t, worldEndpoint, lease.Window{Repo: worldRepo, Path: w.dir, Mode: lease.ModeTrigger, NoAgent: true})
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", "", lease.WaitNoAgent},
		{"another trigger of its task leased", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.offer(t, w.trigger(t, "T-1", worldRepo))
			return w.triggerAt(t, "T-1", "r2", worldRepo), routeAsk{}
		}, "", "", lease.WaitTaskLeased},
		{"its task's lease asking, for its next attempt", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			tr := w.trigger(t, "T-1", worldRepo)
			return tr, routeAsk{Lease: w.offer(t, tr).ID}
		}, worldEndpoint, "", ""},
		{"the repo's agent busy with another task", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.offer(t, w.trigger(t, "T-2", worldRepo))
			return w.trigger(t, "T-1", worldRepo), routeAsk{}
		}, "", "", lease.WaitBusy},
		{"the repo's agent busy, forced", func(t *testing.T, w *engineWorld) (lease.Trigger, routeAsk) {
			w.offer(t, w.trigger(t, "T-2", worldRepo))
			return w.trigger(t, "T-1", worldRepo), routeAsk{Force: true}
		}, worldEndpoint, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			tr, ask := tc.arrange(t, w)
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
			if got := w.tamqEndpoint(t, r.EndpointID); got != tc.to {
				t.Errorf("goes to %q, want %q", got, tc.to)
			}
		})
	}
}

// trigger is a new trigger of task's first revision for repo, recorded.
func (w *engineWorld) trigger(t *testing.T, task, repo string) lease.Trigger {
	t.Helper()
	return w.triggerAt(t, task, "r1", repo)
}

// triggerAt is a new trigger of task at revision rev for repo, recorded.
func (w *engineWorld) triggerAt(t *testing.T, task, rev, repo string) lease.Trigger {
	t.Helper()
	tr, _, err := w.s.store.Triggers.AddTrigger(context.Background(), lease.Trigger{Source: lease.SourceTask, SourceID: task,
		SourceRevision: rev, TargetRepo: repo, TaskID: task, Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// offer offers a lease of tr, live from now.
func (w *engineWorld) offer(t *testing.T, tr lease.Trigger) lease.Lease {
	t.Helper()
	l, err := w.s.store.Leases.Offer(context.Background(), tr.ID, "", "", w.s.judge.timing)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// attach attaches tamq endpoint id with the windows given (replacing its
// windows when it is attached already).
func (w *engineWorld) attach(t *testing.T, id string, windows ...lease.Window) {
	t.Helper()
	if _, err := w.s.store.Endpoints.Attach(context.Background(), lease.Endpoint{TamqEndpointID: id, TmuxSocket: "/tmp/tmux-1/" + id,
		Windows: windows}, nil); err != nil {
		t.Fatal(err)
	}
}

// tamqEndpoint is the tamq endpoint id of the coordination endpoint id
// ("" for none).
func (w *engineWorld) tamqEndpoint(t *testing.T, id string) string {
	t.Helper()
	if id == "" {
		return ""
	}
	eps, err := w.s.store.Endpoints.Hosts(context.Background(), worldRepo)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.ID == id {
			return ep.TamqEndpointID
		}
	}
	t.Fatalf("no endpoint %s hosts %s", id, worldRepo)
	return ""
}
