package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/x/ansi/parser"

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
//     "● ", "• ") there, opens a block; the longest registered slug that
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
//   - a line that is a piece of a text we recently injected (compared with
//     every run of white space made one space, as a substring) is never an
//     address, however the agent's screen wraps, indents or quotes it; and
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
	vt        *vt
	line      []rune
	col       int
	broken    bool // the line in progress had bytes that are not valid UTF-8
	open      *openBlock
	lastWrite time.Time
	cur       cursor
	emitted   map[place][]emitted // blocks sent lately, by where they sat
	nEmitted  int
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

// cursor follows the cursor's row as the terminal moves it.
type cursor struct {
	rows     int // the screen's height; 0 while unknown (no scrolling then)
	row      int // on the screen, from 0
	scrolled int // lines scrolled off the top so far
	alt      bool
	saved    int    // DECSC / CSI s
	main     [2]int // the main screen's row and scroll while the alternate shows
	top      int    // the scroll region's first row
	bottom   int    // its last row; -1: the screen's last row
}

func (c *cursor) place() place { return place{alt: c.alt, row: c.row + c.scrolled} }

func (c *cursor) lastRow() int {
	if c.bottom >= 0 && (c.rows == 0 || c.bottom < c.rows) {
		return c.bottom
	}
	return c.rows - 1
}

// lineFeed moves down a row, scrolling at the bottom of the scroll region.
func (c *cursor) lineFeed() {
	if c.rows > 0 && c.row == c.lastRow() {
		c.scrolled++
		return
	}
	c.row++
	if c.rows > 0 && c.row >= c.rows {
		c.row = c.rows - 1
	}
}

func (c *cursor) clamp(row int) int {
	if row < 0 {
		return 0
	}
	if c.rows > 0 && row >= c.rows {
		return c.rows - 1
	}
	return row
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
	if o.vt != nil {
		return
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Notice == nil {
		o.Notice = func(string) {}
	}
	o.cur.bottom = -1
	o.vt = &vt{print: o.print, execute: o.execute, csi: o.csi, esc: o.esc, broken: func() { o.broken = true }}
}

// SetRows tells the observer the height of the agent's screen, which says
// where a line feed scrolls.
func (o *Observer) SetRows(rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.cur.rows = max(rows, 0)
	o.cur.row = o.cur.clamp(o.cur.row)
}

// BracketedPaste reports whether the agent has bracketed paste on.
func (o *Observer) BracketedPaste() bool { return o.paste.Load() }

// Write feeds output of the agent.
func (o *Observer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.lastWrite = o.Now()
	for _, b := range p {
		if b >= 0x20 && b < 0x7f && o.vt.state == parser.GroundState {
			// Plain text, most of all output: no table walk (print, inlined).
			if o.col < len(o.line) {
				o.line[o.col] = rune(b)
			} else if o.col == len(o.line) && len(o.line) < maxLine {
				o.line = append(o.line, rune(b))
			} else {
				o.appendAt(rune(b))
			}
			o.col++
			continue
		}
		o.vt.advance(b)
	}
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
	o.injected.add(text, o.Now())
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

// Lost says output was skipped (the screen model fell too far behind): the
// line in progress and an open block cannot be trusted and are dropped.
func (o *Observer) Lost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.line, o.col, o.broken = o.line[:0], 0, false
	if o.open != nil {
		o.Notice(fmt.Sprintf("tamq: not sent to %s: the agent printed faster than tamq could read, and part of the block was missed", textsafe.Escape(o.open.Target)))
		o.open = nil
	}
}

func (o *Observer) print(r rune) {
	if o.col < len(o.line) {
		o.line[o.col] = r
	} else {
		o.appendAt(r)
	}
	o.col++
}

// appendAt puts r at the column the cursor is in, past the line's end: the
// columns the cursor skipped (moved right, or to a column) show as spaces,
// as on the terminal.
func (o *Observer) appendAt(r rune) {
	for len(o.line) < o.col && len(o.line) < maxLine {
		o.line = append(o.line, ' ')
	}
	if len(o.line) < maxLine {
		o.line = append(o.line, r)
	}
}

// toColumn moves the cursor to a column of the line (from 0).
func (o *Observer) toColumn(col int) {
	o.col = min(max(col, 0), maxLine)
}

func (o *Observer) execute(b byte) {
	switch b {
	case '\n', '\v', '\f':
		o.endLine()
		o.cur.lineFeed()
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

func (o *Observer) csi(prefix, final byte, params []int) {
	n := max(params[0], 1) // a count parameter: 0 and absent mean 1
	switch {
	case prefix == '?' && (final == 'h' || final == 'l'):
		for _, p := range params {
			switch p {
			case 2004: // the agent turning bracketed paste on or off
				o.paste.Store(final == 'h')
			case 47, 1047, 1049:
				o.switchScreen(final == 'h')
			}
		}
	case prefix != 0:
	case final == 'A': // up
		o.moveRow(o.cur.row - n)
	case final == 'B' || final == 'e': // down
		o.moveRow(o.cur.row + n)
	case final == 'E': // down, to the line's start
		o.moveRow(o.cur.row + n)
		o.col = 0
	case final == 'F': // up, to the line's start
		o.moveRow(o.cur.row - n)
		o.col = 0
	case final == 'H' || final == 'f':
		o.moveRow(max(params[0], 1) - 1)
		col := 1
		if len(params) > 1 {
			col = params[1]
		}
		// Columns matter: an address starts at the line's first one.
		o.toColumn(max(col, 1) - 1)
	case final == 'd':
		o.moveRow(max(params[0], 1) - 1)
	case final == 'G' || final == '`':
		o.toColumn(n - 1)
	case final == 'C' || final == 'a': // right
		o.toColumn(o.col + n)
	case final == 'D': // left
		o.toColumn(o.col - n)
	case final == 'K':
		if o.col < len(o.line) {
			o.line = o.line[:o.col]
		}
	case final == 'J' && (params[0] == 2 || params[0] == 3):
		o.redrawn()
	case final == 'S': // scroll up: lines leave at the top
		o.cur.scrolled += n
	case final == 'T' || final == 'L' || final == 'M':
		// Scrolling down, inserting or deleting lines moves rows under the
		// block: what follows is a redraw, not more of it.
		o.redrawn()
	case final == 'r':
		o.cur.top = max(params[0], 1) - 1
		o.cur.bottom = -1
		if len(params) > 1 && params[1] > 0 {
			o.cur.bottom = params[1] - 1
		}
		o.moveRow(0) // DECSTBM homes the cursor
		o.col = 0
	case final == 's':
		o.cur.saved = o.cur.row
	case final == 'u':
		o.moveRow(o.cur.saved)
	}
}

func (o *Observer) esc(inter, final byte) {
	if inter != 0 {
		return // character set designations and the like
	}
	switch final {
	case 'c': // full reset
		o.redrawn()
		o.cur = cursor{rows: o.cur.rows, scrolled: o.cur.scrolled, bottom: -1}
	case 'D': // index: a line feed
		o.endLine()
		o.cur.lineFeed()
	case 'E': // next line
		o.endLine()
		o.cur.lineFeed()
		o.col = 0
	case 'M': // reverse index
		if o.cur.row == o.cur.top {
			o.redrawn() // scrolls the region down under the block
			return
		}
		o.moveRow(o.cur.row - 1)
	case '7':
		o.cur.saved = o.cur.row
	case '8':
		o.moveRow(o.cur.saved)
	}
}

// moveRow moves the cursor to another row: the line in progress ends there,
// and a block ends unless the cursor went on to the next row.
func (o *Observer) moveRow(to int) {
	to = o.cur.clamp(to)
	if to == o.cur.row {
		return
	}
	o.endLine()
	if o.open != nil && to != o.cur.row+1 {
		o.closeBlock()
	}
	o.cur.row = to
}

// redrawn ends the line and any block: the screen was cleared or replaced.
func (o *Observer) redrawn() {
	if len(o.line) > 0 {
		o.endLine()
	}
	o.closeBlock()
}

func (o *Observer) switchScreen(alt bool) {
	if alt == o.cur.alt {
		return
	}
	o.redrawn()
	if alt {
		o.cur.main = [2]int{o.cur.row, o.cur.scrolled}
		o.cur.scrolled = 0
	} else {
		o.cur.row, o.cur.scrolled = o.cur.main[0], o.cur.main[1]
	}
	o.cur.alt = alt
}

func (o *Observer) endLine() {
	if o.open == nil && !addressLike(o.line) {
		// Most lines are not addresses: no string is made of them.
		o.line, o.col, o.broken = o.line[:0], 0, false
		return
	}
	text := strings.TrimRight(string(o.line), " ")
	broken := o.broken
	o.line, o.col, o.broken = o.line[:0], 0, false
	o.handleLine(text, broken)
}

// bullets mark an agent's own message at a line's start: Claude Code's
// "⏺ " (● on some terminals), Codex's "• ". An address may follow one.
var bullets = []rune{'⏺', '●', '•'}

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
		// agent's: it opens nothing, whichever of the last texts it came
		// from, and is no part of a block before it either.
		if o.injected.holds(address, o.Now(), 0) {
			return
		}
		a, _ := queue.ReadAddress(address, o.Slugs())
		o.open = &openBlock{Block: Block{Target: a.Target, Body: a.Body, Unknown: !a.Known}, at: o.cur.place(), invalid: broken,
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
	if strings.TrimSpace(text) == "" || o.injected.holds(text, o.Now(), o.open.injected) {
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
	for _, e := range o.emitted[b.at] {
		if e.block == b.Block && now.Sub(e.when) < RedrawWindow {
			return // the same text over the same rows: a redraw of a block already sent
		}
	}
	if o.emitted == nil || o.nEmitted >= maxEmitted {
		// Past the bound all are forgotten at once: a redraw then is sent again.
		o.emitted, o.nEmitted = map[place][]emitted{}, 0
	}
	o.emitted[b.at] = append(o.emitted[b.at], emitted{block: b.Block, when: now})
	o.nEmitted++
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
