package service_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The loop as people live it (docs/observation.md): real tmux, both real
// daemons, the reference State Hub and the scripted agent.

// wakes counts the wakes the scripted agent received.
func (l *loop) wakes() int { return strings.Count(l.AgentLog(), "\nwake ") }

// wakeMessages are tamq's messages from coordination-engine, with bodies.
func (l *loop) wakeMessages(t testing.TB) []tamqapi.Message {
	t.Helper()
	var ms []tamqapi.Message
	if err := json.Unmarshal([]byte(l.Env.Tamq(t, "history", "--json", "--body").Stdout), &ms); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ms, func(m tamqapi.Message) bool { return m.SenderKind != "coordination" })
}

// receiptKinds are the kinds of every receipt of a trigger.
func (l *loop) triggerReceipts(t testing.TB, trigger string) []api.Receipt {
	t.Helper()
	var res api.ReceiptsResult
	if err := json.Unmarshal([]byte(l.Env.Engine(t, "receipts", "--json", "--trigger", trigger).Stdout), &res); err != nil {
		t.Fatal(err)
	}
	return res.Receipts
}

// Waiting is not giving up: work observed while no tamq is attached, and
// while no window hosts its repo, waits (no stopped receipt, the reason in
// explain, status and receipts) and is woken when the window opens, and
// when tamq comes back after a restart. The poll interval is ten minutes:
// only the events (State Hub's stream, tamq attaching) can wake it in time.
func TestWorkWaitsForAWindowAndIsWokenWhenItOpens(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 600, "wake_ack_timeout_seconds = 30\n"), "alpha")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	testutil.WaitFor(t, "the event stream", func() bool { return l.Status(t).StateHub.EventsConnected })
	h.Put(enginetest.Workplan("W", "alpha", enginetest.Todo("A", "alpha")))
	testutil.WaitFor(t, "A waiting", func() bool { return strings.HasPrefix(l.Explain(t, "A").Verdict, "waiting: ") })
	x := l.Explain(t, "A")
	if tr := x.Triggers[0]; tr.State != "pending" || tr.Waiting != "tamq_unreachable" || !strings.Contains(x.Verdict, "no tamq is attached") {
		t.Fatalf("A before tamq: %+v, verdict %q", tr, x.Verdict)
	}
	if w := l.Status(t).Waiting; w.Counts["tamq_unreachable"] != 1 || len(w.Triggers) != 1 || w.Triggers[0].TaskID != "A" {
		t.Errorf("status's waiting work: %+v", w)
	}
	// The window opens in trigger mode: woken at once, not at a poll.
	opened := time.Now()
	l.OpenAgent(t, "alpha", "complete")
	testutil.WaitFor(t, "A woken", func() bool { return strings.Contains(l.AgentLog(), "task=A") })
	t.Logf("A woken %s after its window was open", time.Since(opened).Round(time.Millisecond))
	testutil.WaitFor(t, "A done", func() bool { return h.Task("A").Status == "done" })
	// The agent releases after it marks the task done: tamq stops only
	// once it has, or the release, refused while tamq is away (nothing
	// can place the agent's process), leaves A's lease to run out.
	testutil.WaitFor(t, "A released", func() bool { return strings.Contains(l.AgentLog(), "--result completed --attempt 1 -> 0") })
	kinds := strings.Join(kindsOf(l.triggerReceipts(t, x.Triggers[0].ID)), " ")
	if !strings.Contains(kinds, "trigger.waiting:waiting") || strings.Contains(kinds, "trigger.stopped") {
		t.Errorf("A's receipts: %s", kinds)
	}

	// tamq restarts: B, observed while it is away, waits for it.
	l.Env.Tamq(t, "stop")
	done := enginetest.Todo("A", "alpha")
	done.Status = "done"
	h.Put(enginetest.Workplan("W", "alpha", done, enginetest.Todo("B", "alpha")))
	testutil.WaitFor(t, "B waiting for tamq", func() bool {
		tr := l.Explain(t, "B").Triggers
		return len(tr) == 1 && tr[0].Waiting == "tamq_unreachable"
	})
	restarted := time.Now()
	l.Env.Tamq(t, "start", "--detach")
	defer func() {
		if t.Failed() {
			x := l.Explain(t, "B")
			b, _ := json.MarshalIndent(x, "", " ")
			st, _ := json.MarshalIndent(l.Status(t).Endpoints, "", " ")
			t.Logf("B: %s\nendpoints: %s\nengine log:\n%s\nagent log:\n%s", b, st, l.EngineLog("attach", "lease", "wake", "B"), l.AgentLog())
		}
	}()
	testutil.WaitFor(t, "B woken", func() bool { return strings.Contains(l.AgentLog(), "task=B") })
	t.Logf("B woken %s after tamq was started again", time.Since(restarted).Round(time.Millisecond))
	testutil.WaitFor(t, "B done", func() bool { return h.Task("B").Status == "done" })
}

func kindsOf(rs []api.Receipt) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Kind+":"+r.Status)
	}
	return out
}

// Blocked stays blocked: an agent that stops with a blocked checkpoint ends
// its lease at once, and nothing wakes the task again (not the engine's own
// checkpoint seen back in State Hub, not three looks more) until a person
// changes it in State Hub; then the prompt carries the checkpoint.
func TestBlockedStaysBlocked(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "alpha")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "cpblock complete", "alpha")
	h.Put(enginetest.Workplan("W", "alpha", enginetest.Todo("A", "alpha")))
	var l1 api.ExplainLease
	testutil.WaitFor(t, "A's lease stopped blocked", func() bool {
		x := l.Explain(t, "A")
		if len(x.Triggers) != 1 || len(x.Triggers[0].Leases) != 1 {
			return false
		}
		l1 = x.Triggers[0].Leases[0]
		return l1.State == "stopped"
	})
	if l1.Released != "blocked" || l1.StopReason != "blocked: checkpoint: human" {
		t.Errorf("the lease after a blocked checkpoint: %+v", l1)
	}
	if got := kindsOf(l.receipts(t, l1.LeaseID)); !slices.Contains(got, "checkpoint.recorded:checkpointed") || got[len(got)-1] != "lease.stopped:stopped" {
		t.Errorf("receipts %v", got)
	}
	// The agent also posts its checkpoint to State Hub, as docs/agents.md
	// shows: its next action resumes nothing, the lease ended by release.
	if status, b := h.Do(http.MethodPost, "/v1/checkpoints", contract.Checkpoint{Repo: "alpha", LeaseID: l1.LeaseID, TaskID: "A",
		Summary: "stuck: needs a human", NextAction: "ask the operator"}); status != http.StatusOK {
		t.Fatalf("post checkpoint: %d %s", status, b)
	}
	polls := l.Status(t).StateHub.Polls
	testutil.WaitFor(t, "three more looks", func() bool { return l.Status(t).StateHub.Polls >= polls+3 })
	if n := l.wakes(); n != 1 {
		t.Fatalf("%d wakes after the blocked checkpoint, want 1:\n%s", n, l.AgentLog())
	}
	if v := l.Explain(t, "A").Verdict; !strings.Contains(v, "woken again when State Hub changes the task") {
		t.Errorf("verdict %q", v)
	}
	// A person sets the task back to ready: woken, with the checkpoint.
	h.Patch("A", map[string]any{"status": "ready"})
	testutil.WaitFor(t, "A woken again", func() bool { return l.wakes() == 2 })
	testutil.WaitFor(t, "A done", func() bool { return h.Task("A").Status == "done" })
	ms := l.wakeMessages(t)
	if len(ms) != 2 || ms[0].Body == nil {
		t.Fatalf("wake messages %+v", ms)
	}
	for _, want := range []string{"): stuck: needs a human\n", "Next action you recorded: ask the operator\n", "It was blocked (human)"} {
		if !strings.Contains(*ms[0].Body, want) { // newest first
			t.Errorf("the second prompt lacks %q:\n%s", want, *ms[0].Body)
		}
	}
}

// One live lease per task, whoever asks; one lease per repo unless forced;
// explain says who woke it.
func TestOneLiveLeasePerTaskAndRepo(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 30\nlease_renew_interval_seconds = 60\n", "alpha")
	l.OpenAgent(t, "alpha", "ackstall")
	l.WaitAttached(t, "alpha", 1)
	first := l.Wake(t, "alpha", "--task", "T-1")
	if first.Lease == nil || first.Existing {
		t.Fatalf("first wake: %+v", first)
	}
	id := first.Lease.LeaseID
	testutil.WaitFor(t, "the lease held", func() bool { return l.lease(t, id).State == "checkpointed" })
	again := l.Wake(t, "alpha", "--task", "T-1")
	if again.Lease == nil || !again.Existing || again.Lease.LeaseID != id || again.Trigger.ID != first.Trigger.ID {
		t.Errorf("the same task woken again: %+v", again)
	}
	if r := l.Env.Engine(t, "wake", "alpha", "--task", "T-1"); !strings.Contains(r.Stdout, "already has lease "+id) {
		t.Errorf("wake of a task with a live lease, for people: %s", r)
	}
	if ms := l.wakeMessages(t); len(ms) != 1 {
		t.Errorf("%d prompts for one task, want 1", len(ms))
	}
	r := l.Env.Run(t, "coordination-engine", "wake", "alpha")
	if r.Status != 13 || !strings.Contains(r.Stderr, "has a live lease") || !strings.Contains(r.Stderr, "--force") {
		t.Errorf("a second lease for the repo without --force: %s", r)
	}
	forced := l.Wake(t, "alpha", "--force")
	if forced.Lease == nil || forced.Lease.LeaseID == id {
		t.Errorf("a second lease with --force: %+v", forced)
	}
	if v := l.Explain(t, "T-1").Verdict; !strings.HasPrefix(v, "woken by the operator (coordination-engine wake) at ") || !strings.Contains(v, "lease "+id) {
		t.Errorf("explain after a manual wake: %q", v)
	}
}

// One agent works on one task at a time: three actionable tasks of one
// repo get one lease at a time, in priority order, the others waiting with
// why.
func TestOneLeaseAtATimePerRepoInPriorityOrder(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "alpha")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "alpha")
	p1, p2, p3 := enginetest.Todo("P1", "alpha"), enginetest.Todo("P2", "alpha"), enginetest.Todo("P3", "alpha")
	p1.Priority, p2.Priority, p3.Priority = 1, 2, 3
	h.Put(enginetest.Workplan("W", "alpha", p3, p1, p2))
	for _, id := range []string{"P1", "P2", "P3"} {
		testutil.WaitFor(t, id+" done", func() bool { return h.Task(id).Status == "done" })
	}
	log := l.AgentLog()
	if i1, i2, i3 := strings.Index(log, "task=P1"), strings.Index(log, "task=P2"), strings.Index(log, "task=P3"); !(i1 >= 0 && i1 < i2 && i2 < i3) {
		t.Errorf("woken out of priority order:\n%s", log)
	}
	// Each lease was offered after the one before it ended.
	var prevEnd int64
	for _, id := range []string{"P1", "P2", "P3"} {
		x := l.Explain(t, id)
		var offered, completed int64
		for _, tr := range x.Triggers {
			for _, r := range l.triggerReceipts(t, tr.ID) {
				switch r.Kind {
				case "lease.offered":
					offered = r.ID
				case "lease.completed":
					completed = r.ID
				}
			}
		}
		if offered == 0 || offered < prevEnd {
			t.Errorf("%s's lease offered at receipt %d, before the lease before it ended (%d)", id, offered, prevEnd)
		}
		prevEnd = completed
	}
	var busy int
	for _, id := range []string{"P2", "P3"} {
		for _, r := range l.triggerReceipts(t, l.Explain(t, id).Triggers[0].ID) {
			if r.Kind == "trigger.waiting" && r.Reason == "window_busy" {
				busy++
			}
		}
	}
	if busy == 0 {
		t.Error("no task waited with window_busy")
	}
}

// A superseded attempt is told to stop: once attempt 2 is offered, attempt
// 1's commands exit 23 saying a newer attempt was offered, whether they
// name their attempt or not; attempt 2's prompt carries attempt 1's
// checkpoint.
func TestSupersededAttemptIsToldToStop(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 30\nlease_renew_interval_seconds = 1\nlease_missed_renewals = 1\nretry_backoff_seconds = [1]\n", "alpha")
	l.OpenAgent(t, "alpha", "ackstall stall")
	l.WaitAttached(t, "alpha", 1)
	id := l.Wake(t, "alpha").Lease.LeaseID
	testutil.WaitFor(t, "attempt 2 offered", func() bool {
		ls := l.lease(t, id)
		return ls.Attempt == 2 && ls.State == "offered"
	})
	testutil.WaitFor(t, "attempt 2's prompt", func() bool { return l.wakes() == 2 })
	for _, args := range [][]string{
		{"lease", "renew", id, "--attempt", "1"},
		{"lease", "renew", id},
		{"lease", "ack", id, "--attempt", "1"},
		{"checkpoint", "--lease", id, "--attempt", "1", "--summary", "late"},
		{"lease", "release", id, "--attempt", "1", "--result", "completed"},
	} {
		r := l.Env.Run(t, "coordination-engine", args...)
		if r.Status != 23 || !strings.Contains(r.Stderr, "attempt 2 was offered") || !strings.Contains(r.Stderr, "follow the prompt of attempt 2") {
			t.Errorf("%s: %s", strings.Join(args, " "), r)
		}
	}
	if !strings.Contains(l.AgentLog(), "wake "+id+" 2 checkpoint=yes") {
		t.Errorf("attempt 2's prompt does not carry attempt 1's checkpoint:\n%s", l.AgentLog())
	}
}

// No stale prompt is typed: a wake held by a dialog whose lease ends (its
// task done in State Hub meanwhile) is cancelled in tamq, and never written
// when the dialog closes. (Held, it waits without running out: issue 39.)
func TestHeldWakeOfAnEndedLeaseIsCancelled(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 1\nmax_attempts = 0\n"), "alpha")
	dialog := filepath.Join(l.Env.Root, "dialog")
	if err := os.WriteFile(dialog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.AgentEnv = "SCRIPTED_AGENT_DIALOG=" + dialog
	l.agents(t, "complete", "alpha")
	h.Put(enginetest.Workplan("W", "alpha", enginetest.Todo("A", "alpha")))
	var s api.TaskStanding
	testutil.WaitFor(t, "the wake held at the dialog", func() bool { s = l.standing(t, "A"); return s.Dialog != "" })
	id := s.LeaseID
	h.Patch("A", map[string]any{"status": "done"})
	testutil.WaitFor(t, "the lease stopped", func() bool { return l.lease(t, id).State == "stopped" })
	testutil.WaitFor(t, "the wake cancelled in tamq", func() bool {
		ms := l.wakeMessages(t)
		return len(ms) == 1 && ms[0].State == "cancelled"
	})
	if m := l.wakeMessages(t)[0]; !strings.Contains(m.LastError, "task_done") {
		t.Errorf("the cancelled wake's reason: %q", m.LastError)
	}
	// The dialog closes: the window takes messages again, never the wake.
	if err := os.Remove(dialog); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the dialog closed", func() bool { return strings.Contains(l.AgentLog(), "dialog closed") })
	l.Env.Tamq(t, "send", "To:alpha: after the dialog")
	testutil.WaitFor(t, "the next message delivered", func() bool {
		return strings.Contains(l.Tmux.Must(t, "capture-pane", "-p", "-t", "alpha"), "after the dialog")
	})
	if l.wakes() != 0 || strings.Contains(l.Tmux.Must(t, "capture-pane", "-p", "-S", "-", "-t", "alpha"), "lease ack "+id) {
		t.Errorf("the prompt of an ended lease was typed:\n%s", l.AgentLog())
	}
}

// Every attempt is judged again: a task gated after its first wake gets no
// attempt 2; the lease stops at the gate.
func TestTaskGatedAfterItsFirstWakeGetsNoSecondAttempt(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\nlease_renew_interval_seconds = 1\nlease_missed_renewals = 1\nretry_backoff_seconds = [1]\n"), "alpha")
	l.agents(t, "ackstall complete", "alpha")
	h.Put(enginetest.Workplan("W", "alpha", enginetest.Todo("A", "alpha")))
	var id string
	testutil.WaitFor(t, "A's lease held", func() bool {
		x := l.Explain(t, "A")
		if len(x.Triggers) == 0 || len(x.Triggers[0].Leases) == 0 {
			return false
		}
		id = x.Triggers[0].Leases[0].LeaseID
		return x.Triggers[0].Leases[0].State == "checkpointed"
	})
	h.Patch("A", map[string]any{"needs_human": true})
	testutil.WaitFor(t, "the lease stopped", func() bool { return l.lease(t, id).State == "stopped" })
	if ls := l.lease(t, id); !strings.HasPrefix(ls.StopReason, "human") {
		t.Errorf("the lease stopped with %q, want the human gate", ls.StopReason)
	}
	if n := l.wakes(); n != 1 {
		t.Errorf("%d wakes, want 1:\n%s", n, l.AgentLog())
	}
}

// Clearing a gate of a workplan (its needs_human) wakes the task it held,
// although the task's own revision did not change.
func TestClearingAWorkplanGateWakesItsTask(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "alpha")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "alpha")
	wp := enginetest.Workplan("W", "alpha", enginetest.Todo("A", "alpha"))
	wp.NeedsHuman = true
	h.Put(wp)
	testutil.WaitFor(t, "A stopped at the gate", func() bool {
		x := l.Explain(t, "A")
		return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped" && x.Triggers[0].GateReason == "human"
	})
	wp.NeedsHuman = false
	h.Put(wp)
	testutil.WaitFor(t, "A woken", func() bool { return strings.Contains(l.AgentLog(), "task=A") })
	testutil.WaitFor(t, "A done", func() bool { return h.Task("A").Status == "done" })
}
