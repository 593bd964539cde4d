package service

import (
	"context"
	"testing"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// A delivery that went the tmux way because the window's broker had not
// attached yet, and found no agent or no prompt there, holds the window by
// what its pane showed. When the broker attached meanwhile (it clears that
// hold as it attaches, and may have done so before the hold was set), the
// hold must not stay: an idle service lists no panes, so nothing else would
// lift it, and the window would take nothing while its broker is ready.
func TestAScreenHoldDoesNotOutliveABrokerThatAttachedMeanwhile(t *testing.T) {
	t.Parallel()
	svc, _, _ := inProcessService(t, t.TempDir(), Options{Writer: discardWriter{}})
	key := store.DeliveryKey("ep-1", "net-kingdom")
	held := func() string {
		svc.live.mu.Lock()
		defer svc.live.mu.Unlock()
		return svc.live.reasonOf(key)
	}
	m := queue.Message{ID: "m-1", EndpointID: "ep-1", Target: "net-kingdom"}
	deferred := tmuxWrote(api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: program.NoAgentRunning})

	// No broker: the pane's word holds the window until it is looked at again.
	svc.delivery.deferDelivery(context.Background(), []queue.Message{m}, deferred)
	if got := held(); got != program.NoAgentRunning {
		t.Fatalf("held for %q without a broker, want %q", got, program.NoAgentRunning)
	}
	svc.watcher.setWait(fromScreen, "ep-1", "net-kingdom", "")

	// The broker attached (and cleared the screen's hold) before the
	// deferral was recorded.
	svc.brokers.mu.Lock()
	if svc.brokers.live == nil {
		svc.brokers.live = map[string]*brokerConn{}
	}
	svc.brokers.live[key] = &brokerConn{endpointID: "ep-1", repo: "net-kingdom", closed: make(chan struct{})}
	svc.brokers.mu.Unlock()
	svc.delivery.deferDelivery(context.Background(), []queue.Message{m}, deferred)
	if got := held(); got != "" {
		t.Errorf("the window is held for %q though its broker is attached", got)
	}
}
