package broker

import (
	"strings"

	"github.com/charmbracelet/x/ansi/parser"
)

// screenLines assembles, from the decoded terminal stream, the lines as a
// terminal would show them, and follows the cursor's row. It knows nothing
// of addresses or blocks: it tells the Observer of each finished line, asks
// it whether a block is open (only then, or for a line that looks like an
// address, is a string made of a line), and tells it when the screen moved
// under an open block. The Observer's lock guards it.
type screenLines struct {
	vt     *vt
	line   []rune
	col    int
	broken bool // the line in progress had bytes that are not valid UTF-8
	cur    cursor

	lineDone  func(text string, broken bool)
	blockOpen func() bool
	endBlock  func()
	setPaste  func(on bool) // the agent turned bracketed paste on or off
}

// write feeds output of the agent.
func (s *screenLines) write(p []byte) {
	for _, b := range p {
		if b >= 0x20 && b < 0x7f && s.vt.state == parser.GroundState {
			// Plain text, most of all output: no table walk (print, inlined).
			if s.col < len(s.line) {
				s.line[s.col] = rune(b)
			} else if s.col == len(s.line) && len(s.line) < maxLine {
				s.line = append(s.line, rune(b))
			} else {
				s.appendAt(rune(b))
			}
			s.col++
			continue
		}
		s.vt.advance(b)
	}
}

func (s *screenLines) print(r rune) {
	if s.col < len(s.line) {
		s.line[s.col] = r
	} else {
		s.appendAt(r)
	}
	s.col++
}

// appendAt puts r at the column the cursor is in, past the line's end: the
// columns the cursor skipped (moved right, or to a column) show as spaces,
// as on the terminal.
func (s *screenLines) appendAt(r rune) {
	for len(s.line) < s.col && len(s.line) < maxLine {
		s.line = append(s.line, ' ')
	}
	if len(s.line) < maxLine {
		s.line = append(s.line, r)
	}
}

// toColumn moves the cursor to a column of the line (from 0).
func (s *screenLines) toColumn(col int) {
	s.col = min(max(col, 0), maxLine)
}

func (s *screenLines) execute(b byte) {
	switch b {
	case '\n', '\v', '\f':
		s.endLine()
		s.cur.lineFeed()
	case '\r':
		// Back to the line's start, where what follows overwrites; a CR before
		// LF thus changes nothing.
		s.col = 0
	case '\b':
		if s.col > 0 {
			s.col--
		}
	case '\t':
		s.print('\t')
	}
}

func (s *screenLines) csi(prefix, final byte, params []int) {
	n := max(params[0], 1) // a count parameter: 0 and absent mean 1
	switch {
	case prefix == '?' && (final == 'h' || final == 'l'):
		for _, p := range params {
			switch p {
			case 2004: // the agent turning bracketed paste on or off
				s.setPaste(final == 'h')
			case 47, 1047, 1049:
				s.switchScreen(final == 'h')
			}
		}
	case prefix != 0:
	case final == 'A': // up
		s.moveRow(s.cur.row - n)
	case final == 'B' || final == 'e': // down
		s.moveRow(s.cur.row + n)
	case final == 'E': // down, to the line's start
		s.moveRow(s.cur.row + n)
		s.col = 0
	case final == 'F': // up, to the line's start
		s.moveRow(s.cur.row - n)
		s.col = 0
	case final == 'H' || final == 'f':
		s.moveRow(max(params[0], 1) - 1)
		col := 1
		if len(params) > 1 {
			col = params[1]
		}
		// Columns matter: an address starts at the line's first one.
		s.toColumn(max(col, 1) - 1)
	case final == 'd':
		s.moveRow(max(params[0], 1) - 1)
	case final == 'G' || final == '`':
		s.toColumn(n - 1)
	case final == 'C' || final == 'a': // right
		s.toColumn(s.col + n)
	case final == 'D': // left
		s.toColumn(s.col - n)
	case final == 'K':
		if s.col < len(s.line) {
			s.line = s.line[:s.col]
		}
	case final == 'J' && (params[0] == 2 || params[0] == 3):
		s.redrawn()
	case final == 'S': // scroll up: lines leave at the top
		s.cur.scrolled += n
	case final == 'T' || final == 'L' || final == 'M':
		// Scrolling down, inserting or deleting lines moves rows under the
		// block: what follows is a redraw, not more of it.
		s.redrawn()
	case final == 'r':
		s.cur.top = max(params[0], 1) - 1
		s.cur.bottom = -1
		if len(params) > 1 && params[1] > 0 {
			s.cur.bottom = params[1] - 1
		}
		s.moveRow(0) // DECSTBM homes the cursor
		s.col = 0
	case final == 's':
		s.cur.saved = s.cur.row
	case final == 'u':
		s.moveRow(s.cur.saved)
	}
}

func (s *screenLines) esc(inter, final byte) {
	if inter != 0 {
		return // character set designations and the like
	}
	switch final {
	case 'c': // full reset
		s.redrawn()
		s.cur = cursor{rows: s.cur.rows, scrolled: s.cur.scrolled, bottom: -1}
	case 'D': // index: a line feed
		s.endLine()
		s.cur.lineFeed()
	case 'E': // next line
		s.endLine()
		s.cur.lineFeed()
		s.col = 0
	case 'M': // reverse index
		if s.cur.row == s.cur.top {
			s.redrawn() // scrolls the region down under the block
			return
		}
		s.moveRow(s.cur.row - 1)
	case '7':
		s.cur.saved = s.cur.row
	case '8':
		s.moveRow(s.cur.saved)
	}
}

// moveRow moves the cursor to another row: the line in progress ends there,
// and a block ends unless the cursor went on to the next row.
func (s *screenLines) moveRow(to int) {
	to = s.cur.clamp(to)
	if to == s.cur.row {
		return
	}
	s.endLine()
	if s.blockOpen() && to != s.cur.row+1 {
		s.endBlock()
	}
	s.cur.row = to
}

// redrawn ends the line and any block: the screen was cleared or replaced.
func (s *screenLines) redrawn() {
	if len(s.line) > 0 {
		s.endLine()
	}
	s.endBlock()
}

func (s *screenLines) switchScreen(alt bool) {
	if alt == s.cur.alt {
		return
	}
	s.redrawn()
	if alt {
		s.cur.main = [2]int{s.cur.row, s.cur.scrolled}
		s.cur.scrolled = 0
	} else {
		s.cur.row, s.cur.scrolled = s.cur.main[0], s.cur.main[1]
	}
	s.cur.alt = alt
}

func (s *screenLines) endLine() {
	if !s.blockOpen() && !addressLike(s.line) {
		// Most lines are not addresses: no string is made of them.
		s.line, s.col, s.broken = s.line[:0], 0, false
		return
	}
	text := strings.TrimRight(string(s.line), " ")
	broken := s.broken
	s.line, s.col, s.broken = s.line[:0], 0, false
	s.lineDone(text, broken)
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
