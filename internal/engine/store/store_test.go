package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
)

// The store's transitions, each against a fresh database with a clock the
// test moves by hand.

var start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*Store, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(start)
	s := New(setup(t), c)
	s.PolicyProfile, s.ConfigVersion = "default@1", "cfg"
	return s, c
}

// timing: a 30 s ack deadline, renewals every minute with 3 allowed to be
// missed, backoffs of 5 and 15 s, and 2 retries (3 attempts).
var timing = lease.Timing{
	AckTimeout:     30 * time.Second,
	RenewInterval:  time.Minute,
	MissedRenewals: 3,
	Backoff:        []time.Duration{5 * time.Second, 15 * time.Second},
	MaxRetries:     2,
}

// held is how long a renewal keeps a lease.
const held = 3 * time.Minute

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// newTrigger is a task trigger for repo net at revision rev.
func newTrigger(rev string) lease.Trigger {
	return lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: rev, TargetRepo: "net",
		TaskID: "T-1", Reason: lease.TaskActionable}
}

// offered records a trigger and offers it a lease.
func offered(t *testing.T, s *Store, rev string) lease.Lease {
	t.Helper()
	ctx := context.Background()
	tr, _, err := s.Triggers.AddTrigger(ctx, newTrigger(rev))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Leases.Offer(ctx, tr.ID, "", "", timing)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func getLease(t *testing.T, s *Store, id string) lease.Lease {
	t.Helper()
	return must[lease.Lease](t)(s.LeaseLists.Lease(context.Background(), id))
}

func getTrigger(t *testing.T, s *Store, id string) lease.Trigger {
	t.Helper()
	return must[lease.Trigger](t)(s.Triggers.Trigger(context.Background(), id))
}

// lastReceipt is the id of the latest receipt, a mark for receiptsSince.
func lastReceipt(t *testing.T, s *Store) int64 {
	t.Helper()
	var id int64
	if err := s.DB.Reader.QueryRow(`SELECT COALESCE(max(id), 0) FROM receipts`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// receiptsSince are the receipts written after mark, oldest first.
func receiptsSince(t *testing.T, s *Store, mark int64) []receipt.Receipt {
	t.Helper()
	all := must[[]receipt.Receipt](t)(s.Receipts.List(context.Background(), ReceiptFilter{}))
	return slices.DeleteFunc(all, func(r receipt.Receipt) bool { return r.ID <= mark })
}

func kinds(rs []receipt.Receipt) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Kind)
	}
	return out
}

// noContentInReceipts fails when any column of any receipt holds one of the
// texts (a checkpoint summary, a next action): receipts hold metadata only.
func noContentInReceipts(t *testing.T, s *Store, texts ...string) {
	t.Helper()
	rows, err := s.DB.Reader.Query(`SELECT * FROM receipts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	n := 0
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			for _, text := range texts {
				if strings.Contains(v.String, text) {
					t.Errorf("receipt column %s holds %q: %s", cols[i], text, v.String)
				}
			}
		}
		n++
	}
	if n == 0 {
		t.Error("no receipts to check")
	}
}
