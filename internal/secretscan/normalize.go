package secretscan

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalize is text in NFKC form without format characters (category Cf:
// zero-width spaces and joiners, soft hyphens, bidi marks), and a function
// from a byte offset in it back to one in text. NFKC folds what looks like
// ASCII into ASCII (fullwidth "ＧＨＰ＿", "＝", ligatures), and a format
// character inside a token hides it from a regexp without showing in a
// terminal. ASCII text, nearly every prompt, is its own form and costs one
// pass.
func normalize(text string) (string, func(int) int) {
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return text, func(at int) int { return at }
	}
	// Each segment the iterator gives starts at a known offset of text;
	// marks pair where it starts in the output with where it started in
	// text, so an output offset maps back to its segment's start.
	type mark struct{ out, in int }
	var (
		b     strings.Builder
		marks []mark
		it    norm.Iter
	)
	b.Grow(len(text))
	it.InitString(norm.NFKC, text)
	for !it.Done() {
		marks = append(marks, mark{b.Len(), it.Pos()})
		for _, r := range string(it.Next()) {
			if !unicode.Is(unicode.Cf, r) {
				b.WriteRune(r)
			}
		}
	}
	back := func(at int) int {
		i := sort.Search(len(marks), func(i int) bool { return marks[i].out > at }) - 1
		if i < 0 {
			return 0
		}
		return marks[i].in
	}
	return b.String(), back
}
