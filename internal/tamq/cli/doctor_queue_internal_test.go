package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/doctor"
)

// A message that has waited past queueWaitWarn (for a shell's window, say)
// is a warning that names how long and the way out, `tamq cancel`; a
// younger one, or none, is not.
func TestDoctorWarnsOfAMessageThatWaitsTooLong(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	counts := map[string]int{"queued": 2, "awaiting_ack": 1}
	for _, c := range []struct {
		oldest time.Time
		want   doctor.Status
	}{
		{time.Time{}, doctor.OK},
		{now.Add(-queueWaitWarn + time.Second), doctor.OK},
		{now.Add(-queueWaitWarn), doctor.Warn},
		{now.Add(-2*time.Hour - 5*time.Minute), doctor.Warn},
	} {
		got := queueWait(now, c.oldest, counts)
		if got.Name != "queue" || got.Status != c.want {
			t.Errorf("oldest %v: %+v", c.oldest, got)
		}
		if c.want == doctor.Warn && (!strings.Contains(got.Detail, "2 queued, 1 awaiting an ack") || !strings.Contains(got.Fix, "`tamq cancel ID`")) {
			t.Errorf("oldest %v: %+v", c.oldest, got)
		}
	}
	if got := queueWait(now, now.Add(-2*time.Hour-5*time.Minute), counts); !strings.HasPrefix(got.Detail, "a message has waited 2h05m to be delivered") {
		t.Errorf("detail: %s", got.Detail)
	}
}
