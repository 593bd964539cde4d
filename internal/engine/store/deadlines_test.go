package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/receipt"
)

// The lease clock's side of the store (Deadlines): expiry, retries due,
// sweeps, and what survives a restart.

// TestStoreRetries follows a lease no agent answers through expiry, backoff
// and every attempt to its stop, with the receipts of each step.
func TestStoreRetries(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	l := offered(t, s, "1")
	backoffs := []time.Duration{5 * time.Second, 15 * time.Second}
	for attempt := 1; ; attempt++ {
		if due, ok, err := s.Deadlines.NextDue(ctx); err != nil || !ok || !due.Equal(l.ExpiresAt) {
			t.Fatalf("attempt %d: next due %v, %v, %v; want %v", attempt, due, ok, err, l.ExpiresAt)
		}
		if pending := must[[]lease.Lease](t)(s.Deadlines.PendingWakes(ctx)); len(pending) != 1 || pending[0] != l {
			t.Fatalf("attempt %d: pending wakes %+v", attempt, pending)
		}
		must[lease.Lease](t)(s.Leases.RecordWake(ctx, l.ID, attempt, WakeRecord{Capability: "resumed", MessageID: "m" + string(rune('0'+attempt))}))
		if got := must[[]lease.Lease](t)(s.Deadlines.ExpireDue(ctx, l.ExpiresAt.Add(-time.Millisecond), timing)); len(got) != 0 {
			t.Fatalf("attempt %d expired before its deadline", attempt)
		}
		c.Advance(l.ExpiresAt.Sub(c.Now()))
		mark := lastReceipt(t, s)
		expired := must[[]lease.Lease](t)(s.Deadlines.ExpireDue(ctx, c.Now(), timing))
		if len(expired) != 1 {
			t.Fatalf("attempt %d: expired %+v", attempt, expired)
		}
		l = expired[0]
		rs := receiptsSince(t, s, mark)
		if attempt == 3 {
			if l.State != lease.Stopped || l.StopReason != "exhausted" || l.Attempt != 3 {
				t.Fatalf("after the last attempt %+v", l)
			}
			if len(rs) != 1 || rs[0].Kind != KindLeaseStopped || rs[0].Reason != "exhausted" {
				t.Errorf("receipts %+v", rs)
			}
			break
		}
		wantNext := c.Now().Add(backoffs[attempt-1])
		if l.State != lease.RetryWait || l.Attempt != attempt+1 || !l.NextRetryAt.Equal(wantNext) || l.LocalLeaseID != "" {
			t.Fatalf("after attempt %d: %+v", attempt, l)
		}
		if len(rs) != 1 || rs[0].Kind != KindLeaseRetryWait || !rs[0].NextRetryAt.Equal(wantNext) || rs[0].Attempt != attempt+1 ||
			rs[0].Reason != "not acknowledged in time" || rs[0].Detail["ended_attempt"] != float64(attempt) {
			t.Errorf("receipts %+v", rs)
		}
		if due, ok, _ := s.Deadlines.NextDue(ctx); !ok || !due.Equal(wantNext) {
			t.Errorf("next due %v, want %v", due, wantNext)
		}
		if got := must[[]lease.Lease](t)(reofferDue(t, s, wantNext.Add(-time.Millisecond), timing)); len(got) != 0 {
			t.Fatalf("reoffered before it was due")
		}
		c.Advance(wantNext.Sub(c.Now()))
		reoffered := must[[]lease.Lease](t)(reofferDue(t, s, c.Now(), timing))
		if len(reoffered) != 1 || reoffered[0].State != lease.Offered || reoffered[0].Attempt != attempt+1 ||
			!reoffered[0].ExpiresAt.Equal(c.Now().Add(30*time.Second)) || reoffered[0].WakeOutcome != "" {
			t.Fatalf("reoffered %+v", reoffered)
		}
		l = reoffered[0]
	}
	if tr := getTrigger(t, s, l.TriggerID); tr.State != lease.TriggerStopped {
		t.Errorf("trigger %s", tr.State)
	}
	if _, ok, err := s.Deadlines.NextDue(ctx); ok || err != nil {
		t.Errorf("something due after the stop: %v", err)
	}
	want := []string{KindTriggerObserved, KindLeaseOffered,
		KindWakeSent, KindLeaseRetryWait, KindLeaseReoffered,
		KindWakeSent, KindLeaseRetryWait, KindLeaseReoffered,
		KindWakeSent, KindLeaseStopped}
	rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{TriggerID: l.TriggerID}))
	if !slices.Equal(kinds(rs), want) {
		t.Errorf("receipts\n%v\nwant\n%v", kinds(rs), want)
	}
	// A new lease for the trigger starts a fresh budget.
	again := must[lease.Lease](t)(s.Leases.Offer(ctx, l.TriggerID, "", "", timing))
	if again.Attempt != 1 || again.ID == l.ID {
		t.Errorf("a new lease %+v", again)
	}
}

// TestStoreSweepsLeaveOthers: the sweeps touch only what is due.
func TestStoreSweepsLeaveOthers(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	early := offered(t, s, "1")
	must[lease.Lease](t)(s.Leases.RecordWake(ctx, early.ID, 1, WakeRecord{Capability: "resumed", MessageID: "m1"}))
	c.Advance(10 * time.Second)
	late := offered(t, s, "2")
	held := offered(t, s, "3")
	must[lease.Lease](t)(s.Leases.Ack(ctx, held.ID, 0, Who{By: "agent"}, timing))
	done := offered(t, s, "4")
	must[lease.Lease](t)(s.Leases.Ack(ctx, done.ID, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Release(ctx, done.ID, "completed", "", 0, Who{By: "agent"}, timing))
	expired := must[[]lease.Lease](t)(s.Deadlines.ExpireDue(ctx, early.ExpiresAt, timing))
	if len(expired) != 1 || expired[0].ID != early.ID {
		t.Fatalf("expired %+v", expired)
	}
	for _, l := range []lease.Lease{late, held, done} {
		if got := getLease(t, s, l.ID); got.State == lease.RetryWait {
			t.Errorf("lease %s expired too", l.ID)
		}
	}
	// The retry (at 35 s) comes before the other ack deadline (40 s).
	if due, _, _ := s.Deadlines.NextDue(ctx); !due.Equal(expired[0].NextRetryAt) || !due.Before(late.ExpiresAt) {
		t.Errorf("next due %v, want the retry at %v", due, expired[0].NextRetryAt)
	}
	c.Advance(expired[0].NextRetryAt.Sub(c.Now()))
	if got := must[[]lease.Lease](t)(reofferDue(t, s, expired[0].NextRetryAt, timing)); len(got) != 1 || got[0].ID != early.ID {
		t.Errorf("reoffered %+v", got)
	}
}

// TestStoreRecovery: leases, deadlines and pending wakes survive closing
// and opening the database again, and the sweeps go on from there.
func TestStoreRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := paths.Paths{Database: dir + "/coordination.sqlite3", BackupDir: dir + "/backups"}
	c := clock.NewFake(start)
	ctx := context.Background()
	s, err := Open(ctx, p, 0, c)
	if err != nil {
		t.Fatal(err)
	}
	s.PolicyProfile, s.ConfigVersion = "default@1", "cfg"
	waiting := offered(t, s, "1") // its wake not yet sent
	working := offered(t, s, "2")
	must[lease.Lease](t)(s.Leases.RecordWake(ctx, working.ID, 1, WakeRecord{Capability: "resumed", MessageID: "m1"}))
	c.Advance(time.Second)
	working = must[lease.Lease](t)(s.Leases.Ack(ctx, working.ID, 0, Who{By: "agent"}, timing))
	c.Advance(time.Second)
	working = must[lease.Lease](t)(checkpoint(progress)(s, working.ID))
	receipts := lastReceipt(t, s)
	if err := s.DB.Close(); err != nil {
		t.Fatal(err)
	}

	c.Advance(time.Second)
	s, err = Open(ctx, p, 0, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DB.Close() })
	if got := getLease(t, s, working.ID); got != working {
		t.Errorf("after reopening\n%+v\nwas\n%+v", got, working)
	}
	if pending := must[[]lease.Lease](t)(s.Deadlines.PendingWakes(ctx)); len(pending) != 1 || pending[0] != waiting {
		t.Errorf("pending wakes %+v", pending)
	}
	if due, ok, _ := s.Deadlines.NextDue(ctx); !ok || !due.Equal(waiting.ExpiresAt) {
		t.Errorf("next due %v, want %v", due, waiting.ExpiresAt)
	}
	if cp := must[*lease.Checkpoint](t)(s.Checkpoints.LatestCheckpoint(ctx, working.ID)); cp == nil || cp.Summary != progress.Summary {
		t.Errorf("checkpoint %+v", cp)
	}
	if n := lastReceipt(t, s); n != receipts {
		t.Errorf("receipts %d, were %d", n, receipts)
	}
	// The engine was down past both deadlines: one sweep ends both
	// attempts. The one whose wake never reached tamq is withdrawn (due at
	// once, nothing spent); the other waits out its backoff.
	c.Advance(working.ExpiresAt.Sub(c.Now()))
	expired := must[[]lease.Lease](t)(s.Deadlines.ExpireDue(ctx, c.Now(), timing))
	if len(expired) != 2 || expired[0].ID != waiting.ID || expired[1].ID != working.ID {
		t.Fatalf("expired %+v", expired)
	}
	if l := expired[0]; l.State != lease.RetryWait || l.Attempt != 2 || l.MaxRetries != waiting.MaxRetries+1 || !l.NextRetryAt.Equal(c.Now()) {
		t.Errorf("withdrawn %+v", l)
	}
	if l := expired[1]; l.State != lease.RetryWait || l.Attempt != 2 || l.MaxRetries != working.MaxRetries || !l.NextRetryAt.Equal(c.Now().Add(5*time.Second)) {
		t.Errorf("expired %+v", l)
	}
	noContentInReceipts(t, s, progress.Summary, progress.NextAction)
}

// reofferDue offers again every lease whose next attempt is due at now, as
// the engine's clock does once it has judged them.
func reofferDue(t *testing.T, s *Store, now time.Time, tm lease.Timing) ([]lease.Lease, error) {
	t.Helper()
	due, err := s.Deadlines.DueRetries(context.Background(), now)
	if err != nil {
		return nil, err
	}
	var out []lease.Lease
	for _, l := range due {
		l, err := s.Leases.Reoffer(context.Background(), l.ID, "", tm)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
