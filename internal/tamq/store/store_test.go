package store

import (
	"context"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/receipt"
)

func TestStatsAndReceipts(t *testing.T) {
	t.Parallel()
	db := setup(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { return now })
	ctx := context.Background()
	empty, err := Stats(ctx, db.Reader, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Counts) != len(MessageStates) || !empty.OldestPendingAt.IsZero() || empty.HistoryBytes != 0 {
		t.Errorf("empty stats %+v", empty)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	old := now.Add(-time.Hour).UnixMilli()
	for i, st := range []string{"queued", "awaiting_ack", "injected", "failed"} {
		must(exec(t, db, `INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
			max_attempts, policy_profile, config_version, created_at, updated_at)
			VALUES (?, 'b1', 'operator', 'operator', 'r', 'hello', 'injected', ?, 4, 'p', 'c', ?, ?)`,
			"m"+st, st, old+int64(i), old+int64(i)))
	}
	must(exec(t, db, `INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
		VALUES ('mqueued', 'l1', 1, 'svc', ?, ?), ('mawaiting_ack', 'l2', 1, 'svc', ?, ?)`,
		old, now.Add(time.Minute).UnixMilli(), old, now.Add(-time.Minute).UnixMilli()))
	must(s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "test.kind", SubjectID: "mqueued", Status: "ok",
		Detail: map[string]any{"count": 2, "body": "never stored"}}))
	n, err := s.Endpoints.MarkEndpointsDisconnected(ctx)
	must(err)
	if n != 0 {
		t.Errorf("disconnected %d endpoints of none", n)
	}

	st, err := Stats(ctx, db.Reader, now)
	must(err)
	if st.Counts["queued"] != 1 || st.Counts["awaiting_ack"] != 1 || st.Counts["injected"] != 1 || st.Counts["failed"] != 1 || st.Counts["delivering"] != 0 {
		t.Errorf("counts %v", st.Counts)
	}
	if !st.OldestPendingAt.Equal(time.UnixMilli(old)) {
		t.Errorf("oldest pending %v, want %v", st.OldestPendingAt, time.UnixMilli(old))
	}
	if st.ActiveLeases != 1 || st.ExpiredLeases != 1 || st.UnpublishedReceipts != 1 || st.HistoryMessages != 4 {
		t.Errorf("stats %+v", st)
	}
	if st.HistoryBytes < 4*int64(len("hello")) || !st.HistorySince.Equal(time.UnixMilli(old)) {
		t.Errorf("history %d bytes since %v", st.HistoryBytes, st.HistorySince)
	}
	rs, err := Receipts(ctx, db.Reader, "test.kind")
	must(err)
	if len(rs) != 1 || rs[0].SubjectID != "mqueued" || rs[0].Detail["count"] != float64(2) || rs[0].Detail["body"] != nil || !rs[0].At.Equal(now) {
		t.Errorf("receipts %+v", rs)
	}
}
