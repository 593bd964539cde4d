// Package reltime says times as a person reads them at a glance, relative
// to now ("4m10s ago", "in 30s", "overdue 1m30s") or as a time of day: the
// one way every human view of both programs says them. --json output keeps
// RFC 3339, for programs.
package reltime

import (
	"fmt"
	"time"
)

// Span is a duration as a person reads it: the two largest units, whole
// seconds.
func Span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// Ago is a past time relative to now; a time a little ahead (another
// machine's clock) reads as now.
func Ago(t, now time.Time) string {
	if d := now.Sub(t); d >= time.Second {
		return Span(d) + " ago"
	}
	return "just now"
}

// Until is a deadline relative to now: "in 4m10s", or how long it is
// overdue (the engine acts on it at its next look, or was stopped).
func Until(t, now time.Time) string {
	if d := t.Sub(now); d >= time.Second {
		return "in " + Span(d)
	} else if d <= -time.Second {
		return "overdue " + Span(-d)
	}
	return "now"
}

// ClockTime is a time of day in now's zone, with the date when it is not
// today's: when a retry comes.
func ClockTime(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}
