package broker

import (
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// runUnderModel runs script under a relay whose output feeds a model of a
// 80×24 screen, and stops it when the test ends.
func runUnderModel(t *testing.T, script string, obs *Observer) (*Relay, *Model) {
	t.Helper()
	m := NewModel(80, 24, obs)
	r := &Relay{Argv: []string{"sh", "-c", script}, Out: io.Discard, Observe: m}
	done := make(chan struct{})
	go func() { r.Run(); close(done) }()
	t.Cleanup(func() { r.Signal(syscall.SIGKILL); <-done; m.Close() })
	return r, m
}

// Issue 10 A2: a block the agent printed before sitting at its prompt is
// sent after the quiet period, without the prompt, while the agent runs on.
func TestQuietSpellSendsTheBlockWhileTheAgentRuns(t *testing.T) {
	var mu sync.Mutex
	var blocks []Block
	obs := &Observer{
		Slugs: func() []string { return slugs },
		Emit:  func(b Block) { mu.Lock(); blocks = append(blocks, b); mu.Unlock() },
		Quiet: 50 * time.Millisecond,
	}
	runUnderModel(t, `printf 'To:net: done here\r\nsee the log\r\n$ '; exec sleep 60`, obs)
	testutil.WaitFor(t, "the block to close on the quiet spell", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(blocks) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(blocks, []Block{{"net", "done here\nsee the log", false}}) {
		t.Fatalf("blocks %+v", blocks)
	}
}

func TestModelReadsTheScreen(t *testing.T) {
	// A title, the alternate screen, a wide character, a hidden cursor placed
	// at row 3, column 5.
	script := `printf '\033]2;[ ! ] Action Required\007\033[?1049h\033[H\033[2Jtop ✻ 日本\r\n\033[3;5H\033[?25l'; exec sleep 60`
	_, m := runUnderModel(t, script, nil)
	var s Screen
	testutil.WaitFor(t, "the model to show the agent's screen", func() bool {
		s = m.Snapshot()
		return s.CursorY == 2 && s.CursorX == 4 && !s.CursorVisible
	})
	if s.Rows[0] != "top ✻ 日本" || s.Title != "[ ! ] Action Required" || !s.AltScreen || s.Stale || len(s.Rows) != 24 {
		t.Fatalf("snapshot %+v", s)
	}
	m.Resize(100, 30)
	if s := m.Snapshot(); len(s.Rows) != 30 {
		t.Fatalf("after a resize %d rows", len(s.Rows))
	}
}

// Output the screen cannot keep up with is skipped, never waited for, until
// the agent pauses; the picture is then stale until the agent redraws its
// whole screen. The observer keeps up with the same flood.
func TestModelSkipsWhatItCannotKeepUpWith(t *testing.T) {
	var mu sync.Mutex
	var blocks []Block
	obs := &Observer{Slugs: func() []string { return slugs }, Emit: func(b Block) { mu.Lock(); blocks = append(blocks, b); mu.Unlock() }}
	m := NewModel(80, 24, obs)
	m.mu.Lock() // the screen's goroutine stalls on its next chunk
	m.Write([]byte("To:net: a block in a flood\r\n"))
	m.Write(make([]byte, feedLimit+1)) // returns at once, though the screen reads nothing
	m.Write([]byte("\r\n\r\n"))
	m.mu.Unlock()
	testutil.WaitFor(t, "the screen to go stale", func() bool { return m.Snapshot().Stale })
	testutil.WaitFor(t, "the screen to take output again after a pause", func() bool {
		m.screen.mu.Lock()
		defer m.screen.mu.Unlock()
		return !m.screen.skipping
	})
	m.Write([]byte("\x1b[2Jredrawn"))
	testutil.WaitFor(t, "a full redraw to make it whole", func() bool {
		s := m.Snapshot()
		return !s.Stale && strings.HasPrefix(s.Rows[0], "redrawn")
	})
	m.Close()
	if !slices.Equal(blocks, []Block{{"net", "a block in a flood", false}}) {
		t.Fatalf("the observer lost the block in the flood: %+v", blocks)
	}
}

// Past observerLimit behind, the observer too skips, and a block it was
// reading is dropped with a notice rather than sent with a hole in it.
func TestObserverSkipsPastItsLimit(t *testing.T) {
	var notices []string
	obs := &Observer{Slugs: func() []string { return slugs }, Emit: func(Block) {}, Notice: func(n string) { notices = append(notices, n) }}
	m := NewModel(80, 24, obs)
	m.Write([]byte("To:net: a block in progress\r\n"))
	testutil.WaitFor(t, "the block to open", func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.open != nil })
	obs.mu.Lock() // the observer's goroutine stalls on its next chunk
	m.Write([]byte("more\r\n"))
	m.Write(make([]byte, observerLimit+1))
	obs.mu.Unlock()
	m.Close()
	if len(notices) != 1 || !strings.Contains(notices[0], "part of the block was missed") {
		t.Fatalf("notices %q", notices)
	}
}
