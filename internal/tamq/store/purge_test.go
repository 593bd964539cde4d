package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// purgeFixture is a store with n messages, each taken through the service's
// transitions to injected (three receipts each), and receipts that are not
// about a message: a service start, a refusal (no subject), and an endpoint
// receipt whose subject happens to be a message id.
func purgeFixture(t *testing.T, n int) (*Store, []string) {
	t.Helper()
	db := setup(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { now = now.Add(time.Millisecond); return now })
	ctx := context.Background()
	var ids []string
	for i := range n {
		m := &queue.Message{Sender: "operator", SenderKind: queue.FromOperator, Target: "net-kingdom",
			Body: fmt.Sprintf("message %d", i), AckMode: ackmode.Injected, MaxRetries: 3, PolicyProfile: "p@1", ConfigVersion: "c"}
		if err := s.Queue.Enqueue(ctx, []*queue.Message{m}); err != nil {
			t.Fatal(err)
		}
		for _, step := range []func(*queue.Message) error{
			func(m *queue.Message) error { return m.Claim(s.Queue.Now()) },
			func(m *queue.Message) error { return m.Written(s.Queue.Now(), queue.Timing{}) },
		} {
			if _, err := s.Deliveries.Transition(ctx, m.ID, "test", step); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, m.ID)
	}
	for _, r := range []receipt.Receipt{
		{Kind: receipt.KindServiceStart, Status: "started"},
		{Kind: KindRejected, Status: "rejected", Reason: "body_invalid"},
		{Kind: "endpoint.state", SubjectID: ids[0], Status: "connected"},
	} {
		if err := s.Receipts.AddReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return s, ids
}

// receiptRows lists every receipt as "kind subject", in order.
func receiptRows(t *testing.T, db *sqlitedb.DB) []string {
	t.Helper()
	rows, err := db.Reader.Query(`SELECT kind, COALESCE(subject_id, '') FROM receipts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, subject string
		if err := rows.Scan(&kind, &subject); err != nil {
			t.Fatal(err)
		}
		out = append(out, kind+" "+subject)
	}
	return out
}

func TestPurgeTakesTheReceiptsOfItsMessagesAndNothingElse(t *testing.T) {
	t.Parallel()
	s, ids := purgeFixture(t, 6)
	ctx := context.Background()
	before := receiptRows(t, s.DB)
	purged, kept := ids[:4], ids[4:]
	var want []string
	for _, r := range before {
		if !slices.ContainsFunc(purged, func(id string) bool { return r == KindTransition+" "+id }) {
			want = append(want, r)
		}
	}
	if len(before)-len(want) != 4*3 {
		t.Fatalf("fixture: %d of %d receipts are about the purged messages, want 12", len(before)-len(want), len(before))
	}
	done, err := s.Purges.Purge(ctx, purged, nil)
	if err != nil || done != (Purged{Messages: 4, Receipts: 12}) {
		t.Fatalf("purged %+v, %v; want 4 messages and 12 receipts", done, err)
	}
	if got := receiptRows(t, s.DB); !slices.Equal(got, want) {
		t.Errorf("receipts after the purge:\n%q\nwant\n%q", got, want)
	}
	for _, id := range kept {
		if _, err := s.Deliveries.Get(ctx, id); err != nil {
			t.Errorf("kept message %s: %v", id, err)
		}
	}
}

// TestPurgeTakesReceiptsWrittenAfterItLooked: a receipt about a purged
// message written after the purge read the receipts (an ack arriving
// meanwhile) goes with its message too.
//
// Not parallel: it sets the package's purge hook.
func TestPurgeTakesReceiptsWrittenAfterItLooked(t *testing.T) {
	s, ids := purgeFixture(t, 2)
	testHookPurgeChunk = func(tx *sql.Tx) error {
		return s.Receipts.AddReceiptTx(tx, receipt.Receipt{Kind: KindTransition, SubjectID: ids[0], Status: "acknowledged"})
	}
	defer func() { testHookPurgeChunk = nil }()
	done, err := s.Purges.Purge(context.Background(), ids[:1], nil)
	if err != nil || done != (Purged{Messages: 1, Receipts: 4}) {
		t.Fatalf("purged %+v, %v; want 1 message and its 3 receipts and the late one", done, err)
	}
	for _, r := range receiptRows(t, s.DB) {
		if r == KindTransition+" "+ids[0] {
			t.Errorf("a receipt of the purged message is left")
		}
	}
}

// TestPurgeCountsOnlyWhatCommitted makes a purge transaction fail with a real
// SQLITE_BUSY (another connection's write, refused while the purge holds the
// lock) after it has deleted its messages: the transaction is rolled back
// and run again, and the counts are those of the run that committed, where
// they used to add up both.
//
// Not parallel: it sets the package's purge hook.
func TestPurgeCountsOnlyWhatCommitted(t *testing.T) {
	s, ids := purgeFixture(t, 3)
	other, err := sql.Open("sqlite", "file:"+s.DB.Path+"?_pragma=busy_timeout(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	runs := 0
	testHookPurgeChunk = func(*sql.Tx) error {
		runs++
		if runs > 1 {
			return nil
		}
		_, err := other.Exec(`INSERT INTO receipt_rows (at, kind, status) VALUES (0, 'test.other', 'x')`)
		if err == nil {
			t.Fatal("another connection wrote while the purge held the lock")
		}
		return err
	}
	defer func() { testHookPurgeChunk = nil }()
	done, err := s.Purges.Purge(context.Background(), ids, nil)
	if err != nil || runs != 2 || done != (Purged{Messages: 3, Receipts: 9}) {
		t.Fatalf("purged %+v after %d runs, %v; want 3 messages and 9 receipts after 2", done, runs, err)
	}
	var left int
	if err := s.DB.Reader.QueryRow(`SELECT count(*) FROM messages`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d messages left, %v", left, err)
	}
}

// TestHistorySizeCountsReceipts: receipts count toward the history's size,
// so a --max-size that the messages alone fit under still purges.
func TestHistorySizeCountsReceipts(t *testing.T) {
	t.Parallel()
	s, ids := purgeFixture(t, 10)
	ctx := context.Background()
	var messages, receipts int64
	if err := s.DB.Reader.QueryRow(`SELECT (SELECT sum(`+messageBytes+`) FROM message_rows), (SELECT sum(`+receiptBytes+`) FROM receipt_rows)`).
		Scan(&messages, &receipts); err != nil {
		t.Fatal(err)
	}
	size, since, count, err := HistorySize(ctx, s.DB.Reader)
	if err != nil || size != messages+receipts || count != 10 || since.IsZero() || receipts < messages {
		t.Fatalf("HistorySize = %d since %v, %d messages, %v; want %d + %d", size, since, count, err, messages, receipts)
	}
	plan, err := PlanPurge(ctx, s.DB.Reader, PurgeRule{MaxBytes: messages})
	if err != nil {
		t.Fatal(err)
	}
	if plan.HistoryBytes != size || plan.HistoryReceipts != 10*3+3 || len(plan.IDs) == 0 || plan.IDs[0] != ids[0] ||
		plan.HistoryBytes-plan.Bytes > messages {
		t.Errorf("plan for a history of %d bytes, messages alone %d: %+v", size, messages, plan)
	}
}
