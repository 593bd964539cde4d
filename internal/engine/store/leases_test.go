package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
)

func TestStoreAddTrigger(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	first, inserted, err := s.Triggers.AddTrigger(ctx, newTrigger("1"))
	if err != nil || !inserted || first.ID == "" || first.State != lease.TriggerPending || !first.ObservedAt.Equal(start) {
		t.Fatalf("first: %+v, %v, %v", first, inserted, err)
	}
	if got := getTrigger(t, s, first.ID); got != first {
		t.Errorf("stored\n%+v\nwant\n%+v", got, first)
	}
	c.Advance(time.Second)
	again := newTrigger("1")
	again.Reason = lease.RetryDue // a later observation of the same key
	got, inserted, err := s.Triggers.AddTrigger(ctx, again)
	if err != nil || inserted || got != first {
		t.Errorf("the same key again: %+v, %v, %v", got, inserted, err)
	}
	if _, inserted, _ := s.Triggers.AddTrigger(ctx, newTrigger("2")); !inserted {
		t.Error("a new revision was not a new trigger")
	}
	other := newTrigger("1")
	other.TargetRepo = "railiance"
	if _, inserted, _ := s.Triggers.AddTrigger(ctx, other); !inserted {
		t.Error("another repo was not a new trigger")
	}
	bad := newTrigger("3")
	bad.Source = "email"
	if _, _, err := s.Triggers.AddTrigger(ctx, bad); !errs.Is(err, errs.BadRequest) {
		t.Errorf("unknown source: %v", err)
	}
	// The new revision superseded the first one, which was still pending;
	// the other repo's trigger is its own.
	if got := getTrigger(t, s, first.ID); got.State != lease.TriggerSuperseded {
		t.Errorf("first after a new revision: %s", got.State)
	}
	rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{}))
	if got := kinds(rs); !slices.Equal(got, []string{KindTriggerObserved, KindTriggerSuperseded, KindTriggerObserved, KindTriggerObserved}) {
		t.Errorf("receipt kinds %v", got)
	}
	if len(rs) != 4 || rs[0].Kind != KindTriggerObserved || rs[0].TriggerID != first.ID || rs[0].Status != "pending" ||
		rs[0].Reason != "task_actionable" || rs[0].PolicyProfile != "default@1" || rs[0].ConfigVersion != "cfg" ||
		rs[0].Detail["source_id"] != "T-1" {
		t.Errorf("receipts %+v", rs)
	}
	if _, err := s.Triggers.Trigger(ctx, "ghost"); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown trigger: %v", err)
	}
}

func TestStoreStopTrigger(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	tr := must[lease.Trigger](t)(func() (lease.Trigger, error) {
		tr, _, err := s.Triggers.AddTrigger(ctx, newTrigger("1"))
		return tr, err
	}())
	mark := lastReceipt(t, s)
	if err := s.Triggers.StopTrigger(ctx, tr.ID, "policy", "destructive work needs a human"); err != nil {
		t.Fatal(err)
	}
	got := getTrigger(t, s, tr.ID)
	if got.State != lease.TriggerStopped || got.GateReason != "policy" {
		t.Errorf("stopped trigger %+v", got)
	}
	rs := receiptsSince(t, s, mark)
	if len(rs) != 1 || rs[0].Kind != KindTriggerStopped || rs[0].Status != "stopped" || rs[0].Reason != "policy: destructive work needs a human" {
		t.Errorf("receipts %+v", rs)
	}

	l := offered(t, s, "2")
	if err := s.Triggers.StopTrigger(ctx, l.TriggerID, "policy", "x"); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), l.ID) {
		t.Errorf("a trigger with a live lease: %v", err)
	}
	if err := s.Triggers.StopTrigger(ctx, "ghost", "policy", "x"); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown trigger: %v", err)
	}
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Release(ctx, l.ID, "completed", "", 0, Who{By: "agent"}, timing))
	if err := s.Triggers.StopTrigger(ctx, l.TriggerID, "policy", "x"); !errs.Is(err, errs.Conflict) {
		t.Errorf("a completed trigger: %v", err)
	}
}

func TestStoreOffer(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	ep := must[lease.Endpoint](t)(s.Endpoints.Attach(ctx, lease.Endpoint{TamqEndpointID: "tmux-amq-1", TmuxSocket: "/tmp/tmux-0/default", Proto: "1"}, nil))
	tr, _, err := s.Triggers.AddTrigger(ctx, newTrigger("1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	mark := lastReceipt(t, s)
	l, err := s.Leases.Offer(ctx, tr.ID, ep.ID, "", timing)
	if err != nil {
		t.Fatal(err)
	}
	want := lease.Lease{ID: l.ID, TriggerID: tr.ID, Owner: lease.Owner, TargetRepo: "net", State: lease.Offered, Attempt: 1, MaxRetries: 2,
		AcquiredAt: c.Now(), ExpiresAt: c.Now().Add(30 * time.Second), CoordinationEndpointID: ep.ID,
		PolicyProfile: "default@1", ConfigVersion: "cfg", UpdatedAt: c.Now()}
	if l != want || getLease(t, s, l.ID) != want {
		t.Errorf("offered\n%+v\nstored\n%+v\nwant\n%+v", l, getLease(t, s, l.ID), want)
	}
	if got := getTrigger(t, s, tr.ID); got.State != lease.TriggerLeased {
		t.Errorf("trigger %s", got.State)
	}
	rs := receiptsSince(t, s, mark)
	if len(rs) != 1 || rs[0].Kind != KindLeaseOffered || rs[0].LeaseID != l.ID || rs[0].TriggerID != tr.ID || rs[0].Attempt != 1 ||
		rs[0].CoordinationEndpointID != ep.ID || rs[0].Status != "offered" || rs[0].PolicyProfile != "default@1" {
		t.Errorf("receipts %+v", rs)
	}

	other, _, err := s.Triggers.AddTrigger(ctx, newTrigger("2"))
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name      string
		trigger   string
		endpoint  string
		code      errs.Code
		mentioned string
	}{
		{"a second live lease", tr.ID, "", errs.Conflict, l.ID},
		{"an unknown trigger", "ghost", "", errs.NotFound, "ghost"},
		{"an endpoint never granted", other.ID, "ce-ghost", errs.NotFound, "ce-ghost"},
	}
	for _, r := range refused {
		mark := lastReceipt(t, s)
		if _, err := s.Leases.Offer(ctx, r.trigger, r.endpoint, "", timing); !errs.Is(err, r.code) || !strings.Contains(err.Error(), r.mentioned) {
			t.Errorf("%s: %v", r.name, err)
		}
		if rs := receiptsSince(t, s, mark); len(rs) != 0 {
			t.Errorf("%s: receipts written %v", r.name, kinds(rs))
		}
	}
	if n := must[map[string]int](t)(s.LeaseLists.LeaseCounts(ctx)); n["offered"] != 1 {
		t.Errorf("counts %v", n)
	}

	// A stopped lease frees its trigger; a completed one ends it.
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Release(ctx, l.ID, "blocked", "human", 0, Who{By: "agent"}, timing))
	second := must[lease.Lease](t)(s.Leases.Offer(ctx, tr.ID, "", "", timing))
	must[lease.Lease](t)(s.Leases.Ack(ctx, second.ID, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Release(ctx, second.ID, "completed", "", 0, Who{By: "agent"}, timing))
	if _, err := s.Leases.Offer(ctx, tr.ID, "", "", timing); !errs.Is(err, errs.Conflict) {
		t.Errorf("a completed trigger: %v", err)
	}
}

// op is one store call on a lease.
type op func(s *Store, id string) (lease.Lease, error)

var (
	ack op = func(s *Store, id string) (lease.Lease, error) {
		return s.Leases.Ack(context.Background(), id, 0, Who{By: "agent"}, timing)
	}
	renew op = func(s *Store, id string) (lease.Lease, error) {
		return s.Leases.Renew(context.Background(), id, 0, Who{By: "agent"}, timing)
	}
)

func release(result, reason string) op {
	return func(s *Store, id string) (lease.Lease, error) {
		return s.Leases.Release(context.Background(), id, result, reason, 0, Who{By: "agent"}, timing)
	}
}

func checkpoint(c lease.Checkpoint) op {
	return func(s *Store, id string) (lease.Lease, error) {
		c.LeaseID = id
		return s.Leases.Checkpoint(context.Background(), c, 0, Who{By: "agent"}, timing)
	}
}

// driven is a store with one offered lease taken through the steps before,
// a second apart, and its clock moved on by after.
func driven(t *testing.T, before []op, after time.Duration) (*Store, *clock.Fake, lease.Lease) {
	t.Helper()
	s, c := newStore(t)
	l := offered(t, s, "1")
	for _, step := range before {
		c.Advance(time.Second)
		must[lease.Lease](t)(step(s, l.ID))
	}
	c.Advance(after)
	return s, c, l
}

var progress = lease.Checkpoint{TaskID: "T-1", Summary: "SUMMARY: refactored the parser", FilesChanged: []string{"a.go", "b.go"},
	NextAction: "NEXT: run the e2e tests"}

// stuck is a checkpoint of an agent that cannot go on without a human.
var stuck = lease.Checkpoint{TaskID: "T-1", Summary: "SUMMARY: needs the production credential", BlockedReason: lease.BlockedHuman}

func TestStoreLeaseTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		before   []op          // applied a second apart from start
		after    time.Duration // from the last step to the one tested
		step     op
		state    lease.State
		expires  time.Duration // from the step tested; 0: unchanged
		attempt  int
		receipts []string // kinds written by the step
		trigger  lease.TriggerState
	}{
		{"ack", nil, time.Second, ack, lease.Acknowledged, held, 1, []string{KindLeaseAcknowledged}, lease.TriggerLeased},
		{"a repeated ack", []op{ack}, time.Second, ack, lease.Acknowledged, 0, 1, nil, lease.TriggerLeased},
		{"the first renewal", []op{ack}, time.Second, renew, lease.Running, held, 1, []string{KindLeaseRunning}, lease.TriggerLeased},
		{"a later renewal", []op{ack, renew}, time.Minute, renew, lease.Running, held, 1, nil, lease.TriggerLeased},
		{"a renewal after a checkpoint", []op{ack, checkpoint(progress)}, time.Minute, renew, lease.Checkpointed, held, 1, nil, lease.TriggerLeased},
		{"a checkpoint", []op{ack, renew}, time.Second, checkpoint(progress), lease.Checkpointed, held, 1, []string{KindCheckpointRecorded}, lease.TriggerLeased},
		{"a checkpoint when just acknowledged", []op{ack}, time.Second, checkpoint(progress), lease.Checkpointed, held, 1, []string{KindCheckpointRecorded}, lease.TriggerLeased},
		{"completed", []op{ack, renew}, time.Second, release("completed", "merged"), lease.Completed, 0, 1, []string{KindLeaseCompleted}, lease.TriggerCompleted},
		{"failed", []op{ack}, time.Second, release("failed", "tests broke"), lease.RetryWait, 0, 2, []string{KindLeaseRetryWait}, lease.TriggerLeased},
		{"blocked", []op{ack}, time.Second, release("blocked", "human"), lease.Stopped, 0, 1, []string{KindLeaseStopped}, lease.TriggerStopped},
		{"a checkpoint with a blocked reason stops it", []op{ack, renew}, time.Second, checkpoint(stuck), lease.Stopped, held, 1,
			[]string{KindCheckpointRecorded, KindLeaseStopped}, lease.TriggerStopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c, l := driven(t, tt.before, tt.after)
			before, mark := getLease(t, s, l.ID), lastReceipt(t, s)
			got, err := tt.step(s, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored := getLease(t, s, l.ID); stored != got {
				t.Errorf("returned\n%+v\nstored\n%+v", got, stored)
			}
			if got.State != tt.state || got.Attempt != tt.attempt {
				t.Errorf("%s attempt %d, want %s attempt %d", got.State, got.Attempt, tt.state, tt.attempt)
			}
			wantExpires := before.ExpiresAt
			if tt.expires != 0 {
				wantExpires = c.Now().Add(tt.expires)
			}
			if !got.ExpiresAt.Equal(wantExpires) {
				t.Errorf("expires %v, want %v", got.ExpiresAt, wantExpires)
			}
			if tt.receipts == nil && tt.expires == 0 && got != before {
				t.Errorf("a step that changes nothing changed\n%+v\nwas\n%+v", got, before)
			}
			rs := receiptsSince(t, s, mark)
			if !slices.Equal(kinds(rs), append([]string{}, tt.receipts...)) {
				t.Errorf("receipts %v, want %v", kinds(rs), tt.receipts)
			}
			for i, r := range rs {
				status := string(got.State)
				if i < len(rs)-1 {
					status = string(lease.Checkpointed) // the checkpoint's own receipt, before the stop
				}
				if r.LeaseID != l.ID || r.TriggerID != l.TriggerID || r.Status != status || r.Attempt != got.Attempt ||
					!r.At.Equal(c.Now()) || r.PolicyProfile != "default@1" || r.ConfigVersion != "cfg" {
					t.Errorf("receipt %+v", r)
				}
			}
			if tr := getTrigger(t, s, l.TriggerID); tr.State != tt.trigger {
				t.Errorf("trigger %s, want %s", tr.State, tt.trigger)
			}
		})
	}
}

// TestStoreRefusedLeaseSteps: a step the rules refuse changes nothing and
// writes no receipt.
func TestStoreRefusedLeaseSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		before []op
		after  time.Duration // from the last step
		step   op
		code   errs.Code
	}{
		{"ack past the ack deadline", nil, 30 * time.Second, ack, errs.LeaseExpired},
		{"renew an offered lease", nil, time.Second, renew, errs.LeaseState},
		{"renew past the deadline", []op{ack}, held, renew, errs.LeaseExpired},
		{"checkpoint an offered lease", nil, time.Second, checkpoint(progress), errs.LeaseState},
		{"checkpoint without a summary", []op{ack}, time.Second, checkpoint(lease.Checkpoint{FilesChanged: []string{"a.go"}}), errs.BadRequest},
		{"release an offered lease", nil, time.Second, release("completed", ""), errs.LeaseState},
		{"release with an unknown result", []op{ack}, time.Second, release("done", ""), errs.BadRequest},
		{"ack a completed lease", []op{ack, release("completed", "")}, time.Second, ack, errs.LeaseState},
		{"release a stopped lease", []op{ack, release("blocked", "human")}, time.Second, release("completed", ""), errs.LeaseState},
		{"ack a lease waiting to retry", []op{ack, release("failed", "x")}, time.Second, ack, errs.LeaseExpired},
		{"checkpoint a lease waiting to retry", []op{ack, release("failed", "x")}, time.Second, checkpoint(progress), errs.LeaseExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, l := driven(t, tt.before, tt.after)
			before, mark := getLease(t, s, l.ID), lastReceipt(t, s)
			if _, err := tt.step(s, l.ID); !errs.Is(err, tt.code) {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if got := getLease(t, s, l.ID); got != before {
				t.Errorf("changed:\n%+v\nwas\n%+v", got, before)
			}
			if rs := receiptsSince(t, s, mark); len(rs) != 0 {
				t.Errorf("receipts written: %v", kinds(rs))
			}
			if cp := must[*lease.Checkpoint](t)(s.Checkpoints.LatestCheckpoint(context.Background(), l.ID)); cp != nil && tt.before == nil {
				t.Errorf("a refused step left a checkpoint %+v", cp)
			}
		})
	}
	t.Run("a lease that is not there", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		for _, step := range []op{ack, renew, checkpoint(progress), release("completed", "")} {
			if _, err := step(s, "ghost"); !errs.Is(err, errs.NotFound) {
				t.Errorf("got %v", err)
			}
		}
		if _, err := s.Leases.RecordWake(context.Background(), "ghost", 1, WakeRecord{Capability: "resumed"}); !errs.Is(err, errs.NotFound) {
			t.Errorf("wake: %v", err)
		}
		if _, err := s.LeaseLists.Lease(context.Background(), "ghost"); !errs.Is(err, errs.NotFound) {
			t.Errorf("read: %v", err)
		}
	})
}

func TestStoreCheckpoints(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	l := offered(t, s, "1")
	if cp := must[*lease.Checkpoint](t)(s.Checkpoints.LatestCheckpoint(ctx, l.ID)); cp != nil {
		t.Errorf("a checkpoint before any: %+v", cp)
	}
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 0, Who{By: "agent"}, timing))
	c.Advance(time.Second)
	must[lease.Lease](t)(checkpoint(lease.Checkpoint{Summary: "first"})(s, l.ID))
	c.Advance(time.Second)
	got := must[lease.Lease](t)(checkpoint(progress)(s, l.ID))
	if !got.LastCheckpointAt.Equal(c.Now()) {
		t.Errorf("last checkpoint at %v", got.LastCheckpointAt)
	}
	cp := must[*lease.Checkpoint](t)(s.Checkpoints.LatestCheckpoint(ctx, l.ID))
	want := progress
	want.LeaseID, want.RecordedAt = l.ID, c.Now()
	if cp == nil || cp.Summary != want.Summary || !slices.Equal(cp.FilesChanged, want.FilesChanged) || cp.NextAction != want.NextAction ||
		cp.BlockedReason != want.BlockedReason || cp.TaskID != want.TaskID || cp.LeaseID != l.ID || !cp.RecordedAt.Equal(c.Now()) {
		t.Errorf("latest checkpoint %+v, want %+v", cp, want)
	}
	rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{LeaseID: l.ID}))
	last := rs[len(rs)-1]
	if last.Kind != KindCheckpointRecorded || last.Detail["files_changed"] != float64(2) || last.Detail["blocked_reason"] != nil ||
		last.Detail["task_id"] != "T-1" {
		t.Errorf("checkpoint receipt %+v", last)
	}
	// Blocked: recorded, and the lease stops for a human.
	c.Advance(time.Second)
	got = must[lease.Lease](t)(checkpoint(stuck)(s, l.ID))
	if got.State != lease.Stopped || got.Released != lease.ResultBlocked || got.StopReason != "blocked: checkpoint: human" {
		t.Errorf("after a blocked checkpoint %+v", got)
	}
	if cp := must[*lease.Checkpoint](t)(s.Checkpoints.LatestCheckpoint(ctx, l.ID)); cp == nil || cp.BlockedReason != lease.BlockedHuman {
		t.Errorf("latest checkpoint %+v", cp)
	}
	rs = must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{LeaseID: l.ID}))
	if n := len(rs); n < 2 || rs[n-2].Kind != KindCheckpointRecorded || rs[n-2].Detail["blocked_reason"] != "human" ||
		rs[n-1].Kind != KindLeaseStopped || rs[n-1].Detail["result"] != "blocked" {
		t.Errorf("receipts %v", kinds(rs))
	}
	noContentInReceipts(t, s, "SUMMARY", "NEXT:", "first", "a.go")
}

func TestStoreRecordWake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		attempt int // of the wake recorded; the lease is at attempt 1
		w       WakeRecord
		outcome lease.WakeOutcome // on the lease after
		message string            // local lease id after
		pending bool              // still among PendingWakes
		kind    string
		status  string
		code    errs.Code
	}{
		{"resumed", 1, WakeRecord{Capability: "resumed", MessageID: "m1", TamqEndpointID: "tmux-amq-1"}, lease.WakeResumed, "m1", false, KindWakeSent, "resumed", ""},
		{"started", 1, WakeRecord{Capability: "started", MessageID: "m1"}, lease.WakeStarted, "m1", false, KindWakeSent, "started", ""},
		{"unavailable: withdrawn", 1, WakeRecord{Capability: "unavailable", Reason: "window in manual mode", Wait: lease.WaitManual,
			Until: start.Add(time.Minute)}, "", "", false, KindWakeSent, "unavailable", ""},
		{"not sent", 1, WakeRecord{Err: "tamq is not running"}, "", "", true, KindWakeFailed, "failed", ""},
		{"an answer for another attempt", 2, WakeRecord{Capability: "resumed", MessageID: "m9"}, "", "", true, KindWakeSent, "resumed", ""},
		{"an unknown capability", 1, WakeRecord{Capability: "typed"}, "", "", true, "", "", errs.BadRequest},
		{"an endpoint never granted", 1, WakeRecord{Capability: "resumed", CoordinationEndpointID: "ce-ghost"}, "", "", true, "", "", errs.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			l := offered(t, s, "1")
			c.Advance(time.Second)
			mark := lastReceipt(t, s)
			got, err := s.Leases.RecordWake(ctx, l.ID, tt.attempt, tt.w)
			if tt.code != "" {
				if !errs.Is(err, tt.code) {
					t.Fatalf("got %v, want %s", err, tt.code)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			stored := getLease(t, s, l.ID)
			if tt.code == "" && stored != got {
				t.Errorf("returned\n%+v\nstored\n%+v", got, stored)
			}
			if tt.w.Capability == "unavailable" {
				// No window could take it: the attempt is withdrawn and costs
				// nothing (the same attempt is offered again: tamq queued
				// nothing under it); the trigger says why it waits.
				if stored.State != lease.RetryWait || stored.Attempt != 1 || stored.MaxRetries != l.MaxRetries ||
					!stored.NextRetryAt.Equal(tt.w.Until) {
					t.Errorf("lease %+v", stored)
				}
				if tr := getTrigger(t, s, l.TriggerID); tr.Wait != lease.WaitManual || tr.WaitDetail != tt.w.Reason || tr.State != lease.TriggerLeased {
					t.Errorf("trigger %+v", tr)
				}
				if rs := receiptsSince(t, s, mark); !slices.Equal(kinds(rs), []string{KindWakeSent, KindLeaseRetryWait, KindTriggerWaiting}) {
					t.Errorf("receipts %v", kinds(rs))
				}
				return
			}
			if stored.State != lease.Offered || stored.WakeOutcome != tt.outcome || stored.LocalLeaseID != tt.message {
				t.Errorf("lease %+v", stored)
			}
			pending := must[[]lease.Lease](t)(s.Deadlines.PendingWakes(ctx))
			if (len(pending) == 1) != tt.pending {
				t.Errorf("pending wakes %v", pending)
			}
			rs := receiptsSince(t, s, mark)
			if tt.kind == "" {
				if len(rs) != 0 {
					t.Errorf("receipts %v", kinds(rs))
				}
				return
			}
			if len(rs) != 1 || rs[0].Kind != tt.kind || rs[0].Status != tt.status || rs[0].Attempt != tt.attempt ||
				rs[0].LocalMessageID != tt.w.MessageID || rs[0].LeaseID != l.ID {
				t.Errorf("receipts %+v", rs)
			}
			if tt.w.Err != "" && rs[0].Reason != tt.w.Err {
				t.Errorf("reason %q", rs[0].Reason)
			}
			// "resumed" alone reads as "resumed from a checkpoint": the
			// reason says what it means.
			if want := map[string]string{
				"resumed": "prompt queued for the agent already running in its window",
				"started": "agent started again in its window, prompt queued for it",
			}[tt.w.Capability]; want != "" && rs[0].Reason != want {
				t.Errorf("%s: reason %q, want %q", tt.w.Capability, rs[0].Reason, want)
			}
		})
	}
}

func TestStoreLeaseListings(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var ids []string
	for _, rev := range []string{"1", "2", "3"} {
		ids = append(ids, offered(t, s, rev).ID)
	}
	must[lease.Lease](t)(s.Leases.Ack(ctx, ids[1], 0, Who{By: "agent"}, timing))
	all := must[[]lease.Lease](t)(s.LeaseLists.List(ctx, "", 0, 0))
	if len(all) != 3 || all[0].ID != ids[2] || all[2].ID != ids[0] {
		t.Errorf("all leases, newest first: %v", all)
	}
	if older := must[[]lease.Lease](t)(s.LeaseLists.List(ctx, "", 0, 1)); len(older) != 2 || older[0].ID != ids[1] {
		t.Errorf("all but the newest: %v", older)
	}
	if two := must[[]lease.Lease](t)(s.LeaseLists.List(ctx, "", 2, 0)); len(two) != 2 || two[0].ID != ids[2] {
		t.Errorf("limited: %v", two)
	}
	if acked := must[[]lease.Lease](t)(s.LeaseLists.List(ctx, "acknowledged", 0, 0)); len(acked) != 1 || acked[0].ID != ids[1] {
		t.Errorf("acknowledged: %v", acked)
	}
	if _, err := s.LeaseLists.List(ctx, "sleeping", 0, 0); !errs.Is(err, errs.BadRequest) {
		t.Errorf("unknown state: %v", err)
	}
	counts := must[map[string]int](t)(s.LeaseLists.LeaseCounts(ctx))
	if len(counts) != len(lease.States) || counts["offered"] != 2 || counts["acknowledged"] != 1 || counts["stopped"] != 0 {
		t.Errorf("counts %v", counts)
	}
}

// A request of the agent's that names the offered attempt takes it up: the
// lease is acknowledged by that caller first (a quick agent runs its first
// command before tamq's broker has acknowledged for it), in the same
// transaction; one the rules refuse takes nothing up.
func TestStoreRequestsThatTakeUpAnOfferedAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	agent := Who{By: "agent", Repo: "net"}
	for _, tt := range []struct {
		name     string
		step     func(s *Store, id string) (lease.Lease, error)
		state    lease.State
		receipts []string
	}{
		{"a checkpoint", func(s *Store, id string) (lease.Lease, error) {
			return s.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: id, Summary: "half done"}, 1, agent, timing)
		}, lease.Checkpointed, []string{KindLeaseAcknowledged, KindCheckpointRecorded}},
		{"a release", func(s *Store, id string) (lease.Lease, error) {
			return s.Leases.Release(ctx, id, "completed", "", 1, agent, timing)
		}, lease.Completed, []string{KindLeaseAcknowledged, KindLeaseCompleted}},
		{"a renewal", func(s *Store, id string) (lease.Lease, error) {
			return s.Leases.Renew(ctx, id, 1, agent, timing)
		}, lease.Running, []string{KindLeaseAcknowledged, KindLeaseRunning}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, l := driven(t, nil, time.Second)
			mark := lastReceipt(t, s)
			got, err := tt.step(s, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.state || got.AckedBy != "agent" || got.AckedAt.IsZero() {
				t.Errorf("lease %s acked by %q at %v, want %s acked by the agent", got.State, got.AckedBy, got.AckedAt, tt.state)
			}
			rs := receiptsSince(t, s, mark)
			if !slices.Equal(kinds(rs), tt.receipts) {
				t.Errorf("receipts %v, want %v", kinds(rs), tt.receipts)
			}
			if len(rs) > 0 && (rs[0].Reason != "taken up by its "+strings.TrimPrefix(tt.name, "a ") || rs[0].Detail["by"] != "agent") {
				t.Errorf("the acknowledgement's receipt %+v", rs[0])
			}
		})
	}
	t.Run("refused, it takes nothing up", func(t *testing.T) {
		t.Parallel()
		s, _, l := driven(t, nil, time.Second)
		before, mark := getLease(t, s, l.ID), lastReceipt(t, s)
		for _, step := range []func() error{
			func() error {
				_, err := s.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: l.ID}, 1, agent, timing) // no summary
				return err
			},
			func() error { _, err := s.Leases.Release(ctx, l.ID, "failed", "", 1, agent, timing); return err },    // no reason
			func() error { _, err := s.Leases.Release(ctx, l.ID, "completed", "", 0, agent, timing); return err }, // no attempt named
		} {
			if err := step(); err == nil {
				t.Fatal("a request the rules refuse was taken")
			}
		}
		if got := getLease(t, s, l.ID); got != before {
			t.Errorf("changed:\n%+v\nwas\n%+v", got, before)
		}
		if rs := receiptsSince(t, s, mark); len(rs) != 0 {
			t.Errorf("receipts written: %v", kinds(rs))
		}
	})
}

// A wake tamq holds unwritten (issue 39): held, the attempt's deadline
// starts again and its trigger says why, once; the agent taking it up
// clears that. Withdrawn, nothing is spent and the next attempt is due. A
// lease that moved on is left as it is.
func TestStoreHeldWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newStore(t)
	l := offered(t, s, "1")
	l = must[lease.Lease](t)(s.Leases.RecordWake(ctx, l.ID, 1, WakeRecord{Capability: "resumed", MessageID: "m-1"}))
	c.Advance(timing.AckTimeout)
	for i := range 2 {
		mark := lastReceipt(t, s)
		until := c.Now().Add(timing.AckTimeout)
		got := must[lease.Lease](t)(s.Leases.HoldWake(ctx, l.ID, 1, until, lease.WaitDialog, "net"))
		if got.State != lease.Offered || got.Attempt != 1 || got.MaxRetries != l.MaxRetries || !got.ExpiresAt.Equal(until) {
			t.Errorf("held lease %+v", got)
		}
		if tr := getTrigger(t, s, l.TriggerID); tr.Wait != lease.WaitDialog || tr.WaitDetail != "net" {
			t.Errorf("trigger %+v", tr)
		}
		want := []string{KindTriggerWaiting} // once: the second hold says nothing new
		if i > 0 {
			want = nil
		}
		if rs := kinds(receiptsSince(t, s, mark)); !slices.Equal(rs, want) {
			t.Errorf("hold %d: receipts %v, want %v", i+1, rs, want)
		}
		c.Advance(timing.AckTimeout)
	}
	if got := must[lease.Lease](t)(s.Leases.HoldWake(ctx, l.ID, 2, c.Now().Add(time.Hour), lease.WaitDialog, "net")); got.ExpiresAt.After(c.Now()) {
		t.Errorf("an attempt the lease is not at was held: %+v", got)
	}
	must[lease.Lease](t)(s.Leases.HoldWake(ctx, l.ID, 1, c.Now().Add(timing.AckTimeout), lease.WaitDialog, "net"))
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 1, Who{By: lease.ByBroker}, timing))
	if tr := getTrigger(t, s, l.TriggerID); tr.Wait != "" || tr.WaitDetail != "" {
		t.Errorf("the trigger still waits once its lease is taken up: %+v", tr)
	}

	other := offered(t, s, "2")
	other = must[lease.Lease](t)(s.Leases.RecordWake(ctx, other.ID, 1, WakeRecord{Capability: "resumed", MessageID: "m-2"}))
	got := must[lease.Lease](t)(s.Leases.WithdrawHeldWake(ctx, other.ID, 1, c.Now(), lease.WaitNoWindow, "endpoint tmux-amq-1 is gone"))
	if got.State != lease.RetryWait || got.Attempt != 2 || got.MaxRetries != other.MaxRetries+1 || !got.NextRetryAt.Equal(c.Now()) {
		t.Errorf("withdrawn lease %+v", got)
	}
	if tr := getTrigger(t, s, other.TriggerID); tr.Wait != lease.WaitNoWindow {
		t.Errorf("trigger %+v", tr)
	}
	if again := must[lease.Lease](t)(s.Leases.WithdrawHeldWake(ctx, other.ID, 1, c.Now(), lease.WaitNoWindow, "x")); again != got {
		t.Errorf("a withdrawn lease withdrawn again: %+v", again)
	}
}
