package service_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/proc"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// A service killed (SIGKILL) in the middle of a burst doubles nothing: the
// burst's paste is in and its Enter pending when the kill lands; the broker
// finishes the delivery and, when the next start's session opens, says what
// it wrote, so each message arrives once, is recorded as delivered (with
// the broker's receipt, marked settled after the restart) and is not
// written again.
func TestServiceKilledMidBurstDoublesNothing(t *testing.T) {
	t.Parallel()
	// A long pause before the Enter: the kill lands inside it.
	e, tm := emptyWorkspace(t, "[delivery]\nenter_pause_ms = 1500\n", "net-kingdom")
	h := openHeld(t, e, tm, nil, "net-kingdom")["net-kingdom"]
	h.hold(t)
	var ms []api.Message
	for i := range 30 {
		text := fmt.Sprintf("To:net-kingdom: burst %02d", i)
		if i%3 == 0 {
			ms = append(ms, send(t, e, "--ack-mode", "acknowledged", text))
			continue
		}
		ms = append(ms, send(t, e, text))
	}
	h.release(t) // the burst goes in as one paste
	waitRecorded(t, e, "net-kingdom", "\x1b[201~")
	pid := pingPID(t, e)
	syscall.Kill(pid, syscall.SIGKILL)
	testutil.WaitFor(t, "the service to die", func() bool { return proc.Exited(pid) })
	if rec, _ := e.Recording("net-kingdom"); strings.HasSuffix(rec, "\r") {
		t.Fatal("the Enter went in before the kill: the test did not kill mid-delivery")
	}
	e.Tamq(t, "start", "--detach")
	got := waitDelivered(t, e, ms)
	// One window takes its deliveries in order: once a later message is in,
	// a burst sent again would be too.
	after := send(t, e, "To:net-kingdom: after the restart")
	waitDelivered(t, e, []api.Message{after})
	rec := waitRecorded(t, e, "net-kingdom", "after the restart\x1b[201~\r")
	for i := range ms {
		if n := strings.Count(rec, fmt.Sprintf(": burst %02d", i)); n != 1 {
			t.Errorf("burst %02d arrived %d times", i, n)
		}
	}
	if p := pastes(t, rec); len(p) != 2 {
		t.Errorf("%d deliveries, want 2 (the burst, then the later message): %q", len(p), p)
	}
	for i, m := range got {
		want := "injected"
		if i%3 == 0 {
			want = "awaiting_ack"
		}
		if m.State != want || m.Attempts != 1 {
			t.Errorf("burst %02d is %s after %d attempts, want %s after 1", i, m.State, m.Attempts, want)
		}
	}
	settled := 0
	for _, r := range receipts(t, e, "message.transition") {
		if r["settled"] != nil && r["path"] == "broker" {
			settled++
		}
	}
	if settled != len(ms) {
		t.Errorf("%d messages recorded as written by the broker's word after the restart, want %d", settled, len(ms))
	}
}
