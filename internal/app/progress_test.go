package app

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

func TestProgressOnlyOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	read := readUntil(t, ptmx)
	file, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		name string
		app  *App
		want bool
	}{
		// A clock that stands still: the second count is never redrawn.
		{"terminal", &App{Err: tty, Now: func() time.Time { return time.Unix(0, 0) }}, true},
		{"file", &App{Err: file}, false},
		{"buffer", &App{Err: &bytes.Buffer{}}, false},
		{"--quiet", &App{Err: tty, Quiet: true}, false},
		{"--json", &App{Err: tty, JSON: true}, false},
	} {
		p := NewProgress(c.app, 100, "exporting", "msgs")
		if (p != nil) != c.want {
			t.Errorf("%s: progress shown = %v", c.name, p != nil)
		}
		// A silent one takes every call.
		p.Set(50)
		p.Add(1)
		p.Done()
	}
	if fi, _ := file.Stat(); fi.Size() != 0 {
		t.Errorf("a progress line went to a file")
	}
	if out := read("\r\x1b[K"); out != "\rexporting 50/100 (50%) msgs\x1b[K\r\x1b[K" {
		t.Errorf("the terminal case drew %q", out)
	}

	// On the terminal the line says what it counts, and Done clears it.
	p := NewProgress(&App{Err: tty}, 1000, "exporting", "msgs")
	p.Set(500)
	if out := read("(50%)"); !strings.Contains(out, "\rexporting 500/1,000 (50%) msgs") {
		t.Errorf("terminal got %q", out)
	}
	p.Done()
	if out := read("\x1b[K"); out != "\r\x1b[K" {
		t.Errorf("Done wrote %q, want the line cleared", out)
	}

	// Bytes of an unknown total, and a redraw at most every 100 ms: a second
	// count at once is not drawn, the next one after the pause is.
	clock := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	q := NewProgress(&App{Err: tty, Now: func() time.Time { return clock }}, -1, "replaying", "bytes")
	q.Set(2_500_000)
	clock = clock.Add(redrawEvery - time.Millisecond)
	q.Add(1)
	clock = clock.Add(time.Millisecond)
	q.Add(499_999)
	if out := read("3.0 MB"); out != "\rreplaying 2.5 MB\x1b[K\rreplaying 3.0 MB\x1b[K" {
		t.Errorf("terminal got %q", out)
	}
}

// readUntil returns a function that reads the terminal's other end until what
// it read holds want, and returns what it read since the last call.
func readUntil(t *testing.T, ptmx *os.File) func(want string) string {
	chunks := make(chan string, 64)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := ptmx.Read(buf)
			if err != nil {
				close(chunks)
				return
			}
			chunks <- string(buf[:n])
		}
	}()
	return func(want string) string {
		var out string
		for !strings.Contains(out, want) {
			select {
			case c, ok := <-chunks:
				if !ok {
					t.Fatalf("terminal closed; read %q, waiting for %q", out, want)
				}
				out += c
			case <-time.After(10 * time.Second):
				t.Fatalf("read %q; %q never reached the terminal", out, want)
			}
		}
		return out
	}
}
