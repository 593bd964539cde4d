package service

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The watcher lists a tmux server whose every window has a live broker once
// per brokeredListInterval, not once per listInterval: its brokers already
// report what a listing would find (docs/performance.md, "Scale"). A window
// without its broker brings the plain interval back. The watcher's turns are
// stepped through with their times given, so no test waits for the real
// intervals to pass.
func TestTheWatcherListsABrokeredServerLessOften(t *testing.T) {
	t.Parallel()
	svc, _ := setup(t, Options{})
	// The service's workers are never run; running them once, stopped
	// at once, closes what Start opened.
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		svc.Run(ctx)
	})
	ctx := context.Background()
	tm := testutil.NewTmux(t)
	pid, err := strconv.Atoi(tm.Must(t, "display", "-p", "#{pid}"))
	if err != nil {
		t.Fatal(err)
	}
	ep := "tmux-amq-" + strconv.Itoa(pid)
	pane := tm.Must(t, "display", "-p", "#{pane_id}")
	if err := svc.store.Endpoints.Register(ctx, queue.Endpoint{ID: ep, TmuxSocket: tm.Must(t, "display", "-p", "#{socket_path}"),
		ServerPID: pid, Session: "tamq",
		Windows: []queue.Window{{Repo: "net-kingdom", RepoPath: t.TempDir(), WindowID: "@0", PaneID: pane, Mode: queue.Manual}}}); err != nil {
		t.Fatal(err)
	}
	svc.endpoints.changed()
	listed := func() time.Time {
		svc.watcher.mu.Lock()
		defer svc.watcher.mu.Unlock()
		return svc.watcher.listed[ep]
	}
	key := store.DeliveryKey(ep, "net-kingdom")
	setBroker := func(on bool) {
		svc.brokers.mu.Lock()
		defer svc.brokers.mu.Unlock()
		if svc.brokers.live == nil {
			svc.brokers.live = map[string]*brokerConn{}
		}
		if on {
			svc.brokers.live[key] = &brokerConn{endpointID: ep, repo: "net-kingdom", paneID: pane, closed: make(chan struct{})}
		} else {
			delete(svc.brokers.live, key)
		}
	}
	// turn runs one turn of the watcher at t0+at and says whether it listed
	// the server.
	t0 := time.Now()
	turn := func(at time.Duration) bool {
		before := listed()
		svc.watcher.watchOnce(ctx, t0.Add(at))
		after := listed()
		if !after.Equal(before) && !after.Equal(t0.Add(at)) {
			t.Fatalf("listed at %v, want at t0+%v", after.Sub(t0), at)
		}
		return !after.Equal(before)
	}

	setBroker(true)
	if !turn(0) {
		t.Fatal("a new endpoint was not listed at once")
	}
	for _, at := range []time.Duration{listInterval + time.Second, brokeredListInterval - time.Second} {
		if turn(at) {
			t.Errorf("the brokered server was listed %v after the last listing (its interval is %v)", at, brokeredListInterval)
		}
	}
	if !turn(brokeredListInterval) {
		t.Errorf("the brokered server was not listed %v after the last listing", brokeredListInterval)
	}
	// The broker goes: the plain interval again.
	setBroker(false)
	if turn(brokeredListInterval + listInterval - time.Second) {
		t.Errorf("a server with a window without a broker was listed before its interval (%v)", listInterval)
	}
	if !turn(brokeredListInterval + listInterval) {
		t.Errorf("a server with a window without a broker was not listed %v after the last listing", listInterval)
	}
}
