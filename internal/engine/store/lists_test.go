package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/sqlitedb/schematest"
)

// A lease keeps who acknowledged its current attempt, and when; the next
// attempt starts without.
func TestLeaseKeepsWhoAcknowledged(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	l := offered(t, s, "1")
	if l.AckedBy != "" || !l.AckedAt.IsZero() {
		t.Fatalf("an offered lease is acknowledged: %+v", l)
	}
	c.Advance(time.Second)
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 1, Who{By: lease.ByBroker}, timing))
	if got := getLease(t, s, l.ID); got.AckedBy != lease.ByBroker || !got.AckedAt.Equal(start.Add(time.Second)) {
		t.Errorf("after the broker's ack: by %q at %v", got.AckedBy, got.AckedAt)
	}
	// A repeated ack (the agent's own, after its broker's) changes nothing.
	c.Advance(time.Second)
	must[lease.Lease](t)(s.Leases.Ack(ctx, l.ID, 1, Who{By: lease.ByAgent, Repo: "net"}, timing))
	if got := getLease(t, s, l.ID); got.AckedBy != lease.ByBroker {
		t.Errorf("a repeated ack changed who acknowledged: %q", got.AckedBy)
	}
	failed := must[lease.Lease](t)(s.Leases.Release(ctx, l.ID, string(lease.ResultFailed), "tests fail", 1, Who{By: lease.ByAgent}, timing))
	if failed.State != lease.RetryWait || failed.AckedBy != "" || !failed.AckedAt.IsZero() {
		t.Errorf("the next attempt keeps the last one's ack: %+v", failed)
	}
	if got := getLease(t, s, l.ID); got.AckedBy != "" {
		t.Errorf("stored: the next attempt keeps the last one's ack: %q", got.AckedBy)
	}
}

// Receipts name the task and repo they are about, and filter by task; a
// trigger's receipts are its own.
func TestReceiptsNameTheirTaskAndRepo(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	a := offered(t, s, "1")
	other, _, err := s.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-2", SourceRevision: "1",
		TargetRepo: "web", TaskID: "T-2", Reason: lease.TaskActionable})
	must0(t, err)
	// What an agent relayed about a task names it in its detail only.
	must0(t, s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: KindTaskSet, Status: "ok", Detail: map[string]any{"task_id": "T-1"}}))
	must0(t, s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: KindEndpointAttached, Status: "attached", Detail: map[string]any{"repo": "web"}}))

	all := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{}))
	var got [][3]string
	for _, r := range all {
		got = append(got, [3]string{r.Kind, r.TaskID, r.Repo})
	}
	want := [][3]string{
		{KindTriggerObserved, "T-1", "net"}, {KindLeaseOffered, "T-1", "net"}, {KindTriggerObserved, "T-2", "web"},
		{KindTaskSet, "T-1", ""}, {KindEndpointAttached, "", "web"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("receipts name\n%v, want\n%v", got, want)
	}
	var kinds []string
	for _, r := range must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{TaskID: "T-1"})) {
		kinds = append(kinds, r.Kind)
	}
	if !slices.Equal(kinds, []string{KindTriggerObserved, KindLeaseOffered, KindTaskSet}) {
		t.Errorf("receipts of T-1: %v", kinds)
	}
	if rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{TriggerID: other.ID})); len(rs) != 1 || rs[0].TaskID != "T-2" {
		t.Errorf("receipts of T-2's trigger: %+v", rs)
	}
	if rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{TaskID: "T-1", LeaseID: a.ID})); len(rs) != 1 || rs[0].Kind != KindLeaseOffered {
		t.Errorf("receipts of T-1 and its lease: %+v", rs)
	}
	tasks := must[map[string]string](t)(s.LeaseLists.TasksOfTriggers(ctx, []string{a.TriggerID, other.ID, "ghost"}))
	if len(tasks) != 2 || tasks[a.TriggerID] != "T-1" || tasks[other.ID] != "T-2" {
		t.Errorf("tasks of triggers: %v", tasks)
	}
}

// Checkpoints list newest first with their attempt, by task or lease.
func TestCheckpointsList(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	a := offered(t, s, "1")
	must[lease.Lease](t)(s.Leases.Ack(ctx, a.ID, 1, Who{By: lease.ByAgent}, timing))
	must[lease.Lease](t)(s.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: a.ID, Summary: "first", FilesChanged: []string{"a.go"}}, 1, Who{By: lease.ByAgent}, timing))
	c.Advance(time.Second)
	must[lease.Lease](t)(s.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: a.ID, Summary: "second", NextAction: "ship",
		BlockedReason: lease.BlockedReason("human")}, 1, Who{By: lease.ByAgent}, timing))

	all := must[[]lease.Checkpoint](t)(s.Checkpoints.List(ctx, CheckpointFilter{}))
	if len(all) != 2 || all[0].Summary != "second" || all[1].Summary != "first" {
		t.Fatalf("checkpoints %+v", all)
	}
	if n := all[0]; n.Attempt != 1 || n.TaskID != "T-1" || n.NextAction != "ship" || n.BlockedReason != "human" ||
		!n.RecordedAt.Equal(start.Add(time.Second)) || len(n.FilesChanged) != 0 {
		t.Errorf("newest checkpoint %+v", n)
	}
	if o := all[1]; !slices.Equal(o.FilesChanged, []string{"a.go"}) {
		t.Errorf("oldest checkpoint's files %v", o.FilesChanged)
	}
	if cs := must[[]lease.Checkpoint](t)(s.Checkpoints.List(ctx, CheckpointFilter{TaskID: "T-1", Limit: 1})); len(cs) != 1 || cs[0].Summary != "second" {
		t.Errorf("the newest of T-1: %+v", cs)
	}
	if cs := must[[]lease.Checkpoint](t)(s.Checkpoints.List(ctx, CheckpointFilter{LeaseID: a.ID, Offset: 1})); len(cs) != 1 || cs[0].Summary != "first" {
		t.Errorf("the next page of a's: %+v", cs)
	}
	for _, f := range []CheckpointFilter{{TaskID: "T-9"}, {LeaseID: "ghost"}} {
		if cs := must[[]lease.Checkpoint](t)(s.Checkpoints.List(ctx, f)); len(cs) != 0 {
			t.Errorf("%+v: %+v", f, cs)
		}
	}
}

// A database of schema 4 gains who acknowledged each lease's current
// attempt and each checkpoint's attempt from the receipts it kept.
func TestMigrationFiveFillsFromReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "coordination.sqlite3")
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations[:4], Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	schematest.Must(t, schematest.Exec(db, insertTrigger, "t1", "rev1"))
	schematest.Must(t, schematest.Exec(db, insertTrigger, "t2", "rev2"))
	for _, q := range []string{
		`INSERT INTO leases (lease_id, trigger_id, target_repo, state, attempt, acquired_at, expires_at, policy_profile, config_version, updated_at)
			VALUES ('L1', 't1', 'net', 'running', 2, 1, 2, 'p', 'c', 1), ('L2', 't2', 'net', 'offered', 1, 1, 2, 'p', 'c', 1)`,
		`INSERT INTO receipts (at, kind, lease_id, status, attempt, detail) VALUES
			(10, 'lease.acknowledged', 'L1', 'acknowledged', 1, '{"by":"agent"}'),
			(20, 'lease.acknowledged', 'L1', 'acknowledged', 2, '{"by":"broker"}'),
			(30, 'checkpoint.recorded', 'L1', 'checkpointed', 2, '{}'),
			(40, 'lease.acknowledged', 'L2', 'acknowledged', 1, '{"by":"agent"}')`,
		`INSERT INTO checkpoints (lease_id, summary, recorded_at) VALUES ('L1', 'kept', 30), ('L1', 'receipt purged', 50)`,
	} {
		schematest.Must(t, schematest.Exec(db, q))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db, nil)
	if l := getLease(t, s, "L1"); l.AckedBy != lease.ByBroker || !l.AckedAt.Equal(sqlitedb.FromMillis(20)) {
		t.Errorf("L1 acknowledged by %q at %v, want the broker's ack of attempt 2", l.AckedBy, l.AckedAt)
	}
	// An offered lease is not acknowledged, whatever a receipt said.
	if l := getLease(t, s, "L2"); l.AckedBy != "" {
		t.Errorf("offered L2 acknowledged by %q", l.AckedBy)
	}
	cs := must[[]lease.Checkpoint](t)(s.Checkpoints.List(ctx, CheckpointFilter{}))
	if len(cs) != 2 || cs[0].Attempt != 0 || cs[1].Attempt != 2 {
		t.Errorf("checkpoints after the migration: %+v", cs)
	}
	if _, err := s.LeaseLists.Lease(ctx, "ghost"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a lease that is not there: %v", err)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
