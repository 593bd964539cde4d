package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/textsafe"
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
// sequences of every kind are dropped, never guessed at with patterns), lines
// are assembled as a terminal would show them (a carriage return goes back to
// the line's start; CRLF is one line end), and then:
//
//   - a line that starts at its first column with "To:<slug>:" for a
//     registered slug, or right after an agent's own message bullet ("⏺ ",
//     "● ", "• ", "✦ ") there, opens a block; the longest registered slug that
//     matches wins, since slugs may contain spaces, commas and colons. An
//     address after any other indentation is not one: agents show a tool's
//     output indented under a marker ("  ⎿  ", "  └ "), and what a command
//     printed is not what the agent said;
//   - only output read while an agent is the terminal's foreground program
//     (Routing) opens a block: a shell, and whatever a program run in it
//     prints (cat notes.txt, git log), is never routed;
//   - the block closes on an empty line, the next address, Close, a quiet
//     spell of Quiet, a redrawn screen (cleared, reset, or switched to or from
//     the alternate screen), or the cursor leaving the block's rows (any move
//     but down to the next row): what the terminal shows after that is not
//     part of the block;
//   - a block that grows past the body limit, or holds bytes that are not
//     valid UTF-8, is not sent; Notice says why on the operator's screen;
//   - a block with the same text over the same rows as one sent within
//     RedrawWindow is a redraw (a full-screen program repainting) and is
//     dropped; the same text printed again on new rows is a new message;
//   - a line that is a piece of a text we injected (compared with every
//     run of white space made one space, as a substring; for the broker's
//     life, up to maxInjectedBytes of text) is never an address, however
//     the agent's screen wraps, indents or quotes it, nor however late it
//     redraws it; and
//     a piece of a text injected after a block opened ends that block, which
//     is sent without it: what tamq typed into the agent is never sent as
//     the agent's words.
//
// An address to an unregistered slug makes a block marked Unknown; one whose
// target can be no name at all (empty, too long, or holding characters that
// act in a terminal) is not sent, and Notice says why.
// Observer is safe for concurrent use.
type Observer struct {
	// Slugs returns the registered slugs (re-read by the caller as gita
	// changes).
	Slugs func() []string
	// Emit receives each completed block; it must not block.
	Emit func(Block)
	// Notice shows one line of tamq's own on the operator's screen.
	Notice func(string)
	Now    func() time.Time
	// Quiet closes an open block once the agent has printed nothing for
	// that long (zero: never); the caller calls Tick when QuietDue says.
	Quiet time.Duration
	// Routing, when set, says whether an agent is the foreground program
	// now: while it is not, no block opens, and one open is closed.
	Routing func() bool

	mu        sync.Mutex // Write runs in the screen reader, Injected in the delivery session
	paste     atomic.Bool
	lines     *screenLines // the terminal's lines and cursor; the Observer makes blocks of them
	open      *openBlock
	lastWrite time.Time
	sent      sentBlocks
	injected  injections
}

type openBlock struct {
	Block
	at      place
	invalid bool
	// injected is how many texts had been injected when the block opened:
	// a later one shown below it is the delivery's echo, not more of it.
	injected uint64
}

// place is where a line sits: its row on the screen plus the lines scrolled
// off above it, so a line keeps its place while the screen scrolls.
type place struct {
	alt bool
	row int
}

// sentBlocks remembers the blocks sent lately, by where they sat, to tell a
// redraw of one from a new message.
type sentBlocks struct {
	byPlace map[place][]emitted
	n       int
}

type emitted struct {
	block Block
	when  time.Time
}

// RedrawWindow is how long a block at the same place with the same text
// counts as a redraw of the one already sent.
const RedrawWindow = 10 * time.Minute

// maxEmitted bounds the blocks remembered for recognizing redraws.
const maxEmitted = 256

// maxLine bounds one line; a longer one is not an address anyway.
const maxLine = queue.MaxBody + 256

func (o *Observer) init() {
	if o.lines != nil {
		return
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Notice == nil {
		o.Notice = func(string) {}
	}
	s := &screenLines{
		lineDone:  o.handleLine,
		blockOpen: func() bool { return o.open != nil },
		endBlock:  o.closeBlock,
		setPaste:  o.paste.Store,
	}
	s.cur.bottom = -1
	s.vt = &vt{print: s.print, execute: s.execute, csi: s.csi, esc: s.esc, broken: func() { s.broken = true }}
	o.lines = s
}

// SetRows tells the observer the height of the agent's screen, which says
// where a line feed scrolls.
func (o *Observer) SetRows(rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.lines.cur.rows = max(rows, 0)
	o.lines.cur.row = o.lines.cur.clamp(o.lines.cur.row)
}

// BracketedPaste reports whether the agent has bracketed paste on.
func (o *Observer) BracketedPaste() bool { return o.paste.Load() }

// Write feeds output of the agent.
func (o *Observer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.lastWrite = o.Now()
	o.lines.write(p)
	return len(p), nil
}

// QuietDue says when Tick would close the open block (false: none is open,
// or no quiet period is set).
func (o *Observer) QuietDue() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open == nil || o.Quiet <= 0 {
		return time.Time{}, false
	}
	return o.lastWrite.Add(o.Quiet), true
}

// Tick closes the open block when the agent has been quiet for Quiet. A line
// still in progress is left out: after a quiet spell that is a prompt, not
// more of the message.
func (o *Observer) Tick() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	if o.open != nil && o.Quiet > 0 && !o.Now().Before(o.lastWrite.Add(o.Quiet)) {
		o.closeBlock()
	}
}

// Injected records text we wrote into the agent, so no piece of it is ever
// read back as an address or as part of a block (injections).
func (o *Observer) Injected(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.injected.add(text)
}

// Close ends the stream (the agent exited): a line in progress and an open
// block are completed.
func (o *Observer) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	if len(o.lines.line) > 0 {
		o.lines.endLine()
	}
	o.closeBlock()
}

// Lost says output was skipped (the screen model fell too far behind): the
// line in progress and an open block cannot be trusted and are dropped.
func (o *Observer) Lost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.lines.line, o.lines.col, o.lines.broken = o.lines.line[:0], 0, false
	if o.open != nil {
		o.Notice(fmt.Sprintf("tamq: not sent to %s: the agent printed faster than tamq could read, and part of the block was missed", textsafe.Escape(o.open.Target)))
		o.open = nil
	}
}

// bullets mark an agent's own message at a line's start: Claude Code's
// "⏺ " (● on some terminals), Codex's "• ", Gemini CLI's "✦ ". An address
// may follow one.
var bullets = []rune{'⏺', '●', '•', '✦'}

// addressStart is where an address starts in line: 0, or 2 after a bullet
// and a space; -1 when the line does not start with "To:" there.
func addressStart(line []rune) int {
	at := 0
	if len(line) >= 2 && line[1] == ' ' && slices.Contains(bullets, line[0]) {
		at = 2
	}
	if rest := line[at:]; len(rest) >= 3 && rest[0] == 'T' && rest[1] == 'o' && rest[2] == ':' {
		return at
	}
	return -1
}

// addressLike reports whether line starts with an address.
func addressLike(line []rune) bool { return addressStart(line) >= 0 }

func (o *Observer) handleLine(text string, broken bool) {
	if o.Routing != nil && !o.Routing() {
		// No agent in the foreground: what shows is a shell's or what a
		// program run in it printed. An agent's block ends here.
		o.closeBlock()
		return
	}
	address := ""
	if at := addressStart([]rune(text)); at >= 0 {
		address = string([]rune(text)[at:])
	}
	if address != "" {
		o.closeBlock()
		// A row of a delivered text that starts with "To:" where the
		// agent's screen wrapped it is the sender's words, not this
		// agent's: it opens nothing, whichever text delivered in the
		// broker's life it came from (an agent redraws its transcript
		// long after), and is no part of a block before it either.
		if o.injected.holds(address, 0) {
			return
		}
		a, _ := queue.ReadAddress(address, o.Slugs())
		o.open = &openBlock{Block: Block{Target: a.Target, Body: a.Body, Unknown: !a.Known}, at: o.lines.cur.place(), invalid: broken,
			injected: o.injected.seq}
		o.checkSize()
		return
	}
	if o.open == nil {
		return
	}
	// Only texts injected since the block opened end it: a delivery shown
	// right under the agent's block. A short line of the agent's own ("ok")
	// is a piece of many older texts, and would cut its message short.
	if strings.TrimSpace(text) == "" || o.injected.holds(text, o.open.injected) {
		o.closeBlock()
		return
	}
	o.open.Body += "\n" + text
	o.open.invalid = o.open.invalid || broken
	o.checkSize()
}

// checkSize drops a block that has grown past the body limit: it could not
// be sent whole, and a cut one would say something its author did not.
func (o *Observer) checkSize() {
	if len(o.open.Body) <= queue.MaxBody {
		return
	}
	o.Notice(fmt.Sprintf("tamq: not sent to %s: the block grew past %d bytes (the limit); send it in parts", textsafe.Escape(o.open.Target), queue.MaxBody))
	o.open = nil
}

func (o *Observer) closeBlock() {
	b := o.open
	o.open = nil
	if b == nil {
		return
	}
	if b.invalid {
		o.Notice(fmt.Sprintf("tamq: not sent to %s: the block has bytes that are not valid UTF-8", textsafe.Escape(b.Target)))
		return
	}
	now := o.Now()
	if o.sent.redraw(b.Block, b.at, now) {
		return // the same text over the same rows: a redraw of a block already sent
	}
	if p := textsafe.NameProblem(b.Target); p != "" {
		// An unknown target as the agent wrote it may be empty, too long or
		// hold characters that act in a terminal: it can name no repo, and
		// passed on it would reach the spool, the service's refusal and the
		// operator's screen as written. Said here, escaped, instead; after
		// the redraw check, so a repainted screen does not say it again.
		o.Notice(fmt.Sprintf("tamq: not sent: '%s' is not a repo name (%s)", textsafe.Escape(b.Target), p))
		return
	}
	o.Emit(b.Block)
}

// redraw reports whether b at that place repeats a block sent there within
// RedrawWindow; when it does not, b is remembered as sent.
func (s *sentBlocks) redraw(b Block, at place, now time.Time) bool {
	for _, e := range s.byPlace[at] {
		if e.block == b && now.Sub(e.when) < RedrawWindow {
			return true
		}
	}
	if s.byPlace == nil || s.n >= maxEmitted {
		// Past the bound all are forgotten at once: a redraw then is sent again.
		s.byPlace, s.n = map[place][]emitted{}, 0
	}
	s.byPlace[at] = append(s.byPlace[at], emitted{block: b, when: now})
	s.n++
	return false
}
