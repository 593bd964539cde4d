package service

import (
	"context"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/fakehub"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// When State Hub asks for no requests until a time (GitHub's rate
// limits), the observer looks again at that time: not sooner, not on a
// backoff of its own; status says until when, and the next look. In one
// process, with State Hub in memory (fakehub) and the fake clock.
func TestTheObserverWaitsAsStateHubAsks(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	hub := fakehub.New("alpha")
	hub.Now = clk.Now
	hub.AddTask(t, "alpha", hubtest.Task{Title: "A", Status: "todo"})
	s := inProcessEngineWith(t, func(cfg *config.Loaded) {},
		func() (*gita.Registry, error) { return &gita.Registry{}, nil }, hub, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.observer.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// The first look, then the observer waits for its interval.
	if !clk.BlockUntil(1, done) || hub.Looks() != 1 {
		t.Fatalf("after the first look: %d looks", hub.Looks())
	}
	until := clk.Now().Add(40 * time.Second)
	hub.PauseUntil(until)
	clk.Advance(15 * time.Second) // the interval: a look, refused
	waitLooks(t, clk, hub, done, 2)
	st := s.observer.view
	st.mu.Lock()
	retryAt, next := st.RetryAt, st.NextLook
	st.mu.Unlock()
	if !retryAt.Equal(until) || !next.Equal(until) {
		t.Errorf("retry at %v, next look %v; want both %v", retryAt, next, until)
	}
	// Nothing before the time asked, though the interval (15 s) and the
	// backoff (1 s) have long passed.
	clk.Advance(until.Sub(clk.Now()) - time.Millisecond)
	if n := hub.Looks(); n != 2 {
		t.Fatalf("%d looks before the time State Hub named", n)
	}
	clk.Advance(time.Millisecond)
	waitLooks(t, clk, hub, done, 3)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.LastError != "" || !st.RetryAt.IsZero() || st.Polls != 2 {
		t.Errorf("after the pause: error %q, retry at %v, %d looks answered", st.LastError, st.RetryAt, st.Polls)
	}
}

// waitLooks waits until the fake has been asked for n looks and the
// observer waits on the clock again.
func waitLooks(t *testing.T, clk *clock.Fake, hub *fakehub.Hub, done <-chan struct{}, n int) {
	t.Helper()
	for hub.Looks() < n {
		_, changed := clk.Waiting()
		select {
		case <-changed:
		case <-done:
			t.Fatal("the observer stopped")
		case <-time.After(10 * time.Second):
			t.Fatalf("%d looks, want %d", hub.Looks(), n)
		}
	}
	if !clk.BlockUntil(1, done) {
		t.Fatal("the observer stopped")
	}
}
