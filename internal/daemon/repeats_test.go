package daemon

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
)

// logLines is a log's output, a line per write, told on written as each
// comes (the summary of a run is written by a goroutine of its own).
type logLines struct {
	mu      sync.Mutex
	lines   []string
	written chan string
}

func newLogLines() *logLines { return &logLines{written: make(chan string, 4096)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimSuffix(string(p), "\n")
	l.lines = append(l.lines, line)
	l.written <- line
	return len(p), nil
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// next waits for the next line written.
func (l *logLines) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case line := <-l.written:
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("no line written: %s", what)
		return ""
	}
}

// drain takes the lines written so far off written.
func (l *logLines) drain() {
	for {
		select {
		case <-l.written:
		default:
			return
		}
	}
}

func limited(window time.Duration) (*slog.Logger, *Repeats, *logLines, *clock.Fake) {
	out := newLogLines()
	clk := clock.NewFake(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	rp := NewRepeats(clk, window)
	text := slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{} // the fake clock's time is not the record's
		}
		return a
	}})
	return slog.New(rp.Handler(text)), rp, out, clk
}

// Security issue 37 (low): 5,375 warnings in 27 minutes took 1.8 MB of
// log. A warning repeated within the window is written once; when the
// window ends, one line gives the count with the last one's details; the
// next one after it starts a run of its own. An error's text, a pid or a
// count changing from one to the next does not make it another warning.
func TestRepeatedWarningsAreWrittenOnceWithACount(t *testing.T) {
	log, rp, out, clk := limited(time.Minute)
	defer rp.Close()
	for i := range 5375 {
		log.Warn("State Hub is not reachable; backing off", "error", fmt.Sprintf("dial tcp: attempt %d refused", i), "peer_pid", 1000+i)
		clk.Advance(10 * time.Millisecond)
	}
	first := out.next(t, "the first warning")
	if want := `level=WARN msg="State Hub is not reachable; backing off" error="dial tcp: attempt 0 refused" peer_pid=1000`; first != want {
		t.Errorf("first line %q, want %q", first, want)
	}
	if n, _ := clk.Waiting(); n != 1 || len(out.all()) != 1 {
		t.Fatalf("%d lines written, %d waits on the clock: %q", len(out.all()), n, out.all())
	}
	clk.Advance(time.Minute)
	summary := out.next(t, "the count at the window's end")
	if want := `level=WARN msg="State Hub is not reachable; backing off (repeated 5374 times in the last 1m0s)" error="dial tcp: attempt 5374 refused" peer_pid=6374`; summary != want {
		t.Errorf("count line %q, want %q", summary, want)
	}
	log.Warn("State Hub is not reachable; backing off", "error", "dial tcp: again")
	if line := out.next(t, "the first of the next run"); !strings.HasSuffix(line, `backing off" error="dial tcp: again"`) {
		t.Errorf("the next run's first line: %q", line)
	}
	// Seen once in its window: nothing to count, nothing more written.
	clk.Advance(time.Hour)
	log.Warn("another warning")
	if line := out.next(t, "another warning"); line != `level=WARN msg="another warning"` || len(out.all()) != 4 {
		t.Errorf("lines %q", out.all())
	}
}

// What a warning is about is part of it: a lease's warning does not hide
// another lease's, nor an endpoint's (named by With) another's; the level
// too. Info and debug lines are all written.
func TestRepeatsAreTheSameWarningAboutTheSameThing(t *testing.T) {
	log, rp, out, clk := limited(time.Minute)
	defer rp.Close()
	for range 3 {
		log.Warn("wake not sent yet", "lease", "L-1", "error", "x")
		log.Warn("wake not sent yet", "lease", "L-2", "error", "y")
		log.Error("wake not sent yet", "lease", "L-1")
		log.With("endpoint", "e1").Warn("cannot list the windows")
		log.With("endpoint", "e2").Warn("cannot list the windows")
		log.Info("lease offered", "lease", "L-1")
		log.Info("lease offered", "lease", "L-1")
	}
	if got := len(out.all()); got != 5+6 {
		t.Fatalf("%d lines, want 5 first lines and 6 info lines: %q", got, out.all())
	}
	out.drain()
	clk.Advance(time.Minute)
	var counts []string
	for range 5 {
		counts = append(counts, out.next(t, "a run's count"))
	}
	for _, want := range []string{
		`level=WARN msg="wake not sent yet (repeated 2 times in the last 1m0s)" lease=L-1 error=x`,
		`level=WARN msg="wake not sent yet (repeated 2 times in the last 1m0s)" lease=L-2 error=y`,
		`level=ERROR msg="wake not sent yet (repeated 2 times in the last 1m0s)" lease=L-1`,
		`level=WARN msg="cannot list the windows (repeated 2 times in the last 1m0s)" endpoint=e1`,
		`level=WARN msg="cannot list the windows (repeated 2 times in the last 1m0s)" endpoint=e2`,
	} {
		if !strings.Contains(strings.Join(counts, "\n"), want) {
			t.Errorf("no count line %q in\n%s", want, strings.Join(counts, "\n"))
		}
	}
}

// A service that stops tells what it held back, over the time it held it;
// after Close every record is written. A window of 0 limits nothing.
func TestRepeatsAreToldAtCloseAndCanBeOff(t *testing.T) {
	log, rp, out, clk := limited(time.Minute)
	log.Warn("cannot read endpoints", "error", "disk")
	log.Warn("cannot read endpoints", "error", "disk")
	clk.Advance(20 * time.Second)
	rp.Close()
	if got := out.all(); len(got) != 2 || got[1] != `level=WARN msg="cannot read endpoints (repeated 1 time in the last 20s)" error=disk` {
		t.Errorf("lines %q", got)
	}
	log.Warn("cannot read endpoints")
	log.Warn("cannot read endpoints")
	if got := len(out.all()); got != 4 {
		t.Errorf("%d lines after Close", got)
	}

	log, rp, out, _ = limited(0)
	defer rp.Close()
	for range 3 {
		log.Warn("same")
	}
	if got := len(out.all()); got != 3 {
		t.Errorf("a window of 0 wrote %d of 3 lines", got)
	}
}

// The runs kept are bounded: past maxRuns different warnings in one
// window, the one seen longest ago makes room, its count told then. A
// warning that keeps repeating through a burst of different ones is still
// counted, not written each time.
func TestRepeatsKeepABoundedNumberOfRuns(t *testing.T) {
	log, rp, out, _ := limited(time.Minute)
	defer rp.Close()
	log.Warn("cannot read endpoints", "error", "first")
	log.Warn("cannot read endpoints", "error", "second")
	for i := range maxRuns + 10 {
		log.Warn("cannot deliver", "message", fmt.Sprint(i))
		log.Warn("State Hub is not reachable")
	}
	lines := out.all()
	rp.mu.Lock()
	runs := len(rp.runs)
	rp.mu.Unlock()
	if runs != maxRuns || len(lines) != 1+1+(maxRuns+10)+1 {
		t.Fatalf("%d runs kept, %d lines written", runs, len(lines))
	}
	if n := strings.Count(strings.Join(lines, "\n"), "State Hub is not reachable"); n != 1 {
		t.Errorf("the warning that repeats through the burst was written %d times", n)
	}
	want := `level=WARN msg="cannot read endpoints (repeated 1 time in the last 0s)" error=second`
	if !slices.Contains(lines, want) {
		t.Errorf("the count of the run that made room is not %q", want)
	}
}

// BenchmarkRepeats is the cost of a held-back warning against that of
// writing it (to io.Discard).
func BenchmarkRepeats(b *testing.B) {
	text := slog.NewTextHandler(discard{}, nil)
	b.Run("written", func(b *testing.B) {
		log := slog.New(text)
		for b.Loop() {
			log.Warn("State Hub is not reachable; backing off", "error", "dial tcp 127.0.0.1:8100: connect: connection refused")
		}
	})
	b.Run("written through", func(b *testing.B) {
		rp := NewRepeats(clock.System, time.Hour)
		defer rp.Close()
		log := slog.New(rp.Handler(text))
		i := 0
		for b.Loop() {
			i++
			log.Warn("cannot deliver", "message", i, "error", "the window is gone")
		}
	})
	b.Run("held back", func(b *testing.B) {
		rp := NewRepeats(clock.System, time.Hour)
		defer rp.Close()
		log := slog.New(rp.Handler(text))
		for b.Loop() {
			log.Warn("State Hub is not reachable; backing off", "error", "dial tcp 127.0.0.1:8100: connect: connection refused")
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
