package service

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
)

// The triggers the engine remembers as settled go from its memory when the
// purge deletes them from the store: a task revised every day for years
// leaves neither rows nor keys behind, only its newest trigger.
func TestSettledKeysGoWithTheirPurgedTriggers(t *testing.T) {
	// A clock a millisecond on at every reading: each revision is observed
	// after the one before, as the purge needs to tell the newest.
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	clk := &tickingClock{start: t0}
	s := inProcessEngineOpts(t, func(cfg *config.Loaded) { cfg.StateHub.APIBase = "http://127.0.0.1:1" },
		Options{Clock: clk, Registry: func() (*gita.Registry, error) { return &gita.Registry{}, nil }})
	ctx := context.Background()
	const revisions = 50
	var newest string
	for i := range revisions {
		tr := lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: fmt.Sprint("r", i), TargetRepo: "net",
			TaskID: "T-1", Reason: lease.TaskActionable}
		got, _, err := s.store.Triggers.AddTrigger(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.store.Triggers.Supersede(ctx, got.ID, "revision r"+fmt.Sprint(i+1)+" observed"); err != nil {
			t.Fatal(err)
		}
		// As consider remembers a trigger past waiting.
		s.judge.settledKeys.Store(triggerKey(tr), true)
		newest = triggerKey(tr)
	}
	settled := func() (n int) {
		s.judge.settledKeys.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := settled(); n != revisions {
		t.Fatalf("%d settled keys before the purge, want %d", n, revisions)
	}
	res, err := s.retention.purgeHistory(ctx, clk.Now().Add(time.Hour), false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Triggers != revisions-1 {
		t.Fatalf("the purge deleted %d triggers, want %d", res.Triggers, revisions-1)
	}
	if n := settled(); n != 1 {
		t.Errorf("%d settled keys after the purge, want 1 (the newest trigger's)", n)
	}
	if _, ok := s.judge.settledKeys.Load(newest); !ok {
		t.Error("the newest trigger, which the purge kept, is no longer remembered as settled")
	}
}

// tickingClock reads a millisecond later at every reading; it never waits
// (the test runs no worker that does).
type tickingClock struct {
	start time.Time
	ticks atomic.Int64
}

func (c *tickingClock) Now() time.Time {
	return c.start.Add(time.Duration(c.ticks.Add(1)) * time.Millisecond)
}

func (c *tickingClock) After(time.Duration) <-chan time.Time { return nil }

// The skipped objects already reported are remembered up to a bound, the
// oldest forgotten first; one remembered is not reported again.
func TestInvalidSeenStaysBounded(t *testing.T) {
	seen := newSeenSet(3)
	for i := range 10 {
		if !seen.add(fmt.Sprint("task\x00T-", i, "\x00too long")) {
			t.Fatalf("key %d taken for one seen before", i)
		}
		if n := seen.len(); n > 3 {
			t.Fatalf("%d keys remembered, the bound is 3", n)
		}
	}
	if seen.add("task\x00T-9\x00too long") {
		t.Error("the newest key was reported again")
	}
	if !seen.add("task\x00T-0\x00too long") {
		t.Error("the oldest key was not forgotten")
	}
}
