package outbox

import (
	"github.com/tmux-amq/tamq/internal/testutil"

	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// db is an outbox table in memory; hub is State Hub, which keeps each
// receipt id once and may be told to fail or to take only part of a batch.
type db struct {
	mu      sync.Mutex
	pending []int64
	marked  map[int64]bool
}

func (d *db) add(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := int64(len(d.pending) + len(d.marked))
	for i := range int64(n) {
		d.pending = append(d.pending, start+i+1)
	}
}

func (d *db) Pending(_ context.Context, limit int) ([]contract.Receipt, []int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rows := d.pending[:min(limit, len(d.pending))]
	batch := make([]contract.Receipt, len(rows))
	for i, r := range rows {
		batch[i] = contract.Receipt{ID: "t:" + strconv.FormatInt(r, 10)}
	}
	return batch, append([]int64(nil), rows...), nil
}

func (d *db) Mark(_ context.Context, rows []int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rows {
		d.marked[r] = true
	}
	var kept []int64
	for _, r := range d.pending {
		if !d.marked[r] {
			kept = append(kept, r)
		}
	}
	d.pending = kept
	return nil
}

func (d *db) left() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending)
}

type hub struct {
	mu       sync.Mutex
	stored   map[string]int
	fail     error
	takeUpTo int
	posts    chan bool // each attempt: whether State Hub took it
}

func (h *hub) Post(_ context.Context, batch []contract.Receipt) (int, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.posts <- h.fail == nil }()
	if h.fail != nil {
		return 0, "direct", h.fail
	}
	n := len(batch)
	if h.takeUpTo > 0 {
		n = min(n, h.takeUpTo)
	}
	for _, r := range batch[:n] {
		h.stored[r.ID]++
	}
	return n, "direct", nil
}

func (h *hub) set(fail error, takeUpTo int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail, h.takeUpTo = fail, takeUpTo
}

func start(t *testing.T, d *db, h *hub) (*Publisher, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))
	p := &Publisher{
		Pending: d.Pending, Mark: d.Mark, Post: h.Post, Clock: c,
		Timing: Timing{Every: 5 * time.Second, Gather: 200 * time.Millisecond, Backoff: backoff.Policy{Min: time.Second, Max: time.Minute}},
		Log:    slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, c
}

func newDB() *db   { return &db{marked: map[int64]bool{}} }
func newHub() *hub { return &hub{stored: map[string]int{}, posts: make(chan bool, 100)} }

// parked waits until the publisher waits on the clock again.
func parked(t *testing.T, c *clock.Fake) {
	t.Helper()
	if !c.BlockUntil(1, nil) {
		t.Fatal("the publisher never waited")
	}
}

func TestReceiptsGoInBatchesAndOnlyWhatStateHubTookIsMarked(t *testing.T) {
	d, h := newDB(), newHub()
	d.add(contract.MaxProgressBatch + 5)
	h.set(nil, 3) // a sink that takes part of a batch, as tamq's frame to the engine does
	start(t, d, h)
	// Each post is told before its receipts are marked: wait for the marks
	// (the last post leaves the publisher waiting on the clock, and a check
	// between its post and its mark would wait for a post that never comes).
	testutil.WaitFor(t, "every receipt marked", func() bool {
		for {
			select {
			case <-h.posts: // drained, so that no post waits on a full channel
			default:
				return d.left() == 0
			}
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, n := range h.stored {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(h.stored) != contract.MaxProgressBatch+5 {
		t.Errorf("State Hub has %d receipts, want %d", len(h.stored), contract.MaxProgressBatch+5)
	}
}

func TestWhileStateHubFailsKicksWaitForTheBackoff(t *testing.T) {
	d, h := newDB(), newHub()
	d.add(2)
	h.set(errs.New(errs.PermissionDeny, "State Hub refused the credentials"), 0)
	p, c := start(t, d, h)
	<-h.posts
	parked(t, c)
	if st := p.Status(); !st.Paused || st.LastError == "" || !st.LastSuccess.IsZero() {
		t.Fatalf("status after a refusal: %+v", st)
	}
	// A kick during the backoff does not bring the next attempt forward.
	d.add(1)
	p.Kick()
	c.Advance(500 * time.Millisecond) // less than the first backoff's lower bound (0.8 s)
	h.set(nil, 0)
	c.Advance(time.Second) // past the first backoff's upper bound (1.2 s)
	if ok := <-h.posts; !ok {
		t.Fatal("the kick brought an attempt forward into the backoff")
	}
	parked(t, c)
	if st := p.Status(); st.Paused || st.LastError != "" || st.LastSuccess.IsZero() {
		t.Errorf("status after a success: %+v", st)
	}
	if d.left() != 0 {
		t.Errorf("%d receipts still pending", d.left())
	}
}

func TestRetryEndsTheBackoff(t *testing.T) {
	d, h := newDB(), newHub()
	d.add(1)
	h.set(errors.New("connection refused"), 0)
	p, c := start(t, d, h)
	<-h.posts
	parked(t, c)
	c.Advance(2 * time.Second) // past the first backoff: the second attempt fails too
	<-h.posts
	parked(t, c)
	// State Hub is back, or the way to it changed: the receipts go at once,
	// without the clock moving.
	h.set(nil, 0)
	// The backoff's wait stays with the fake clock, unfired: parked again
	// means one wait more, the publisher's next, after it marked the post.
	stale, _ := c.Waiting()
	p.Retry()
	<-h.posts
	if !c.BlockUntil(stale+1, nil) {
		t.Fatal("the publisher never waited again")
	}
	if d.left() != 0 {
		t.Errorf("%d receipts still pending", d.left())
	}
}
