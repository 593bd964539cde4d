package cli

import (
	"strings"
	"text/tabwriter"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

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
