package service_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// An agent tamq's broker cannot read (a home-made one: no screen rules, no
// status reports) is driven the spec's way: its prompt carries the ack and
// renew commands with the attempt, it runs them, and its task, observed in
// the reference State Hub, completes in one attempt though it works longer
// than the ack deadline and than a lease lives without a renewal. The
// broker acknowledges nothing for it.
func TestAnAgentTamqCannotReadAcksAndRenewsFromItsPrompt(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 2\nlease_renew_interval_seconds = 1\nlease_missed_renewals = 2\nperspective_destination = \"~/halls/net-kingdom.md\"\n"), "net-kingdom")
	hold := filepath.Join(l.Env.Root, "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.AgentEnv = "SCRIPTED_AGENT_HOLD='" + hold + "' SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "follow", "net-kingdom")
	h.Put(enginetest.Workplan("W-1", "net-kingdom", contract.Task{ID: "A", Title: "task A", Status: "todo", Repo: "net-kingdom"}))

	testutil.WaitFor(t, "the agent to be woken", func() bool { return strings.Contains(l.AgentLog(), "wake ") })
	// Working three times as long as the ack deadline and a lease's hold:
	// ten renewals the engine took, 300 ms apart, while the one attempt
	// stays held.
	testutil.WaitFor(t, "ten renewals by the agent", func() bool {
		leases := l.Explain(t, "A").Triggers[0].Leases
		if len(leases) != 1 || leases[0].Attempt != 1 || !slices.Contains([]string{"offered", "acknowledged", "running"}, leases[0].State) {
			t.Fatalf("the work was offered again while the agent was on it: %+v\nagent:\n%s", leases, l.AgentLog())
		}
		return strings.Count(l.AgentLog(), "run lease renew "+leases[0].LeaseID+" --attempt 1 -> 0") >= 10
	})
	os.Remove(hold)
	testutil.WaitFor(t, "A done in State Hub and its lease completed", func() bool {
		return h.Task("A").Status == "done" && l.Explain(t, "A").Triggers[0].Leases[0].State == "completed"
	})
	ls := l.Explain(t, "A").Triggers[0].Leases
	if len(ls) != 1 || ls[0].Attempt != 1 {
		t.Errorf("A took more than one attempt: %+v", ls)
	}
	log := l.AgentLog()
	if n := strings.Count(log, "wake "); n != 1 {
		t.Errorf("the agent was woken %d times:\n%s", n, log)
	}
	if !strings.Contains(log, "run lease ack "+ls[0].LeaseID+" --attempt 1 -> 0") || !strings.Contains(log, "run lease release "+ls[0].LeaseID+" --result completed --attempt 1 -> 0") {
		t.Errorf("the agent's ack or release failed:\n%s", log)
	}
	m := l.tamqMessage(t, ls[0].LocalLeaseID)
	if m.Body == nil || strings.Contains(*m.Body, "tamq acknowledges") || !strings.Contains(*m.Body, "lease renew "+ls[0].LeaseID+" --attempt 1") {
		t.Errorf("the prompt does not tell the agent to acknowledge and renew:\n%v", m.Body)
	}
	// The configured hall-of-helix destination fills the fourth template.
	if m.Body == nil || !strings.Contains(*m.Body, "perspective entry to the configured hall-of-helix destination: ~/halls/net-kingdom.md.") {
		t.Errorf("the prompt does not name the perspective destination:\n%v", m.Body)
	}
	for _, r := range l.receipts(t, ls[0].LeaseID) {
		if r.Kind == "lease.acknowledged" && r.Detail["by"] != "agent" {
			t.Errorf("the ack is recorded as %v's, not the agent's", r.Detail["by"])
		}
	}
}

// A lease's later attempt wakes its agent with the reason retry_due (spec
// section 2), the first with the trigger's own.
func TestALaterAttemptIsWokenAsRetryDue(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 2\nlease_renew_interval_seconds = 1\nlease_missed_renewals = 1\nretry_backoff_seconds = [1]\n", "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "ackstall complete")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom", "--task", "T-1").Lease.LeaseID
	testutil.WaitFor(t, "the second attempt to complete", func() bool { return l.lease(t, id).State == "completed" })
	wakes := l.Explain(t, "T-1").Triggers[0].Leases[0].Wakes
	if len(wakes) != 2 {
		t.Fatalf("wakes: %+v", wakes)
	}
	for i, want := range []string{": task_actionable (task T-1,", ": retry_due (task T-1,"} {
		if m := l.tamqMessage(t, wakes[i].MessageID); m.Body == nil || !strings.Contains(*m.Body, want) {
			t.Errorf("attempt %d's prompt does not say %q:\n%v", i+1, want, m.Body)
		}
	}
}

// A wake written, then cancelled when its lease stopped (its attempts ran
// out), stays cancelled in tamq's history when an ack for it comes late (a
// broker attaching again acknowledges for its agent): the engine refuses
// the ack and history shows what the engine decided, not "acknowledged".
func TestALateAckLeavesACancelledWakeCancelled(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 2\nmax_attempts = 0\n", "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "stall")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom", "--task", "T-1").Lease.LeaseID
	testutil.WaitFor(t, "the lease to stop", func() bool { return l.lease(t, id).State == "stopped" })
	msg := l.lease(t, id).LocalLeaseID
	testutil.WaitFor(t, "the wake to be cancelled in tamq", func() bool { return l.tamqMessage(t, msg).State == "cancelled" })
	if r := l.Env.Run(t, "coordination-engine", "lease", "ack", id, "--attempt", "1"); r.Status == 0 {
		t.Fatalf("an ack of a stopped lease was taken: %s", r)
	}
	if m := l.tamqMessage(t, msg); m.State != "cancelled" {
		t.Errorf("tamq's history shows the cancelled wake as %s", m.State)
	}
}
