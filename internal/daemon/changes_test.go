package daemon

import (
	"context"
	"testing"
	"time"
)

// A reader that saw an older version is answered at once; one that saw the
// current one waits for the next change; a wait that ends (its time, or its
// context) answers the version as it is.
func TestChangesWait(t *testing.T) {
	c := NewChanges()
	if v := c.Wait(context.Background(), 0, time.Minute); v != 1 {
		t.Fatalf("a first reader got %d, want 1 at once", v)
	}
	got := make(chan uint64)
	go func() { got <- c.Wait(context.Background(), 1, time.Minute) }()
	c.Bump()
	if v := <-got; v != 2 {
		t.Errorf("after a bump: %d, want 2", v)
	}
	if v := c.Wait(context.Background(), 2, time.Millisecond); v != 2 {
		t.Errorf("a wait that ran out: %d, want 2", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := c.Wait(ctx, 2, time.Minute); v != 2 {
		t.Errorf("a cancelled wait: %d, want 2", v)
	}
	stopping := make(chan struct{})
	s := newChanges(stopping)
	close(stopping)
	if v := s.Wait(context.Background(), 1, time.Minute); v != 1 {
		t.Errorf("a wait on a stopping service: %d, want 1 at once", v)
	}
	var none *Changes
	none.Bump() // a part built alone in a test has none: nothing happens
}
