package standing

import (
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/lease"
)

var now = time.Date(2026, 12, 5, 14, 0, 0, 0, time.Local)

func open(id string) observe.TaskView {
	return observe.TaskView{ID: id, Status: "todo", Repo: "beta", Workplan: "W-1", WorkplanStatus: "active", Actionable: true}
}

// badRevision is why the engine skips a task whose revision holds a newline.
const badRevision = "the source revision has control character 0x0a at offset 2"

func skipped(v observe.TaskView) observe.TaskView {
	v.Skipped = badRevision
	return v
}

// stoppedAt is a trigger of task T-2 stopped at the human gate, made for
// State Hub's revision rev of the task.
func stoppedAt(rev string) lease.Trigger {
	return lease.Trigger{ID: "tr-9", Source: lease.SourceTask, TaskID: "T-2", TargetRepo: "beta", SourceRevision: rev,
		State: lease.TriggerStopped, GateReason: observe.GateHuman}
}

func TestOfSaysWhatEachTaskWaitsFor(t *testing.T) {
	trig := func(state lease.TriggerState) lease.Trigger {
		return lease.Trigger{ID: "tr-1", TaskID: "T-1", TargetRepo: "beta", State: state}
	}
	live := lease.Lease{ID: "L-1", TriggerID: "tr-1", State: lease.Running, Attempt: 2, MaxRetries: 4,
		AcquiredAt: now.Add(-5 * time.Minute), UpdatedAt: now.Add(-4 * time.Second)}
	notActionable := func(v observe.TaskView, waiting string, deps ...observe.Dep) observe.TaskView {
		v.Actionable, v.Waiting, v.Deps = false, waiting, deps
		return v
	}
	gatedView := func(gate, reason string) observe.TaskView {
		v := open("T-1")
		v.Gate, v.GateReason = gate, reason
		return v
	}
	withState := func(l lease.Lease, mod func(*lease.Lease)) lease.Lease { mod(&l); return l }

	for _, c := range []struct {
		name  string
		facts Facts
		kind  Kind
		words string
	}{
		{"done", Facts{Task: observe.TaskView{ID: "T-1", Status: "done"}}, Done, "done"},
		{"cancelled", Facts{Task: observe.TaskView{ID: "T-1", Status: "cancelled"}}, Done, "cancelled"},
		{"human gate on a trigger",
			Facts{Task: gatedView(observe.GateHuman, "note N-3 on the task requests review"),
				Triggers: []lease.Trigger{func() lease.Trigger {
					tr := trig(lease.TriggerGated)
					tr.GateReason = observe.GateHuman
					return tr
				}()}},
			NeedsYou, "needs you: human gate (note N-3 on the task requests review)"},
		{"secret gate, not judged yet", Facts{Task: gatedView(observe.GateSecret, "the task requires secrets")},
			NeedsYou, "needs you: secret required"},
		{"destructive action", Facts{Task: gatedView("destructive", "the policy profile sends destructive actions to a human")},
			NeedsYou, "needs you: destructive action proposed"},
		{"retries exhausted",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerStopped)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State, l.Attempt, l.StopReason = lease.Stopped, 5, lease.StopExhausted })}},
			NeedsYou, "needs you: retries exhausted (lease L-1, 5 attempts)"},
		{"failed on the last attempt",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerStopped)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) {
					l.State, l.Attempt, l.StopReason, l.Released = lease.Stopped, 5, "failed: tests red", lease.ResultFailed
				})}},
			NeedsYou, "needs you: retries exhausted (lease L-1, 5 attempts): failed: tests red"},
		{"released blocked",
			Facts{Task: observe.TaskView{ID: "T-1", Status: "blocked", Repo: "beta"}, Triggers: []lease.Trigger{trig(lease.TriggerStopped)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) {
					l.State, l.StopReason, l.Released = lease.Stopped, "blocked: needs the deploy key", lease.ResultBlocked
				})}},
			NeedsYou, "needs you: blocked (blocked: needs the deploy key); woken again when State Hub changes the task"},
		{"blocked in State Hub", Facts{Task: notActionable(observe.TaskView{ID: "T-1", Status: "blocked", WorkplanStatus: "active"}, "it is blocked")},
			NeedsYou, "needs you: blocked in State Hub"},
		{"dialog open",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerLeased)}, Leases: []lease.Lease{live},
				Dialogs: map[string]string{"L-1": "beta"}},
			NeedsYou, "needs you: dialog open in window beta (lease L-1)"},
		{"dependency",
			Facts{Task: notActionable(open("T-2"), "dependency T-1 is in_progress", observe.Dep{ID: "T-1", Status: "in_progress", Repo: "beta", Found: true})},
			Waiting, "waiting: dependency T-1 (in_progress, beta)"},
		{"dependency in no workplan",
			Facts{Task: notActionable(open("T-2"), "dependency T-9 is in no workplan", observe.Dep{ID: "T-9"})},
			Waiting, "waiting: dependency T-9 (in no workplan)"},
		{"no window",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerPending)
				tr.TargetRepo, tr.Wait = "delta", lease.WaitNoWindow
				return tr
			}()}},
			Waiting, "waiting: no window for repo delta"},
		{"workplan paused", Facts{Task: notActionable(open("T-1"), "its workplan is paused")}, Waiting, "waiting: its workplan is paused"},
		{"working",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerLeased)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.AckedBy, l.AckedAt = lease.ByBroker, now.Add(-3*time.Minute) })}},
			Working, "working: lease L-1 attempt 2, acked by broker 3m00s ago, renewed 4s ago"},
		{"offered",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerLeased)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State, l.AcquiredAt = lease.Offered, now.Add(-20*time.Second) })}},
			Working, "working: lease L-1 attempt 2, offered 20s ago, not acknowledged yet"},
		{"retry",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{trig(lease.TriggerLeased)},
				Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State, l.NextRetryAt = lease.RetryWait, now.Add(5*time.Minute+10*time.Second) })}},
			Retry, "retry at 14:05:10"},
		// Issue 39: work held where only a person moves it needs them.
		{"a wake held by a dialog",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerLeased)
				tr.Wait, tr.WaitDetail = lease.WaitDialog, "a dialog is open in the window of beta"
				return tr
			}()}, Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State = lease.Offered })}},
			NeedsYou, "needs you: dialog open in window beta (lease L-1: its wake (attempt 2) waits, no attempt used)"},
		{"a wake held: the agent exited",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerLeased)
				tr.Wait, tr.WaitDetail = lease.WaitNoAgent, "the agent in the window of beta has exited"
				return tr
			}()}, Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State = lease.Offered })}},
			NeedsYou, "needs you: no agent runs in the window of beta; start it again (lease L-1: its wake (attempt 2) waits, no attempt used)"},
		{"a retry waiting for a window that closed",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerLeased)
				tr.Wait, tr.WaitDetail = lease.WaitNoWindow, "no window for repo beta"
				return tr
			}()}, Leases: []lease.Lease{withState(live, func(l *lease.Lease) { l.State, l.NextRetryAt = lease.RetryWait, now.Add(5*time.Second) })}},
			NeedsYou, "needs you: the window of beta is gone; open it again (lease L-1: its next attempt waits, no attempt used)"},
		{"pending work for a window whose agent is not running",
			Facts{Task: open("T-1"), Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerPending)
				tr.Wait = lease.WaitNoAgent
				return tr
			}()}},
			NeedsYou, "needs you: no agent runs in the window of beta; start it again"},
		{"ready", Facts{Task: open("T-1")}, Ready, "ready: woken at the engine's next look"},
		// [cluster]: another host's agent is on it, whatever this host's
		// window is doing; this host's own live lease and State Hub's end
		// speak first.
		{"held by another host, the window busy here",
			Facts{Task: open("T-1"), Held: &Held{Host: "laptop", LeaseID: "L-9"}, Triggers: []lease.Trigger{func() lease.Trigger {
				tr := trig(lease.TriggerPending)
				tr.Wait, tr.WaitDetail = lease.WaitBusy, "window busy with HT1"
				return tr
			}()}},
			Waiting, "waiting: held by host laptop (lease L-9)"},
		{"held by another host, its claim lapsed",
			Facts{Task: open("T-1"), Held: &Held{Host: "laptop", LeaseID: "L-9", Lapsed: true, Until: now.Add(12 * time.Second)}},
			Waiting, "waiting: held by host laptop (lease L-9) until its claim lapsed; it may take it back until 14:00:12"},
		{"held by another host, a lease live here",
			Facts{Task: open("T-1"), Held: &Held{Host: "laptop", LeaseID: "L-9"}, Triggers: []lease.Trigger{trig(lease.TriggerLeased)}, Leases: []lease.Lease{live}},
			Working, "working: lease L-1 attempt 2, renewed 4s ago"},
		{"held by another host, done", Facts{Task: observe.TaskView{ID: "T-1", Status: "done"}, Held: &Held{Host: "laptop", LeaseID: "L-9"}}, Done, "done"},
		// Security issue 37 (low): a task the engine skips is not ready.
		{"skipped", Facts{Task: skipped(open("T-1"))},
			NeedsYou, "needs you: skipped by the engine: " + badRevision + "; mend the task in State Hub"},
		{"skipped, waiting on a dependency besides",
			Facts{Task: skipped(notActionable(open("T-2"), "dependency T-1 is todo", observe.Dep{ID: "T-1", Status: "todo", Found: true}))},
			NeedsYou, "needs you: skipped by the engine: " + badRevision + "; mend the task in State Hub"},
		{"skipped, an earlier revision's lease still working",
			Facts{Task: skipped(open("T-1")), Triggers: []lease.Trigger{trig(lease.TriggerLeased)}, Leases: []lease.Lease{live}},
			Working, "working: lease L-1 attempt 2, renewed 4s ago"},
		// A stopped lease of an older trigger speaks no more once the task changed.
		{"exhausted, then changed",
			Facts{Task: open("T-1"),
				Triggers: []lease.Trigger{trig(lease.TriggerStopped), {ID: "tr-2", TaskID: "T-1", TargetRepo: "beta", State: lease.TriggerPending}},
				Leases:   []lease.Lease{withState(live, func(l *lease.Lease) { l.State, l.StopReason = lease.Stopped, lease.StopExhausted })}},
			Ready, "ready: woken at the engine's next look"},
		// A gate that stopped an older revision speaks no more once State
		// Hub shows the task changed (its label lifted) and not actionable.
		{"stopped at a gate, then the gate lifted while a dependency is open",
			Facts{Task: func() observe.TaskView {
				v := notActionable(open("T-2"), "dependency T-1 is todo", observe.Dep{ID: "T-1", Status: "todo", Repo: "alpha", Found: true})
				v.Revision = "r2"
				return v
			}(), Triggers: []lease.Trigger{stoppedAt("r1")}},
			Waiting, "waiting: dependency T-1 (todo, alpha)"},
		{"stopped at a gate of the revision State Hub shows",
			Facts{Task: func() observe.TaskView {
				v := notActionable(open("T-2"), "dependency T-1 is todo", observe.Dep{ID: "T-1", Status: "todo", Repo: "alpha", Found: true})
				v.Revision = "r1"
				return v
			}(), Triggers: []lease.Trigger{stoppedAt("r1")}},
			NeedsYou, "needs you: human gate"},
		{"stopped at a gate, State Hub not observed (the engine stopped)",
			Facts{Task: observe.TaskView{ID: "T-2", Repo: "beta"}, Triggers: []lease.Trigger{stoppedAt("r1")}},
			NeedsYou, "needs you: human gate"},
	} {
		c.facts.Now = now
		s := Of(c.facts)
		if s.Kind != c.kind || s.Words != c.words {
			t.Errorf("%s: %s %q, want %s %q", c.name, s.Kind, s.Words, c.kind, c.words)
		}
		if want := c.facts.Task.Skipped != "" && c.kind == NeedsYou; (s.Skipped != "") != want {
			t.Errorf("%s: Skipped %q", c.name, s.Skipped)
		}
		// A lease's attempts are told in all, as the prompt and the leases
		// listing say them ("attempt 2 of 5"), not its retries.
		if s.LeaseID == live.ID && s.MaxAttempts != 5 {
			t.Errorf("%s: attempt %d of %d, want of 5", c.name, s.Attempt, s.MaxAttempts)
		}
	}
}

func TestKindsRankWhatNeedsAPersonFirst(t *testing.T) {
	ks := []Kind{Done, Waiting, NeedsYou, Ready, Retry, Working}
	slices.SortFunc(ks, func(a, b Kind) int { return a.Rank() - b.Rank() })
	if !slices.Equal(ks, Kinds) || NeedsYou.Rank() != 0 || Kind("other").Rank() != len(Kinds) {
		t.Errorf("sorted %v, want %v", ks, Kinds)
	}
}
