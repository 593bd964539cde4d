package cli

import (
	"testing"
	"time"
)

// The lists' times, as a person reads them at a glance.
func TestRelativeTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{ago(now, now), "just now"},
		{ago(now.Add(time.Second), now), "just now"}, // another clock a little ahead
		{ago(now.Add(-3*time.Second), now), "3s ago"},
		{ago(now.Add(-(4*time.Minute + 10*time.Second)), now), "4m10s ago"},
		{ago(now.Add(-(2*time.Hour + 5*time.Minute + 59*time.Second)), now), "2h05m ago"},
		{ago(now.Add(-(50 * time.Hour)), now), "2d2h ago"},
		{until(now.Add(4*time.Minute+10*time.Second), now), "in 4m10s"},
		{until(now.Add(-90*time.Second), now), "overdue 1m30s"},
		{until(now.Add(400*time.Millisecond), now), "now"},
		{clockTime(now.Add(5*time.Minute+10*time.Second), now), "14:05:10"},
		{clockTime(now.Add(24*time.Hour), now), "2026-12-06 14:00:00"},
		{clockTime(time.Date(2026, 12, 5, 14, 5, 10, 0, time.FixedZone("X", 3600)), now), "13:05:10"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// A table escapes every cell: a tab or newline in one cannot break the
// columns, an escape sequence cannot act; an empty cell reads "-".
func TestTableEscapesCells(t *testing.T) {
	t.Parallel()
	tb := newTable("A", "B")
	tb.row("x\ty\x1b[2J", "")
	tb.row("long one", "z\nforged")
	want := "A              B\nx\\x09y\\x1b[2J  -\nlong one       z\\x0aforged\n"
	if got := tb.String(); got != want {
		t.Errorf("table\n%q, want\n%q", got, want)
	}
}
