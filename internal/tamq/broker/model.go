package broker

import (
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"
	xvt "github.com/charmbracelet/x/vt"

	"github.com/tmux-amq/tamq/internal/wakeup"
)

// Model is the broker's picture of the agent's terminal, fed everything the
// agent prints after the operator's terminal has it (Write copies and
// returns at once: the agent's output never waits on the model). Two
// readers take the output, each on a goroutine of its own:
//
//   - the screen: a maintained terminal emulator (charmbracelet/x/vt), read
//     by Snapshot for the prompt detector. It takes a few MB/s, so when it
//     falls more than feedLimit behind (a flood, such as a big file printed
//     in a shell) it skips all output until the agent pauses for
//     resumeAfter, and its picture is stale until the agent next redraws
//     its whole screen;
//   - the Observer, which finds addressed blocks. It is cheap and keeps up
//     with floods; only past observerLimit behind does it skip (and drop a
//     block in progress, with a notice).
type Model struct {
	Observer *Observer
	// Changed, when set, is called on the screen's goroutine after output
	// was applied (at most every ChangedEvery): the broker re-reads its view
	// of the agent.
	Changed      func()
	ChangedEvery time.Duration

	mu      sync.Mutex // the emulator and what is read off it
	emu     *xvt.Emulator
	title   titleScanner
	osc     oscCutter
	stale   bool
	drawing bool   // inside a synchronized-output frame (mode 2026)
	paste   bool   // bracketed paste on (mode 2004)
	seq     uint64 // chunks applied so far
	handled uint64 // bytes applied or skipped so far

	screen, observer feed
	done             sync.WaitGroup
}

// feedLimit is how far the screen may fall behind the agent's output: what
// the emulator takes in about a tenth of a second. A full-screen agent's
// frame is a few tens of KB.
const feedLimit = 256 << 10

// resumeAfter is the pause in the agent's output after which a screen that
// fell behind takes output again.
const resumeAfter = 50 * time.Millisecond

// observerLimit is how far the observer may fall behind.
const observerLimit = 16 << 20

// feed passes output from the relay to one reader's goroutine.
type feed struct {
	limit int
	// skipUntilPause: once behind, skip all until the output pauses.
	skipUntilPause bool

	mu       sync.Mutex
	buf      []byte
	lost     bool      // output was skipped since the reader last took some
	skipping bool      // skipping until a pause
	lastSkip time.Time // when output was last skipped
	skipped  uint64
	closed   bool
	ready    wakeup.Signal // output came, or the feed closed
}

func (f *feed) write(p []byte) {
	f.mu.Lock()
	if f.lost || f.skipping || len(f.buf)+len(p) > f.limit {
		// Once a chunk is skipped, so is all that follows until the reader
		// has taken what came before it: the gap stays in one place.
		f.lost, f.lastSkip = true, time.Now()
		f.skipping = f.skipUntilPause
		f.skipped += uint64(len(p))
	} else {
		f.buf = append(f.buf, p...)
	}
	f.mu.Unlock()
	f.ready.Wake()
}

func (f *feed) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.ready.Wake()
}

// take returns what came since the last take, swapping in spare.
func (f *feed) take(spare []byte) (chunk []byte, lost bool, skipped uint64, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	chunk, lost, skipped, closed = f.buf, f.lost, f.skipped, f.closed
	f.buf, f.lost, f.skipped = spare[:0], false, 0
	return chunk, lost, skipped, closed
}

// awaitPause waits until the output has paused for resumeAfter (or the
// feed is closed), then lets output in again.
func (f *feed) awaitPause() {
	for {
		f.mu.Lock()
		idle := time.Since(f.lastSkip)
		if idle >= resumeAfter || f.closed {
			f.skipping = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		time.Sleep(resumeAfter - idle)
	}
}

// NewModel makes a model of a cols×rows terminal and starts its readers.
func NewModel(cols, rows int, obs *Observer) *Model {
	m := &Model{Observer: obs}
	m.screen = feed{limit: feedLimit, skipUntilPause: true, ready: wakeup.New()}
	m.observer = feed{limit: observerLimit, ready: wakeup.New()}
	m.reset(max(cols, 1), max(rows, 1))
	m.done.Add(1)
	go m.runScreen()
	if obs != nil {
		obs.SetRows(rows)
		m.done.Add(1)
		go m.runObserver()
	}
	return m
}

// reset starts a fresh emulator. Called with mu held (or before the readers
// start).
func (m *Model) reset(cols, rows int) {
	if m.emu != nil {
		closeAnswers(m.emu)
	}
	emu := xvt.NewEmulator(cols, rows)
	// These run inside emu.Write, under mu. After a whole new screen (the
	// alternate screen switched, the screen erased or reset) the picture is
	// right again.
	whole := func() { m.stale = false }
	emu.SetCallbacks(xvt.Callbacks{
		AltScreen: func(bool) { whole() },
		EnableMode: func(mode ansi.Mode) {
			if mode == ansi.ModeBracketedPaste {
				m.paste = true
			}
			if mode == ansi.ModeSynchronizedOutput {
				m.drawing = true
			}
		},
		DisableMode: func(mode ansi.Mode) {
			if mode == ansi.ModeBracketedPaste {
				m.paste = false
			}
			if mode == ansi.ModeSynchronizedOutput {
				m.drawing = false
			}
		},
	})
	emu.RegisterCsiHandler('J', func(params ansi.Params) bool {
		if n, _, _ := params.Param(0, 0); n == 2 || n == 3 {
			whole()
		}
		return false // the emulator's own handler erases
	})
	emu.RegisterEscHandler('c', func() bool { whole(); return false })
	// The emulator answers the agent's terminal queries into a pipe; the
	// real terminal answers them already, so the pipe is drained and its
	// answers dropped (an undrained pipe would block the emulator).
	go io.Copy(io.Discard, emu)
	m.emu, m.drawing = emu, false
	m.osc = oscCutter{}
}

// closeAnswers ends the drain of an emulator's answers. (Emulator.Close
// would too, but it sets a flag its Read checks unsynchronized.)
func closeAnswers(emu *xvt.Emulator) {
	if c, ok := emu.InputPipe().(io.Closer); ok {
		c.Close()
	}
}

// Write hands a chunk of the agent's output to the model; it never blocks.
func (m *Model) Write(p []byte) (int, error) {
	m.screen.write(p)
	if m.Observer != nil {
		m.observer.write(p)
	}
	return len(p), nil
}

// Resize follows the agent's terminal size.
func (m *Model) Resize(cols, rows int) {
	if cols <= 0 || rows <= 0 {
		return
	}
	m.mu.Lock()
	m.emu.Resize(cols, rows)
	m.mu.Unlock()
	if m.Observer != nil {
		m.Observer.SetRows(rows)
	}
}

// Close applies what is still queued, ends the readers and then the
// observer's stream (its last block is completed).
func (m *Model) Close() {
	m.screen.close()
	m.observer.close()
	m.done.Wait()
	m.mu.Lock()
	closeAnswers(m.emu)
	m.mu.Unlock()
	if m.Observer != nil {
		m.Observer.Close()
	}
}

func (m *Model) runScreen() {
	defer m.done.Done()
	var spare []byte
	var lastChanged time.Time
	changed := time.NewTimer(time.Hour)
	changed.Stop()
	for {
		select {
		case <-m.screen.ready.C():
		case <-changed.C:
			lastChanged = time.Now()
			m.Changed()
			continue
		}
		chunk, lost, skipped, closed := m.screen.take(spare)
		if len(chunk) > 0 {
			m.apply(chunk)
		}
		if lost {
			m.lose(skipped)
			m.screen.awaitPause()
		}
		spare = chunk
		if closed {
			return
		}
		if m.Changed != nil && len(chunk) > 0 {
			changed.Reset(max(m.ChangedEvery-time.Since(lastChanged), 0))
		}
	}
}

func (m *Model) runObserver() {
	defer m.done.Done()
	var spare []byte
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case <-m.observer.ready.C():
		case <-quiet.C:
			m.Observer.Tick()
			continue
		}
		chunk, lost, _, closed := m.observer.take(spare)
		m.Observer.Write(chunk)
		if lost {
			m.Observer.Lost()
		}
		spare = chunk
		if closed {
			return
		}
		if due, ok := m.Observer.QuietDue(); ok {
			quiet.Reset(time.Until(due))
		}
	}
}

func (m *Model) apply(chunk []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emu.Write(m.osc.cut(chunk))
	m.title.feed(chunk)
	m.seq++
	m.handled += uint64(len(chunk))
}

// lose starts over after output was skipped: the screen is stale until the
// agent redraws it whole.
func (m *Model) lose(skipped uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handled += skipped
	m.reset(m.emu.Width(), m.emu.Height())
	m.stale = true
}

// Handled counts the bytes of output the screen has applied or skipped:
// once it equals what the relay passed on, a snapshot shows all of it.
func (m *Model) Handled() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handled
}

// Snapshot reads the screen as the agent last drew it.
func (m *Model) Snapshot() Screen {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, h := m.emu.Width(), m.emu.Height()
	rows := make([]string, h)
	var b strings.Builder
	for y := range h {
		b.Reset()
		for x := 0; x < w; x++ {
			c := m.emu.CellAt(x, y)
			if c == nil {
				b.WriteByte(' ')
				continue
			}
			b.WriteString(c.Content) // a wide character's second cell is empty
		}
		rows[y] = strings.TrimRight(b.String(), " ")
	}
	pos := m.emu.CursorPosition()
	return Screen{
		Rows: rows, Cols: w, CursorX: pos.X, CursorY: pos.Y, CursorVisible: !m.emu.CursorHidden(),
		Title: m.title.title, Status: m.title.status, AltScreen: m.emu.IsAltScreen(), NoBracketedPaste: !m.paste, Stale: m.stale, Drawing: m.drawing, Seq: m.seq,
	}
}
