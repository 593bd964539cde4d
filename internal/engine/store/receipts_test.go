package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/receipt"
)

func TestStoreReceipts(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	if n := must[int](t)(s.Receipts.UnpublishedReceipts(ctx)); n != 0 {
		t.Errorf("%d unpublished in an empty database", n)
	}
	next := start.Add(time.Hour)
	if err := s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "service.start", Status: "ok", Reason: "line one\nline two\x1b[31m " + strings.Repeat("x", 300),
		Attempt: 2, NextRetryAt: next, LocalMessageID: "m1", Detail: map[string]any{"count": 2, "prompt": "never stored", "body": "nor this"}}); err != nil {
		t.Fatal(err)
	}
	a := offered(t, s, "1")
	c.Advance(time.Second)
	b := offered(t, s, "2")

	all := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{}))
	if len(all) != 5 {
		t.Fatalf("receipts %v", kinds(all))
	}
	first := all[0]
	if first.Kind != "service.start" || first.Attempt != 2 || !first.NextRetryAt.Equal(next) || first.LocalMessageID != "m1" ||
		!first.At.Equal(start) || first.PolicyProfile != "default@1" || first.ConfigVersion != "cfg" || !first.ProjectedAt.IsZero() {
		t.Errorf("first receipt %+v", first)
	}
	if strings.ContainsAny(first.Reason, "\n\x1b") || len(first.Reason) > 210 {
		t.Errorf("reason not cleaned: %q", first.Reason)
	}
	if first.Detail["count"] != float64(2) || first.Detail["prompt"] != nil || first.Detail["body"] != nil {
		t.Errorf("detail %v", first.Detail)
	}
	if rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{LeaseID: b.ID})); len(rs) != 1 || rs[0].Kind != KindLeaseOffered {
		t.Errorf("receipts of lease b %v", kinds(rs))
	}
	if rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{TriggerID: a.TriggerID})); len(rs) != 2 ||
		rs[0].Kind != KindTriggerObserved || rs[1].Kind != KindLeaseOffered {
		t.Errorf("receipts of trigger a %v", kinds(rs))
	}
	// A limit keeps the latest, still oldest first.
	if rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{Limit: 2})); len(rs) != 2 || rs[0].ID != all[3].ID || rs[1].ID != all[4].ID {
		t.Errorf("the latest 2: %v", rs)
	}
	if n := must[int](t)(s.Receipts.UnpublishedReceipts(ctx)); n != 5 {
		t.Errorf("%d unpublished", n)
	}
}
