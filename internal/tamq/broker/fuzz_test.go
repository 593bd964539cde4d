package broker

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// splitAt splits p where cuts say: each byte of cuts is the length of the
// next chunk (1 to 64), used in turn; no cuts means one chunk. The terminal
// and the operator's keyboard hand over bytes in pieces of any size, and
// neither the observer nor the filter may depend on where the pieces end.
func splitAt(p, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return [][]byte{p}
	}
	var out [][]byte
	for i := 0; len(p) > 0; i++ {
		n := min(int(cuts[i%len(cuts)])%64+1, len(p))
		out = append(out, p[:n])
		p = p[n:]
	}
	return out
}

// FuzzObserver feeds arbitrary terminal output, split at fuzzed points:
// nothing panics, the blocks and notices do not depend on the split, every
// block's target is a valid name (a registered slug unless marked unknown),
// its body is valid UTF-8 within the limit, and no notice holds anything
// that acts in the operator's terminal.
func FuzzObserver(f *testing.F) {
	for _, out := range []string{
		"To:net-kingdom: hi\r\n\r\n",
		"\x1b[1mTo:\x1b[0mnet: x\x1b[2J\x1b[H\rTo:a:b: y\n",
		"\x1b]8;;To:net: x\x07To:with space,comma:\n\x1bP1$r\x1b\\\n",
		"\xff\xfe\r\n\x1b[999999m",
		// The cases of TestBlocks.
		"To:net-kingdom: hello\n\nafter\n",
		"To:net-kingdom: hello\r\nsecond\r\n\r\n",
		"To:net: one\nmore\nTo:railiance: two\nlines",
		"To:net-kingdom: x\n\nTo:with space,comma: y\n\nTo:a:b: z\n\n",
		"\x1b[1;32mTo:net-kingdom:\x1b[0m \x1b[4mhi\x1b[24m there\x1b[0m\n\n",
		"\x1b]0;agent\x07To:net: \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n\n",
		"To:net: progress 10%\rTo:net: progress 99%\n\n",
		"To:net: long line here\r\x1b[KTo:net: short\n\n",
		"  To:net: indented\n\n",
		"see To:net: no\nquote > To:net: no\n\n",
		"To:nowhere: hi\nbody\n\n",
		"To:*: all\n\n",
		"To:net: row one\x1b[2;1Hrow two\x1b[3;1H\x1b[3;1H\n",
		"\x1b[H\x1b[2JTo:net-kingdom: status report\r\nall green\r\n\r\n\x1b[24;1H> ",
		// Targets that are no name: empty, a format character, too long.
		"To:: nobody\n\n",
		"To:ab\u202ecd: x\n\n",
		"To:" + strings.Repeat("n", 300) + ": x\n\n",
		"To:caf\xc3: x\n\n",
	} {
		f.Add([]byte(out), []byte{})
		f.Add([]byte(out), []byte{0})
	}
	f.Add([]byte("To:net: x\r\n\r\n"), []byte{2, 0, 5})
	f.Fuzz(func(t *testing.T, out, cuts []byte) {
		whole, wrec := newObserver()
		whole.Write(out)
		whole.Close()
		o, rec := newObserver()
		for _, c := range splitAt(out, cuts) {
			o.Write(c)
		}
		o.Close()
		if !reflect.DeepEqual(rec, wrec) {
			t.Fatalf("split output gave %+v, whole %+v", rec, wrec)
		}
		for _, target := range rec.unknown {
			if p := textsafe.NameProblem(target); p != "" {
				t.Fatalf("a block for %q, which is no name: %s", target, p)
			}
		}
		for _, b := range rec.blocks {
			if !slices.Contains(slugs, b.Target) {
				t.Fatalf("block for unregistered %q not marked unknown", b.Target)
			}
			if len(b.Body) > queue.MaxBody || !utf8.ValidString(b.Body) {
				t.Fatalf("block body of %d bytes, valid UTF-8 %v", len(b.Body), utf8.ValidString(b.Body))
			}
		}
		for _, n := range rec.notices {
			if p := textsafe.ControlProblem(n); p != "" {
				t.Fatalf("notice %q: %s", n, p)
			}
		}
	})
}

// FuzzInputFilter types arbitrary keys, split at fuzzed points. Nothing
// panics and the split changes nothing. Key by key, the filter keeps its
// promise: a key either passes (with the held keys it releases), is held
// while the line may still become an address, erases the last held
// character (a backspace), or, as Enter, routes the held line, and only
// when that line is an address to a registered slug with something to say;
// no other key is lost or invented, and an address line never reaches the
// agent. Typed text that is UTF-8 routes as UTF-8.
func FuzzInputFilter(f *testing.F) {
	for _, keys := range []string{
		"To:net: x\rhello\rTo:a:b: y\r",
		"To:\x7f\x7f\x7f\x7fTo:with space,comma: z\n",
		// The cases of TestOperatorAddressLines.
		"To:net-kingdom: please rebase\r", "To:with space,comma: hi\r", "Tomorrow is fine\r", "To:nowhere: x\r",
		"ok To:net: x\r", "ls\rTo:net: x\r", "To:net:\r", "To:net-\x7f: fixed\r", "To:nex\x7ft: x\r",
		"To:ne\x03", "T\x1b[A", "To:net: a\rTo:railiance: b\r",
		"To:net: café\x7fe\r", "To:net: 日本\x08\x08語\r",
	} {
		f.Add([]byte(keys), []byte{})
		f.Add([]byte(keys), []byte{0})
	}
	f.Fuzz(func(t *testing.T, keys, cuts []byte) {
		// Key by key, watching the held line.
		flt, got := newFilter()
		for _, b := range keys {
			before, routed := string(flt.held), len(got.routed)
			out := flt.Filter([]byte{b})
			got.passed = append(got.passed, out...)
			after := string(flt.held)
			enter := b == '\r' || b == '\n'
			a, isAddr := queue.ReadAddress(before, slugs)
			routable := before != "" && isAddr && a.Known && strings.TrimSpace(a.Body) != ""
			switch {
			case len(got.routed) > routed:
				r := got.routed[len(got.routed)-1]
				if len(got.routed) != routed+1 || !enter || len(out) != 0 || after != "" || !routable ||
					r != [2]string{a.Target, a.Body} || !slices.Contains(slugs, r[0]) {
					t.Fatalf("key %q routed %q from held %q, passed %q, held %q", b, r, before, out, after)
				}
			case enter && routable:
				t.Fatalf("Enter passed the address line %q to the agent", before)
			case (b == 0x7f || b == 0x08) && before != "":
				_, size := utf8.DecodeLastRuneInString(before)
				if len(out) != 0 || after != before[:len(before)-size] {
					t.Fatalf("backspace on held %q: passed %q, held %q", before, out, after)
				}
			default:
				if string(out)+after != before+string([]byte{b}) {
					t.Fatalf("key %q on held %q: passed %q, held %q", b, before, out, after)
				}
			}
			if after != "" && (after[0] != 'T' || !queue.CouldBeAddress(after, slugs)) {
				t.Fatalf("held %q, which cannot become an address", after)
			}
		}
		if utf8.Valid(keys) {
			for _, r := range got.routed {
				if !utf8.ValidString(r[1]) {
					t.Fatalf("typed UTF-8 %q routed the body %q", keys, r[1])
				}
			}
		}
		// The same keys in pieces.
		split, sgot := newFilter()
		for _, c := range splitAt(keys, cuts) {
			sgot.passed = append(sgot.passed, split.Filter(c)...)
		}
		if !reflect.DeepEqual(sgot, got) || string(split.held) != string(flt.held) {
			t.Fatalf("split keys gave %+v, key by key %+v", sgot, got)
		}
	})
}
