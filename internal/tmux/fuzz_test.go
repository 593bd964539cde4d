package tmux

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// formatWindows writes ws as tmux prints listFormat.
func formatWindows(ws []Window) string {
	var b strings.Builder
	for _, w := range ws {
		dead := "0"
		if w.Dead {
			dead = "1"
		}
		exit := ":"
		if w.DeadStatus >= 0 {
			exit = strconv.Itoa(w.DeadStatus) + ":"
		}
		for _, f := range []string{w.ID, w.PaneID, strconv.Itoa(w.PanePID), dead, exit,
			strconv.Itoa(len(w.Session)), strconv.Itoa(len(w.Name)), strconv.Itoa(len(w.Repo))} {
			b.WriteString(f + "\x1f")
		}
		b.WriteString(w.Session + w.Name + w.Repo + "\n")
	}
	return b.String()
}

// FuzzParseWindows reads arbitrary list-windows output (names are free
// text: tmux prints them raw, control characters included). Nothing panics;
// a window read has fixed fields without separators; and the windows,
// printed again as tmux would, read back the same.
func FuzzParseWindows(f *testing.F) {
	for _, out := range []string{
		"",
		"@1\x1f%1\x1f4242\x1f0\x1f127:\x1f4\x1f3\x1f3\x1ftamqnetnet\n",
		"@1\x1f%1\x1f4242\x1f1\x1f127:\x1f4\x1f0\x1f0\x1ftamq\n@2\x1f%7\x1f99\x1f0\x1f127:\x1f1\x1f5\x1f0\x1fs\x1f\n;\x1b[\n",
		"@1\x1f%1\x1f4242\x1f0\x1f127:\x1f9\x1f0\x1f0\x1fshort\n",
		"@1\x1f%1\x1fpid\x1f0\x1f127:\x1f0\x1f0\x1f0\x1f\n",
		"@1\x1f%1\x1f1\x1f0\x1f127:\x1f-1\x1f0\x1f0\x1f\n",
		// Lengths whose sum overflows: this sliced out of range.
		"@1\x1f%1\x1f1\x1f0\x1f127:\x1f9223372036854775807\x1f9223372036854775807\x1f2\x1f\n",
	} {
		f.Add(out)
	}
	f.Fuzz(func(t *testing.T, out string) {
		ws, err := parseWindows(out)
		if err != nil {
			return
		}
		for _, w := range ws {
			if strings.ContainsAny(w.ID+w.PaneID, "\x1f\n") {
				t.Fatalf("window %+v: a fixed field holds a separator", w)
			}
		}
		again, err := parseWindows(formatWindows(ws))
		if err != nil || !reflect.DeepEqual(again, ws) {
			t.Fatalf("windows %+v printed again read as %+v, %v", ws, again, err)
		}
	})
}

// formatCapture writes c as Capture's tmux call prints it.
func formatCapture(paneID string, c Capture) string {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return strings.Join([]string{paneID, strconv.Itoa(c.CursorX), strconv.Itoa(c.CursorY), flag(c.CursorVisible),
		flag(c.AltScreen), strconv.Itoa(c.Width), strconv.Itoa(len(c.Title)), c.Title + "\n" + strings.Join(c.Rows, "\n") + "\n"}, "\x1f")
}

// FuzzParseCapture reads arbitrary output of Capture's tmux call. Nothing
// panics; a capture read has rows without newlines or trailing spaces; and
// printed again as tmux would, it reads back the same.
func FuzzParseCapture(f *testing.F) {
	for _, out := range []string{
		"%3\x1f2\x1f0\x1f1\x1f0\x1f80\x1f5\x1fagent\n> \nrow two   \n",
		"%3\x1f0\x1f0\x1f0\x1f1\x1f80\x1f0\x1f\n",
		"%3\x1f0\x1f0\x1f0\x1f1\x1f80\x1f3\x1fa\x1fb\n\n",
		"%3\x1f0\x1f0\x1f0\x1f1\x1f80\x1f99\x1fshort\n",
		"%4\x1f0\x1f0\x1f0\x1f1\x1f80\x1f0\x1f\n",
		// A negative title length: this indexed before the title.
		"%3\x1f0\x1f0\x1f0\x1f0\x1f0\x1f-1\x1f\n",
	} {
		f.Add(out)
	}
	f.Fuzz(func(t *testing.T, out string) {
		c, ok := parseCapture("%3", out)
		if !ok {
			return
		}
		for _, row := range c.Rows {
			if strings.Contains(row, "\n") || strings.HasSuffix(row, " ") {
				t.Fatalf("row %q", row)
			}
		}
		again, ok := parseCapture("%3", formatCapture("%3", c))
		if !ok || !reflect.DeepEqual(again, c) {
			t.Fatalf("capture %+v printed again read as %+v, %v", c, again, ok)
		}
	})
}
