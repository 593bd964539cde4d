package service_test

import (
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// A message to a shell's window waits until someone runs an agent there,
// which may be never. The operator drops it with `tamq cancel ID`: it ends
// cancelled with a receipt, is never written, and what cannot be cancelled
// (written, unknown, cancelled already) says why and what to do.
func TestTheOperatorCancelsAQueuedMessage(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, agentConfig, "alpha")
	shellWindow(t, e, tm, "alpha")
	testutil.WaitFor(t, "the window to be held", func() bool { return waitReason(t, e, "alpha") == "no agent running" })
	m := send(t, e, "To:alpha: for an agent that never comes")
	testutil.WaitFor(t, "the message to wait", func() bool { return stateOf(t, e, m.ID).LastError == "no agent running" })

	r := e.Run(t, "tamq", "cancel", m.ID)
	if r.Status != 0 || r.Stdout != "cancelled "+m.ID+" (now cancelled)\n" {
		t.Fatalf("tamq cancel: %s", r)
	}
	if got := stateOf(t, e, m.ID); got.State != "cancelled" || got.LastError != "cancelled by the operator" {
		t.Errorf("after cancel: %+v", got)
	}
	var found bool
	for _, rc := range receipts(t, e, store.KindTransition) {
		if rc["subject_id"] == m.ID && rc["status"] == "cancelled" && rc["from"] == "queued" && rc["reason"] == "cancelled by the operator" {
			found = true
		}
	}
	if !found {
		t.Errorf("no receipt of the cancel: %v", receipts(t, e, store.KindTransition))
	}
	if w := waitReason(t, e, "alpha"); w != "no agent running" {
		t.Errorf("the window's wait reason: %q", w)
	}

	if r := e.Run(t, "tamq", "cancel", m.ID); r.Status != 13 || !strings.Contains(r.Stderr, "only a queued message can be cancelled") {
		t.Errorf("cancel twice: %s", r)
	}
	if r := e.Run(t, "tamq", "cancel", "00000000-0000-7000-8000-000000000042"); r.Status != 12 || !strings.Contains(r.Stderr, "no message 00000000-0000-7000-8000-000000000042") {
		t.Errorf("cancel of an unknown id: %s", r)
	}
	if r := e.Run(t, "tamq", "cancel"); r.Status != 2 {
		t.Errorf("cancel without an id: %s", r)
	}
}

// A message written already is not cancelled: the hint names `tamq ack`.
func TestCancelRefusesAWrittenMessage(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	m := send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: read this")
	waitState(t, e, m.ID, "awaiting_ack")
	r := e.Run(t, "tamq", "cancel", m.ID)
	if r.Status != 13 || !strings.Contains(r.Stderr, "was written already") || !strings.Contains(r.Stderr, "tamq ack "+m.ID) {
		t.Errorf("cancel of a written message: %s", r)
	}
	if got := stateOf(t, e, m.ID); got.State != "awaiting_ack" {
		t.Errorf("after a refused cancel: %+v", got)
	}
}
