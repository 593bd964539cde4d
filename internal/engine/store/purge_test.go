package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
)

// A purge deletes the history older than its cutoff that nothing decides by
// any more: published receipts, ended leases with their checkpoints, and
// final triggers a newer trigger of the same source replaced. A dry run
// counts exactly that and changes nothing.
func TestPurgeKeepsWhatDecides(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	count := func(table string) int {
		t.Helper()
		var n int
		if err := s.DB.Reader.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Old: T-1 at r1 worked and done, with a checkpoint; U-1 done alone.
	old := offered(t, s, "r1")
	must[lease.Lease](t)(s.Leases.Ack(ctx, old.ID, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: old.ID, Summary: "half"}, 0, Who{By: "agent"}, timing))
	must[lease.Lease](t)(s.Leases.Release(ctx, old.ID, "completed", "", 0, Who{By: "agent"}, timing))
	lone := lease.Trigger{Source: lease.SourceTask, SourceID: "U-1", SourceRevision: "r1", TargetRepo: "net", TaskID: "U-1", Reason: lease.TaskActionable}
	loneTr, _, err := s.Triggers.AddTrigger(ctx, lone)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Triggers.StopTrigger(ctx, loneTr.ID, "human", "needs a person"); err != nil {
		t.Fatal(err)
	}
	_, ids, err := s.Receipts.ReceiptsToPublish(ctx, "ce-test", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Receipts.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
	published := count("receipts")
	// A hundred days later T-1 changes again (r2): a new trigger, a live
	// lease, receipts not yet published.
	c.Advance(100 * 24 * time.Hour)
	live := offered(t, s, "r2")
	before := map[string]int{"receipts": count("receipts"), "checkpoints": count("checkpoints"), "leases": count("leases"), "triggers": count("triggers")}

	cutoff := c.Now().Add(-50 * 24 * time.Hour)
	dry, err := s.History.Purge(ctx, cutoff, true)
	if err != nil {
		t.Fatal(err)
	}
	// The purge names the trigger it deleted by its key, for the engine's
	// memory of it.
	oldTr := getTrigger(t, s, old.TriggerID)
	want := Purged{Receipts: published, Checkpoints: 1, Leases: 1, Triggers: 1, TriggerKeys: []lease.Trigger{
		{Source: oldTr.Source, SourceID: oldTr.SourceID, SourceRevision: oldTr.SourceRevision, TargetRepo: oldTr.TargetRepo}}}
	if !reflect.DeepEqual(dry, want) {
		t.Errorf("dry run: %+v, want %+v", dry, want)
	}
	for table, n := range before {
		if got := count(table); got != n {
			t.Errorf("the dry run changed %s: %d rows, had %d", table, got, n)
		}
	}
	done, err := s.History.Purge(ctx, cutoff, false)
	if err != nil || !reflect.DeepEqual(done, want) {
		t.Fatalf("purge: %+v %v, want %+v", done, err, want)
	}
	if _, err := s.Triggers.Trigger(ctx, old.TriggerID); err == nil {
		t.Error("the replaced trigger of T-1 is still there")
	}
	// What still decides stays: the newest trigger of each source (U-1's
	// stop keeps U-1 stopped), the live lease, unpublished receipts.
	if got := getTrigger(t, s, loneTr.ID); got.State != lease.TriggerStopped {
		t.Errorf("U-1's only trigger: %+v", got)
	}
	if got := getLease(t, s, live.ID); got.State != lease.Offered {
		t.Errorf("the live lease: %+v", got)
	}
	if n := count("receipts"); n != before["receipts"]-published || n == 0 {
		t.Errorf("%d receipts left, want the %d unpublished", n, before["receipts"]-published)
	}
	if again, err := s.History.Purge(ctx, cutoff, false); err != nil || again.Total() != 0 {
		t.Errorf("a second purge: %+v %v", again, err)
	}
}
