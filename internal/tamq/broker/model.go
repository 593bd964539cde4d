package broker

import (
	"io"
	"strings"
	"sync"
	"time"

	xvt "github.com/charmbracelet/x/vt"
)

// Model is the broker's picture of the agent's terminal: a maintained
// terminal emulator (charmbracelet/x/vt) fed everything the agent prints,
// from which Snapshot reads the screen for the prompt detector, and the
// Observer fed the same bytes for addressed blocks. Both run on the model's
// own goroutine: the relay hands each chunk over (Write copies and returns
// at once) after the operator's terminal already has it, so the agent's
// output never waits on the model. Should the model fall more than
// feedLimit behind, the missing bytes are skipped and the screen marked
// stale until the agent next redraws it whole.
type Model struct {
	Observer *Observer
	// Changed, when set, is called on the model's goroutine after output
	// was applied (at most every ChangedEvery): the broker re-reads its
	// view of the agent.
	Changed      func()
	ChangedEvery time.Duration

	mu      sync.Mutex // the emulator and what is read off it
	emu     *xvt.Emulator
	title   titleScanner
	stale   bool
	seq     uint64 // chunks applied so far
	handled uint64 // bytes applied or skipped so far

	feed feed
	done chan struct{}
}

// feedLimit is how far the model may fall behind the agent's output.
const feedLimit = 16 << 20

// feed passes output from the relay to the model's goroutine.
type feed struct {
	mu      sync.Mutex
	buf     []byte
	lost    bool
	skipped uint64
	closed  bool
	ready   chan struct{}
}

// NewModel makes a model of a cols×rows terminal and starts its goroutine.
func NewModel(cols, rows int, obs *Observer) *Model {
	m := &Model{Observer: obs, done: make(chan struct{})}
	m.feed.ready = make(chan struct{}, 1)
	m.reset(max(cols, 1), max(rows, 1))
	if obs != nil {
		obs.SetRows(rows)
	}
	go m.run()
	return m
}

// reset starts a fresh emulator. Called with mu held (or before the
// goroutine starts).
func (m *Model) reset(cols, rows int) {
	if m.emu != nil {
		closeAnswers(m.emu)
	}
	emu := xvt.NewEmulator(cols, rows)
	// The emulator answers the agent's terminal queries into a pipe; the
	// real terminal answers them already, so the pipe is drained and its
	// answers dropped (an undrained pipe would block the emulator).
	go io.Copy(io.Discard, emu)
	m.emu = emu
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
	f := &m.feed
	f.mu.Lock()
	if f.lost || len(f.buf)+len(p) > feedLimit {
		// Once a chunk is skipped, so is all that follows until the model
		// has taken what came before it: the gap stays in one place.
		f.lost = true
		f.skipped += uint64(len(p))
	} else {
		f.buf = append(f.buf, p...)
	}
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
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

// Close applies what is still queued, ends the model's goroutine and then
// the observer's stream (its last block is completed).
func (m *Model) Close() {
	m.feed.mu.Lock()
	m.feed.closed = true
	m.feed.mu.Unlock()
	select {
	case m.feed.ready <- struct{}{}:
	default:
	}
	<-m.done
	m.mu.Lock()
	closeAnswers(m.emu)
	m.mu.Unlock()
	if m.Observer != nil {
		m.Observer.Close()
	}
}

func (m *Model) run() {
	defer close(m.done)
	var spare []byte
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	var lastChanged time.Time
	changed := time.NewTimer(time.Hour)
	changed.Stop()
	for {
		select {
		case <-m.feed.ready:
		case <-quiet.C:
			m.Observer.Tick()
			continue
		case <-changed.C:
			lastChanged = time.Now()
			m.Changed()
			continue
		}
		f := &m.feed
		f.mu.Lock()
		chunk, lost, closed, skipped := f.buf, f.lost, f.closed, f.skipped
		f.buf, f.lost, f.skipped = spare[:0], false, 0
		f.mu.Unlock()
		if len(chunk) > 0 {
			m.apply(chunk)
		}
		if lost {
			m.lose(skipped)
		}
		spare = chunk
		if closed {
			return
		}
		if m.Observer != nil {
			if due, ok := m.Observer.QuietDue(); ok {
				quiet.Reset(time.Until(due))
			}
		}
		if m.Changed != nil && len(chunk) > 0 {
			changed.Reset(max(m.ChangedEvery-time.Since(lastChanged), 0))
		}
	}
}

func (m *Model) apply(chunk []byte) {
	var redraws uint64
	if m.Observer != nil {
		redraws = m.Observer.Redraws()
		m.Observer.Write(chunk)
	}
	m.mu.Lock()
	m.emu.Write(chunk)
	m.title.feed(chunk)
	m.seq++
	m.handled += uint64(len(chunk))
	if m.Observer != nil && m.Observer.Redraws() != redraws {
		m.stale = false // the agent drew a whole new screen: the picture is right again
	}
	m.mu.Unlock()
}

// lose starts over after output was skipped: the screen is stale until the
// agent redraws it whole, and a block in progress cannot be trusted.
func (m *Model) lose(skipped uint64) {
	m.mu.Lock()
	m.handled += skipped
	m.reset(m.emu.Width(), m.emu.Height())
	m.stale = true
	m.mu.Unlock()
	if m.Observer != nil {
		m.Observer.Lost()
	}
}

// Handled counts the bytes of output the model has applied or skipped:
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
		Rows: rows, CursorX: pos.X, CursorY: pos.Y, CursorVisible: !m.emu.CursorHidden(),
		Title: m.title.title, AltScreen: m.emu.IsAltScreen(), Stale: m.stale, Seq: m.seq,
		Drawing: m.Observer != nil && m.Observer.Drawing(),
	}
}
