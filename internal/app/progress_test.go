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
		{"terminal", &App{Err: tty}, true},
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
		t.Errorf("a progress bar went to a file")
	}

	// On the terminal the bar draws what it counts.
	p := NewProgress(&App{Err: tty}, 100, "exporting", "msgs")
	p.Set(50)
	got := make(chan string)
	go func() {
		var out []byte
		buf := make([]byte, 1024)
		for !strings.Contains(string(out), "50/100") {
			n, err := ptmx.Read(buf)
			if err != nil {
				break
			}
			out = append(out, buf[:n]...)
		}
		got <- string(out)
	}()
	select {
	case out := <-got:
		if !strings.Contains(out, "exporting") {
			t.Errorf("terminal got %q", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress bar reached the terminal")
	}
	p.Done()
}
