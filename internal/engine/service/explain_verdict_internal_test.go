package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
)

// A task whose first revision was woken (tamq queued the prompt, the agent
// took it) and whose next revision was then stopped at a gate was woken:
// the verdict says it was not woken again, and names the wake before, both
// while the engine runs and offline.
func TestExplainNamesAWakeBeforeALaterGate(t *testing.T) {
	t.Parallel()
	st, c := storyStore(t)
	ctx := context.Background()
	first := noErr[lease.Trigger](t)(func() (lease.Trigger, error) {
		tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: "3",
			TargetRepo: "alpha", TaskID: "T-1", Reason: lease.TaskActionable})
		return tr, err
	}())
	c.Advance(time.Second)
	l := noErr[lease.Lease](t)(st.Leases.Offer(ctx, first.ID, "", "", storyTiming))
	noErr[lease.Lease](t)(st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Capability: "resumed", MessageID: "M-1"}))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.Ack(ctx, l.ID, 1, store.Who{By: lease.ByAgent, Repo: "alpha"}, storyTiming))
	c.Advance(time.Minute)
	// A person marks the task as needing them: its new revision stops at
	// the gate, and so does the lease of the old one.
	noErr[lease.Lease](t)(st.Leases.StopLease(ctx, l.ID, "human", "the task needs a human"))
	second, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: "4",
		TargetRepo: "alpha", TaskID: "T-1", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Triggers.StopTrigger(ctx, second.ID, "human", "the task needs a human"); err != nil {
		t.Fatal(err)
	}
	for _, view := range []*ExplainView{{Observed: true, At: c.Now()}, nil} {
		res := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-1", view))
		want := "woken before, for revision 3: lease " + l.ID + " (now stopped), attempt 1, tamq message M-1 at 2026-12-05T10:00:01Z"
		if !strings.Contains(res.Verdict, "not woken again: stopped at gate human") || !strings.Contains(res.Verdict, want) {
			t.Errorf("verdict (offline: %v):\n%s\nwant it to name %q", view == nil, res.Verdict, want)
		}
	}
}

// A task stopped at the human gate whose label was then lifted while a
// dependency is still open (beads' steps in docs/trackers.md): the gate of
// the old revision no longer holds it, and the verdict says what does; with
// the engine stopped (no observation) the gate is all it knows.
func TestExplainAGateLiftedOnWorkNotActionable(t *testing.T) {
	t.Parallel()
	st, c := storyStore(t)
	ctx := context.Background()
	tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "B", SourceRevision: "r1",
		TargetRepo: "beta", TaskID: "B", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Triggers.StopTrigger(ctx, tr.ID, "human", "the task needs a human"); err != nil {
		t.Fatal(err)
	}
	task := observe.TaskView{ID: "B", Status: "todo", Revision: "r2", Repo: "beta", Workplan: "W", WorkplanStatus: "active",
		Deps: []observe.Dep{{ID: "A", Status: "todo", Repo: "alpha", Found: true}}, Waiting: "dependency A is todo"}
	view := &ExplainView{Observed: true, At: c.Now(), Observation: observe.Observation{Tasks: map[string]observe.TaskView{"B": task}}}
	if res := noErr[api.ExplainResult](t)(Explain(ctx, st, "B", view)); res.Verdict != "not woken: dependency A is todo" {
		t.Errorf("verdict %q, want the open dependency", res.Verdict)
	}
	task.Revision = "r1"
	view.Tasks["B"] = task
	if res := noErr[api.ExplainResult](t)(Explain(ctx, st, "B", view)); !strings.HasPrefix(res.Verdict, "not woken: stopped at gate human") {
		t.Errorf("verdict %q, want the gate of the revision State Hub shows", res.Verdict)
	}
	if res := noErr[api.ExplainResult](t)(Explain(ctx, st, "B", nil)); !strings.Contains(res.Verdict, "stopped at gate human") {
		t.Errorf("offline verdict %q, want the gate", res.Verdict)
	}
}
