package reltime

import (
	"testing"
	"time"
)

// Times as a person reads them at a glance.
func TestRelativeTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{Ago(now, now), "just now"},
		{Ago(now.Add(time.Second), now), "just now"}, // another clock a little ahead
		{Ago(now.Add(-3*time.Second), now), "3s ago"},
		{Ago(now.Add(-(4*time.Minute + 10*time.Second)), now), "4m10s ago"},
		{Ago(now.Add(-(2*time.Hour + 5*time.Minute + 59*time.Second)), now), "2h05m ago"},
		{Ago(now.Add(-(50 * time.Hour)), now), "2d2h ago"},
		{Until(now.Add(4*time.Minute+10*time.Second), now), "in 4m10s"},
		{Until(now.Add(-90*time.Second), now), "overdue 1m30s"},
		{Until(now.Add(400*time.Millisecond), now), "now"},
		{ClockTime(now.Add(5*time.Minute+10*time.Second), now), "14:05:10"},
		{ClockTime(now.Add(24*time.Hour), now), "2026-12-06 14:00:00"},
		{ClockTime(time.Date(2026, 12, 5, 14, 5, 10, 0, time.FixedZone("X", 3600)), now), "13:05:10"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
