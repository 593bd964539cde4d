package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// An agent under tamq's broker runs no ack or renew of its own: the broker
// sees it take the prompt and work (its screen says a turn runs), and tamq
// acknowledges and renews the lease for it, recorded as the broker's. The
// lease outlives many renewal intervals while the agent works, then ends as
// the agent released it.
func TestTheBrokerAcknowledgesAndRenewsWhileTheAgentWorks(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 10
lease_renew_interval_seconds = 1
lease_missed_renewals = 2
`, "net-kingdom")
	hold := l.openHeldAgent(t, "net-kingdom", "work workask")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom", "--task", "T-1").Lease.LeaseID
	held := func(ls api.Lease) bool { return ls.State == "running" || ls.State == "checkpointed" }
	testutil.WaitFor(t, "the broker to acknowledge", func() bool { return held(l.lease(t, id)) })
	// Working twice as long as an unrenewed lease lives.
	begun := l.lease(t, id).UpdatedAt
	testutil.WaitFor(t, "two holds' worth of work", func() bool {
		ls := l.lease(t, id)
		if !held(ls) {
			t.Fatalf("the lease ended while its agent worked: %+v", ls)
		}
		return ls.UpdatedAt.Sub(begun) >= 4*time.Second
	})
	os.Remove(hold)
	testutil.WaitFor(t, "the lease to complete", func() bool { return l.lease(t, id).State == "completed" })
	if log := l.AgentLog(); strings.Contains(log, "run lease ack") || strings.Contains(log, "run lease renew") {
		t.Errorf("the agent ran a lease command the broker runs:\n%s", log)
	}
	by := map[string]any{}
	for _, r := range l.receipts(t, id) {
		if r.Kind == "lease.acknowledged" || r.Kind == "lease.running" {
			by[r.Kind] = r.Detail["by"]
		}
	}
	if by["lease.acknowledged"] != "broker" {
		t.Errorf("the ack is not recorded as the broker's: %v", by)
	}

	// The next task's agent asks for a permission: the broker renews the
	// lease all the while, and status says a person is needed in that
	// window; once answered, the dialog leaves status.
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	id = l.Wake(t, "net-kingdom", "--task", "T-2").Lease.LeaseID
	testutil.WaitFor(t, "status to show the dialog", func() bool {
		ds := l.Status(t).Leases.AtDialog
		return len(ds) == 1 && ds[0].LeaseID == id && strings.HasPrefix(ds[0].Dialog, "net-kingdom: ")
	})
	// Not healthy (exit 8): no State Hub runs here. The dialog shows all the same.
	if r := l.Env.Run(t, "coordination-engine", "status"); !strings.Contains(r.Stdout, "lease "+id+" waits for a person: dialog in window net-kingdom: ") {
		t.Errorf("status does not show the dialog:\n%s", r.Stdout)
	}
	os.Remove(hold)
	testutil.WaitFor(t, "the second lease to complete", func() bool { return l.lease(t, id).State == "completed" })
	if ds := l.Status(t).Leases.AtDialog; len(ds) != 0 {
		t.Errorf("a completed lease still shows at a dialog: %+v", ds)
	}
}

// An agent back at its idle prompt without releasing is not renewed: the
// lease expires, and the next attempt's prompt carries its checkpoint.
func TestAnIdleAgentsLeaseExpiresAndTheNextAttemptResumes(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 10
lease_renew_interval_seconds = 1
lease_missed_renewals = 2
retry_backoff_seconds = [1]
max_attempts = 1
`, "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "workidle")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom", "--task", "T-1").Lease.LeaseID
	testutil.WaitFor(t, "the second attempt", func() bool { return strings.Contains(l.AgentLog(), "wake "+id+" 2 checkpoint=yes") })
	got := strings.Join(kinds(l.receipts(t, id)), " ")
	for _, want := range []string{"lease.acknowledged", "lease.retry_wait", "lease.reoffered"} {
		if !strings.Contains(got, want) {
			t.Errorf("receipts lack %s: %s", want, got)
		}
	}
}

// tamq restarting while an agent works does not let its lease run out: the
// broker attaches to the new service, which takes up the window's wake and
// renews its lease again.
func TestTheLeaseOfAnAgentAtWorkOutlivesATamqRestart(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 10
lease_renew_interval_seconds = 2
lease_missed_renewals = 3
`, "net-kingdom")
	hold := l.openHeldAgent(t, "net-kingdom", "work")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom", "--task", "T-1").Lease.LeaseID
	testutil.WaitFor(t, "the broker to acknowledge", func() bool { return l.lease(t, id).State == "checkpointed" })
	l.Env.Tamq(t, "stop")
	l.Env.Tamq(t, "start", "--detach")
	// Two holds after the restart, the lease still lives.
	restarted := time.Now()
	testutil.WaitFor(t, "two holds' worth of work after the restart", func() bool {
		if ls := l.lease(t, id); ls.State != "checkpointed" && ls.State != "running" {
			t.Fatalf("the lease ended while its agent worked: %+v", ls)
		}
		return time.Since(restarted) > 12*time.Second
	})
	os.Remove(hold)
	testutil.WaitFor(t, "the lease to complete", func() bool { return l.lease(t, id).State == "completed" })
}

// openHeldAgent opens repo's window running the scripted agent with plan,
// whose work parts work until the file it returns is removed (it exists
// now, and again whenever the test writes it).
func (l *loop) openHeldAgent(t *testing.T, repo, plan string) (hold string) {
	t.Helper()
	hold = filepath.Join(l.Env.Root, "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.AgentEnv = "SCRIPTED_AGENT_HOLD='" + hold + "'"
	l.OpenAgent(t, repo, plan)
	l.WaitAttached(t, repo, 1)
	return hold
}
