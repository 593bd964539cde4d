// Package textsafe keeps names that reach a terminal inert. A name (a repo
// slug, a sender, a target, an id) printed into a terminal must never be read
// by it as a command: no control character (which could end a bracketed paste,
// press Enter or set the clipboard through OSC 52), no bidirectional or other
// invisible format character (which could make one name look like another).
// Names are checked where they enter tamq, and escaped wherever they are
// printed for a person, as a second line of defence.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxName bounds a name in bytes: room for any real repo name, far below
// anything that could flood a terminal line.
const MaxName = 256

// Acts reports whether r can act in a terminal or hide what it shows: C0 and
// C1 controls, DEL, line and paragraph separators, and format characters
// (bidirectional overrides and isolates, zero-width characters).
func Acts(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError ||
		unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// NameProblem says why s cannot be a name, or "" when it can: it must be one
// non-empty line of valid UTF-8, at most MaxName bytes, with nothing in it
// that Acts.
func NameProblem(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > MaxName:
		return fmt.Sprintf("it is %d bytes long; the limit is %d", len(s), MaxName)
	}
	return ControlProblem(s)
}

// ControlProblem says why s, which may be of any length (a path, say), can
// act in a terminal, or "" when it cannot: it must be valid UTF-8 with
// nothing in it that Acts.
func ControlProblem(s string) string {
	if !utf8.ValidString(s) {
		return "it is not valid UTF-8"
	}
	for i, r := range s {
		if Acts(r) {
			return fmt.Sprintf("it has the control or format character %U at byte %d", r, i)
		}
	}
	return ""
}

// Escape returns s as a person may safely see it in a terminal: unchanged when
// nothing in it acts, else with each such character (and each byte that is not
// UTF-8) written as a Go escape, and backslashes doubled so the result is
// unambiguous.
func Escape(s string) string {
	if ControlProblem(s) == "" {
		return s
	}
	return escape(s, false)
}

// EscapeText is Escape for text that may span lines, such as a message body:
// newlines and tabs are kept as they are, so the text still reads as it was
// written; everything else that acts is escaped.
func EscapeText(s string) string {
	if Inert(s) {
		return s
	}
	return escape(s, true)
}

func escape(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case Acts(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Acts(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Inert reports whether writing s into a terminal as text can do nothing but
// show it: no escape sequence can start and no key can be pressed. Newlines
// and tabs are allowed, as in a message body; everything else that Acts is
// not. Writers check it as the last line of defence before a paste.
func Inert(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && Acts(r) {
			return false
		}
	}
	return true
}

// Cut cuts s to at most n bytes between characters, marking the cut with
// "…" (which the n bytes do not count).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
