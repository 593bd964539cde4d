package queue

import (
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// FuzzReadAddress reads arbitrary text against the hard slugs of the tests
// plus one more from the fuzzer (kept when it is a valid name, as gita's
// registry keeps only those). ReadAddress must say ok exactly for text that
// starts with "To:"; a known target is the longest registered slug followed
// by ':', an unknown one is what a person reads as the target (no ':', no
// newline); the body is exactly what follows the header; ParseAddress
// agrees; the input filter would have held every key of a known header; and
// FormatAddress reads back.
func FuzzReadAddress(f *testing.F) {
	for _, in := range []string{
		"To:net-kingdom: hello", "To:net: hi", "To:with space,comma: x", "To:a:b: colon", "To:a:c: x",
		"To:x: y: z", "To:net-kingdom:no space", "To:net:  two", "To:net:", "To:net-kingdom: line1\nline2",
		"To:ghost: boo", "To:netx: y", "To:ne: y", "To:*: everyone", "To:net", "To:Net: x", "To:gh\nost: x",
		"say To:net: x", "  To:net: x", "to:net: x", "", "To::x", "To:\x1b[2J: x",
	} {
		f.Add(in, "")
	}
	f.Add("To:é\u202e: x", "é\u202e")
	f.Add("To:long slug: with: colons: x", "long slug: with: colons")
	f.Fuzz(func(t *testing.T, text, extra string) {
		slugs := addressSlugs
		if textsafe.NameProblem(extra) == "" {
			slugs = append(slices.Clip(addressSlugs), extra)
		}
		a, ok := ReadAddress(text, slugs)
		rest, isAddress := strings.CutPrefix(text, AddressPrefix)
		if ok != isAddress {
			t.Fatalf("ReadAddress(%q) ok=%v", text, ok)
		}
		target, body, err := ParseAddress(text, slugs)
		switch {
		case !ok:
			if a != (Address{}) || !errs.Is(err, errs.Usage) {
				t.Fatalf("no address %q read as %+v, ParseAddress %v", text, a, err)
			}
			return
		case !a.Known:
			if !errs.Is(err, errs.UnknownTarget) {
				t.Fatalf("unknown target %q: ParseAddress %v", a.Target, err)
			}
			if strings.ContainsAny(a.Target, ":\n") {
				t.Fatalf("unknown target %q runs past its colon or line", a.Target)
			}
			for _, s := range slugs {
				if strings.HasPrefix(rest, s+":") {
					t.Fatalf("%q addresses registered %q, read as unknown %q", text, s, a.Target)
				}
			}
		default:
			if err != nil || target != a.Target || body != a.Body {
				t.Fatalf("ParseAddress(%q) = %q, %q, %v; ReadAddress %+v", text, target, body, err, a)
			}
			if !slices.Contains(slugs, a.Target) || textsafe.NameProblem(a.Target) != "" {
				t.Fatalf("known target %q is no registered name", a.Target)
			}
			for _, s := range slugs {
				if len(s) > len(a.Target) && strings.HasPrefix(rest, s+":") {
					t.Fatalf("%q: %q won over the longer %q", text, a.Target, s)
				}
			}
			header := AddressPrefix + a.Target + ":"
			if !strings.HasPrefix(text, header) {
				t.Fatalf("%q does not start with its header %q", text, header)
			}
			for i := range len(header) + 1 {
				if !CouldBeAddress(header[:i], slugs) {
					t.Fatalf("the input filter would release %q on the way to %q", header[:i], header)
				}
			}
			back, _ := ReadAddress(FormatAddress(a.Target, a.Body), slugs)
			if back.Target == a.Target && back.Body != a.Body || !strings.HasPrefix(back.Target, a.Target) {
				t.Fatalf("FormatAddress(%q, %q) reads back as %+v", a.Target, a.Body, back)
			}
		}
		// The body is what follows the header, and nothing of the header.
		if !strings.HasSuffix(text, a.Body) {
			t.Fatalf("body %q is not the end of %q", a.Body, text)
		}
		head := text[:len(text)-len(a.Body)]
		want := []string{AddressPrefix + a.Target + ":", AddressPrefix + a.Target + ": "}
		if !a.Known {
			want = append(want, AddressPrefix+a.Target)
		}
		if !slices.Contains(want, head) {
			t.Fatalf("%q: header %q, body %q (target %q)", text, head, a.Body, a.Target)
		}
	})
}
