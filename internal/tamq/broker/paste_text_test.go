package broker

import (
	"strings"
	"unicode/utf8"
)

// pasteSpec says which text a recording pasted (testdata/screens/
// fixtures.json keeps the spec, not the text): Chars characters that start
// with Prefix, then words, some of them not ASCII, and once a token too long
// for any row. Line > 0 breaks it into lines of at most Line characters,
// Para > 0 leaves an empty line after every Para of them; a final newline is
// not part of the text.
type pasteSpec struct {
	Prefix string `json:"prefix"`
	Chars  int    `json:"chars"`
	Line   int    `json:"line,omitempty"`
	Para   int    `json:"para,omitempty"`
}

// The envelopes a delivered message starts with.
const (
	prefixEngine   = "From:coordination-engine: "
	prefixOperator = "From:operator/o: "
)

// pasteWords are what a message says: ASCII mostly, a few characters of two
// and three bytes, a wide one, and a path longer than a row.
var pasteWords = strings.Fields("Task T-17 is ready: read docs/delivery.md, then run `make test` — " +
	"the café's naïve déjà-vu → 日本 check lorem ipsum dolor sit amet, consectetur adipiscing elit; " +
	"/home/user/src/repository/internal/tamq/broker/testdata/screens/a-file-name-that-is-far-too-long-to-fit.raw " +
	"sed do eiusmod tempor (incididunt) ut labore et dolore magna aliqua. [lease ack L-42]")

// text is the text the spec names.
func (p pasteSpec) text() string {
	var b strings.Builder
	b.WriteString(p.Prefix)
	n := utf8.RuneCountInString(p.Prefix)
	col, lines := n, 0
	for i := 0; n < p.Chars; i++ {
		w := pasteWords[i%len(pasteWords)]
		sep := " "
		switch {
		case n == 0 || col == 0 || strings.HasSuffix(p.Prefix, " ") && n == utf8.RuneCountInString(p.Prefix):
			sep = ""
		case p.Line > 0 && col+1+utf8.RuneCountInString(w) > p.Line:
			sep, col = "\n", 0
			if lines++; p.Para > 0 && lines%p.Para == 0 {
				sep = "\n\n"
			}
		}
		b.WriteString(sep)
		b.WriteString(w)
		n += utf8.RuneCountInString(sep + w)
		col += utf8.RuneCountInString(w)
		if sep == " " {
			col++
		}
	}
	// Cut to Chars, and never end in white space.
	r := []rune(b.String())
	if len(r) > p.Chars {
		r = r[:p.Chars]
	}
	for i := len(r) - 1; i >= 0 && (r[i] == ' ' || r[i] == '\n'); i-- {
		r[i] = '.'
	}
	return string(r)
}
