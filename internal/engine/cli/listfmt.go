package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The lists a person reads (leases, receipts, checkpoints) say times
// relative to now, as one reads them at a glance ("4m10s ago", "in 30s");
// --json keeps RFC 3339, for programs.

// span is a duration as a person reads it: the two largest units, whole
// seconds.
func span(d time.Duration) string {
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

// ago is a past time relative to now; a time a little ahead (another
// machine's clock) reads as now.
func ago(t, now time.Time) string {
	if d := now.Sub(t); d >= time.Second {
		return span(d) + " ago"
	}
	return "just now"
}

// until is a deadline relative to now: "in 4m10s", or how long it is
// overdue (the engine acts on it at its next look, or was stopped).
func until(t, now time.Time) string {
	if d := t.Sub(now); d >= time.Second {
		return "in " + span(d)
	} else if d <= -time.Second {
		return "overdue " + span(-d)
	}
	return "now"
}

// clockTime is a time of day in now's zone, with the date when it is not
// today's: when a retry comes.
func clockTime(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}

// table lays out rows under a header in columns. Every cell is escaped:
// ids, tasks and reasons may come from State Hub and agents, and a tab or
// newline in one would break the columns.
type table struct {
	b strings.Builder
	w *tabwriter.Writer
}

func newTable(header ...string) *table {
	t := &table{}
	t.w = tabwriter.NewWriter(&t.b, 0, 0, 2, ' ', 0)
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			t.w.Write([]byte{'\t'})
		}
		if c == "" {
			c = "-"
		}
		t.w.Write([]byte(textsafe.Escape(c)))
	}
	t.w.Write([]byte{'\n'})
}

// String is the laid-out table, each line without trailing blanks.
func (t *table) String() string {
	t.w.Flush()
	lines := strings.SplitAfter(t.b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimSuffix(l, "\n"), " ")
		if strings.HasSuffix(l, "\n") {
			lines[i] += "\n"
		}
	}
	return strings.Join(lines, "")
}
