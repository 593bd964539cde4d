package broker

import (
	"bytes"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/queue"
)

// InputFilter watches what the operator types into the window. A line typed
// from its start as "To:<registered slug>: text" and ended with Enter is an
// operator message and never reaches the agent; every other keystroke passes
// through at once. While a line could still become an address its bytes are
// held and echoed locally; as soon as it cannot, they are released to the
// agent (and the local echo is erased, since the agent echoes them itself).
type InputFilter struct {
	Slugs func() []string
	// Route receives an operator message; Echo writes to the operator's
	// screen (the agent never sees it).
	Route func(target, body string)
	Echo  func(p []byte)

	midLine bool
	held    []byte
	busy    atomic.Bool // midLine or held, for the delivery goroutine
}

// MidLine reports whether the operator is in the middle of typing a line.
func (f *InputFilter) MidLine() bool { return f.busy.Load() }

// Filter takes what the operator typed and returns what passes to the agent now.
func (f *InputFilter) Filter(p []byte) []byte {
	var out []byte
	for _, b := range p {
		out = f.feed(out, b)
	}
	f.busy.Store(f.midLine || len(f.held) > 0)
	return out
}

func (f *InputFilter) feed(out []byte, b byte) []byte {
	if len(f.held) == 0 {
		if !f.midLine && b == 'T' {
			f.held = append(f.held, b)
			f.Echo([]byte{b})
			return out
		}
		// Enter, ^C and ^U start a new line in every line editor we wrap.
		f.midLine = !(b == '\r' || b == '\n' || b == 0x03 || b == 0x15)
		return append(out, b)
	}
	switch {
	case b == '\r' || b == '\n':
		line := string(f.held)
		if target, body, ok := f.address(line); ok {
			f.held = f.held[:0]
			f.Echo([]byte("\r\n"))
			f.Route(target, body)
			f.midLine = false
			return out
		}
		return f.afterKey(append(f.releaseHeld(out), b), b)
	case b == 0x7f || b == 0x08:
		// A backspace erases a character, not a byte: cutting a byte of a
		// multi-byte character would leave invalid UTF-8 in the line, and
		// the character typed next would follow half of the erased one.
		_, size := utf8.DecodeLastRune(f.held)
		f.held = f.held[:len(f.held)-size]
		f.Echo([]byte("\b \b"))
		if len(f.held) == 0 {
			f.midLine = false
		}
		return out
	case b < 0x20:
		// Escape sequences, ^C, ^D…: not part of an address.
		return f.afterKey(append(f.releaseHeld(out), b), b)
	}
	f.held = append(f.held, b)
	f.Echo([]byte{b})
	if !f.viable(string(f.held)) {
		out = f.releaseHeld(out)
		f.midLine = true
	}
	return out
}

// releaseHeld hands the held bytes to the agent, erasing their local echo.
func (f *InputFilter) releaseHeld(out []byte) []byte {
	f.Echo(bytes.Repeat([]byte("\b \b"), len([]rune(string(f.held)))))
	out = append(out, f.held...)
	f.held = f.held[:0]
	return out
}

// afterKey notes whether key b, just passed to the agent, ended the line.
func (f *InputFilter) afterKey(out []byte, b byte) []byte {
	f.midLine = !(b == '\r' || b == '\n' || b == 0x03 || b == 0x15)
	return out
}

// viable reports whether s can still grow into "To:<slug>:".
func (f *InputFilter) viable(s string) bool { return queue.CouldBeAddress(s, f.Slugs()) }

// address parses a complete typed line: an address to a registered slug,
// with something to say.
func (f *InputFilter) address(line string) (target, body string, ok bool) {
	a, ok := queue.ReadAddress(line, f.Slugs())
	if !ok || !a.Known || strings.TrimSpace(a.Body) == "" {
		return "", "", false
	}
	return a.Target, a.Body, true
}
