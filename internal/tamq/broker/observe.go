package broker

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/tamq/queue"
)

// Block is one addressed message the agent printed: "To:<target>: body".
// Unknown marks a target that is not a registered slug (as written, up to its
// first colon): it is still passed on, so the service records the refusal.
type Block struct {
	Target  string
	Body    string
	Unknown bool
}

// Observer reads what the agent prints and finds its addressed blocks. The
// terminal stream is decoded by a maintained parser's state machine (escape
// sequences of every kind are dropped, never guessed at with patterns), lines are assembled as a
// terminal would show them (a carriage return goes back to the line's start;
// CRLF is one line end), and then:
//
//   - a line that starts, after spaces, with "To:<slug>:" for a registered
//     slug opens a block; the longest registered slug that matches wins, since
//     slugs may contain spaces, commas and colons;
//   - the block closes on an empty line, the next address, or Close;
//   - a block that repeats one emitted within RedrawWindow (a full-screen
//     program redrawing its screen) is dropped;
//   - a line that is one of the lines we recently injected is never an
//     address, however the agent echoes it.
//
// An address to an unregistered slug makes a block marked Unknown.
// Observer is safe for concurrent use.
type Observer struct {
	// Slugs returns the registered slugs (re-read by the caller as gita
	// changes).
	Slugs func() []string
	// Emit receives each completed block.
	Emit func(Block)
	Now  func() time.Time

	mu      sync.Mutex // Write runs in the relay, Injected in the delivery session
	paste   atomic.Bool
	vt      *vt
	line    []rune
	col     int
	open    *Block
	lines   int
	emitted []emitted
	echoes  []echo
}

type emitted struct {
	block Block
	at    time.Time
}

type echo struct {
	line string
	at   time.Time
}

// RedrawWindow is how long an identical block counts as a redraw of the one
// already sent.
const RedrawWindow = 10 * time.Minute

// EchoWindow is how long lines we injected are recognized when they come back.
const EchoWindow = 10 * time.Minute

// maxLine bounds one line; a longer one is not an address anyway.
const maxLine = queue.MaxBody + 256

func (o *Observer) init() {
	if o.vt != nil {
		return
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.vt = &vt{
		print:   o.print,
		execute: o.execute,
		csi: func(prefix, final byte, params []int) {
			// The agent turning bracketed paste on or off (CSI ? 2004 h / l).
			if prefix == '?' && (final == 'h' || final == 'l') {
				for _, p := range params {
					if p == 2004 {
						o.paste.Store(final == 'h')
					}
				}
			}
			switch final {
			case 'A', 'B', 'E', 'F', 'H', 'f', 'd':
				// A cursor move to another row ends the line as a terminal shows it.
				o.endLine()
			case 'G', '`':
				o.col = 0 // column moves: only the start matters to us
			case 'K':
				if o.col < len(o.line) {
					o.line = o.line[:o.col]
				}
			}
		},
	}
}

// BracketedPaste reports whether the agent has bracketed paste on.
func (o *Observer) BracketedPaste() bool { return o.paste.Load() }

// Write feeds output of the agent.
func (o *Observer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	for _, b := range p {
		o.vt.advance(b)
	}
	return len(p), nil
}

// Injected records text we wrote into the agent, so its lines are never
// read back as addresses.
func (o *Observer) Injected(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	now := o.Now()
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), ">")); l != "" {
			o.echoes = append(o.echoes, echo{line: l, at: now})
		}
	}
	o.expire(now)
}

// Close ends the stream (the agent exited): a line in progress and an open
// block are completed.
func (o *Observer) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	if len(o.line) > 0 {
		o.endLine()
	}
	o.closeBlock()
}

func (o *Observer) print(r rune) {
	if o.col < len(o.line) {
		o.line[o.col] = r
	} else if len(o.line) < maxLine {
		o.line = append(o.line, r)
	}
	o.col++
}

func (o *Observer) execute(b byte) {
	switch b {
	case '\n':
		o.endLine()
	case '\r':
		// Back to the line's start, where what follows overwrites; a CR before
		// LF thus changes nothing.
		o.col = 0
	case '\b':
		if o.col > 0 {
			o.col--
		}
	case '\t':
		o.print('\t')
	}
}

func (o *Observer) endLine() {
	text := strings.TrimRight(string(o.line), " ")
	o.line, o.col = o.line[:0], 0
	o.handleLine(text)
}

func (o *Observer) handleLine(text string) {
	trimmed := strings.TrimLeft(text, " \t")
	if strings.HasPrefix(trimmed, "To:") && !o.isEcho(trimmed) {
		o.closeBlock()
		target := ""
		for _, s := range o.Slugs() {
			if strings.HasPrefix(trimmed, "To:"+s+":") && len(s) > len(target) {
				target = s
			}
		}
		if target == "" {
			slug := queue.AddressedSlug(trimmed)
			rest := strings.TrimPrefix(trimmed, "To:"+slug)
			o.open = &Block{Target: slug, Body: strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " "), Unknown: true}
			o.lines = 1
			return
		}
		o.open = &Block{Target: target, Body: strings.TrimPrefix(trimmed[len("To:"+target+":"):], " ")}
		o.lines = 1
		return
	}
	if o.open == nil {
		return
	}
	if strings.TrimSpace(text) == "" {
		o.closeBlock()
		return
	}
	o.open.Body += "\n" + text
	o.lines++
	if len(o.open.Body) > queue.MaxBody {
		o.closeBlock() // validation refuses it; do not swallow the rest of the screen
	}
}

func (o *Observer) isEcho(line string) bool {
	now := o.Now()
	o.expire(now)
	for _, e := range o.echoes {
		if e.line == line {
			return true
		}
	}
	return false
}

func (o *Observer) closeBlock() {
	b := o.open
	o.open = nil
	if b == nil {
		return
	}
	now := o.Now()
	o.expire(now)
	for _, e := range o.emitted {
		if e.block == *b {
			return // a redraw of a block already sent
		}
	}
	o.emitted = append(o.emitted, emitted{block: *b, at: now})
	o.Emit(*b)
}

func (o *Observer) expire(now time.Time) {
	keep := o.emitted[:0]
	for _, e := range o.emitted {
		if now.Sub(e.at) < RedrawWindow {
			keep = append(keep, e)
		}
	}
	o.emitted = keep
	echoes := o.echoes[:0]
	for _, e := range o.echoes {
		if now.Sub(e.at) < EchoWindow {
			echoes = append(echoes, e)
		}
	}
	o.echoes = echoes
}
