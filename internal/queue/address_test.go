package queue

import "testing"

// addressSlugs are registered slugs that make matching hard: prefixes of
// each other, spaces, commas, colons, and a colon followed by a space.
var addressSlugs = []string{"net", "net-kingdom", "with space,comma", "a", "a:b", "x", "x: y"}

func TestReadAddress(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
		want     Address
	}{
		{"plain", "To:net-kingdom: hello", true, Address{"net-kingdom", true, "hello"}},
		{"shorter slug", "To:net: hi", true, Address{"net", true, "hi"}},
		{"space and comma", "To:with space,comma: x", true, Address{"with space,comma", true, "x"}},
		{"colon: longest wins", "To:a:b: colon", true, Address{"a:b", true, "colon"}},
		{"colon: the shorter when the longer is not followed by ':'", "To:a:c: x", true, Address{"a", true, "c: x"}},
		{"colon and space: longest wins", "To:x: y: z", true, Address{"x: y", true, "z"}},
		{"no space after the colon", "To:net-kingdom:no space", true, Address{"net-kingdom", true, "no space"}},
		{"one space dropped", "To:net:  two", true, Address{"net", true, " two"}},
		{"empty body", "To:net:", true, Address{"net", true, ""}},
		{"lines", "To:net-kingdom: line1\nline2", true, Address{"net-kingdom", true, "line1\nline2"}},
		{"unknown", "To:ghost: boo", true, Address{"ghost", false, "boo"}},
		{"unknown extension of a slug", "To:netx: y", true, Address{"netx", false, "y"}},
		{"unknown prefix of a slug", "To:ne: y", true, Address{"ne", false, "y"}},
		{"wildcard is unknown", "To:*: everyone", true, Address{"*", false, "everyone"}},
		{"slug without its colon", "To:net", true, Address{"net", false, ""}},
		{"case matters", "To:Net: x", true, Address{"Net", false, "x"}},
		{"unknown: target within the first line", "To:gh\nost: x", true, Address{"gh", false, "\nost: x"}},
		{"not at line start", "say To:net: x", false, Address{}},
		{"indented", "  To:net: x", false, Address{}},
		{"lower case", "to:net: x", false, Address{}},
		{"empty", "", false, Address{}},
	}
	for _, tt := range tests {
		got, ok := ReadAddress(tt.in, addressSlugs)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: ReadAddress(%q) = %+v, %v; want %+v, %v", tt.name, tt.in, got, ok, tt.want, tt.ok)
		}
	}
	// With nothing registered every address is unknown.
	if got, ok := ReadAddress("To:net: hi", nil); !ok || got != (Address{"net", false, "hi"}) {
		t.Errorf("no slugs: %+v, %v", got, ok)
	}
}

func TestFormatAddressReadsBack(t *testing.T) {
	for _, slug := range addressSlugs {
		body := "hello: there"
		got, ok := ReadAddress(FormatAddress(slug, body), addressSlugs)
		if !ok || got != (Address{slug, true, body}) {
			t.Errorf("%q: read back as %+v, %v", slug, got, ok)
		}
	}
	// The one thing the format cannot say: a body that starts with the
	// rest of a longer slug goes to the longer slug (longest match wins).
	if got, _ := ReadAddress(FormatAddress("x", "y: z"), addressSlugs); got.Target != "x: y" {
		t.Errorf("longest match: %+v", got)
	}
}

func TestCouldBeAddress(t *testing.T) {
	tests := []struct {
		typed string
		want  bool
	}{
		{"", true},
		{"T", true},
		{"To", true},
		{"To:", true},
		{"t", false},
		{"Tx", false},
		{"To;", false},
		{" ", false},
		{"To:n", true},
		{"To:net", true},
		{"To:net-", true},
		{"To:net:", true},
		{"To:net: hello", true},
		{"To:with space", true},
		{"To:with space,comma: x", true},
		{"To:a:b", true},
		{"To:x: y: z", true},
		{"To:nez", false},
		{"To:ghost", false},
		{"To:with  space", false},
		{" To:net: x", false},
	}
	for _, tt := range tests {
		if got := CouldBeAddress(tt.typed, addressSlugs); got != tt.want {
			t.Errorf("CouldBeAddress(%q) = %v, want %v", tt.typed, got, tt.want)
		}
	}
	// Until "To:" is complete no slug is needed.
	if !CouldBeAddress("To:", nil) || CouldBeAddress("To:n", nil) {
		t.Error("with no slugs registered")
	}
	// Whatever ReadAddress reads as a known address, the filter held back
	// key by key.
	for _, in := range []string{"To:a:b: colon", "To:x: y: z", "To:with space,comma: x"} {
		for i := range len(in) + 1 {
			if !CouldBeAddress(in[:i], addressSlugs) {
				t.Errorf("CouldBeAddress(%q) = false on the way to %q", in[:i], in)
			}
		}
	}
}
