package cli

import (
	"testing"
)

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
