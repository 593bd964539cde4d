package store

import (
	"context"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
)

// One transaction of several senders' messages: the one the database
// refuses (its id is taken) fails alone, with its own error, and the others
// are stored, each with its receipt, in the order given.
func TestEnqueueEachFailsOnlyTheRefusedMessage(t *testing.T) {
	t.Parallel()
	db := setup(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { return now })
	ctx := context.Background()
	msg := func(body string) *queue.Message {
		return &queue.Message{Sender: "operator", SenderKind: queue.FromOperator, Target: "r", Body: body,
			AckMode: ackmode.Injected, MaxRetries: 3, PolicyProfile: "default@1", ConfigVersion: "cfg"}
	}
	first := msg("first")
	if err := s.Queue.Enqueue(ctx, []*queue.Message{first}); err != nil {
		t.Fatal(err)
	}
	clash := msg("clash")
	clash.ID = first.ID
	group := []*queue.Message{msg("a"), clash, msg("b")}
	failed, err := s.Queue.EnqueueEach(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 3 || failed[0] != nil || failed[2] != nil || failed[1] == nil {
		t.Fatalf("failed = %v, want only the clash's", failed)
	}
	if !errs.Is(failed[1], errs.Internal) {
		t.Errorf("the clash's error %v, want internal_error", failed[1])
	}
	for _, m := range []*queue.Message{group[0], group[2]} {
		got, err := s.Deliveries.Get(ctx, m.ID)
		if err != nil || got.Body != m.Body || got.State != queue.Queued {
			t.Errorf("%s: %+v %v", m.Body, got, err)
		}
		var n int
		if err := db.Reader.QueryRow(`SELECT count(*) FROM receipts WHERE subject_id = ?`, m.ID).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s has %d receipts (%v), want 1", m.Body, n, err)
		}
	}
	if got, err := s.Deliveries.Get(ctx, first.ID); err != nil || got.Body != "first" {
		t.Errorf("the first message became %+v %v", got, err)
	}
	var n int
	if err := db.Reader.QueryRow(`SELECT count(*) FROM receipts WHERE subject_id = ?`, first.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("the first message has %d receipts (%v): the clash's was kept", n, err)
	}
	// The order given is the queue's order.
	rows, err := db.Reader.Query(`SELECT body FROM message_rows ORDER BY created_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bodies []string
	for rows.Next() {
		var b string
		rows.Scan(&b)
		bodies = append(bodies, b)
	}
	if want := []string{"first", "a", "b"}; len(bodies) != 3 || bodies[0] != want[0] || bodies[1] != want[1] || bodies[2] != want[2] {
		t.Errorf("queue order %q, want %q", bodies, want)
	}
}
