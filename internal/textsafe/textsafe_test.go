package textsafe

import (
	"strings"
	"testing"
)

func TestNameProblem(t *testing.T) {
	good := []string{"net-kingdom", "with space,comma", "café", "日本", "a:b"}
	for _, s := range good {
		if p := NameProblem(s); p != "" {
			t.Errorf("%q refused: %s", s, p)
		}
	}
	bad := map[string]string{
		"":                        "it is empty",
		"evil\x1b[201~":           "it has the control or format character U+001B at byte 4",
		"osc\x1b]52;c;aGk=\a":     "it has the control or format character U+001B at byte 3",
		"bell\a":                  "it has the control or format character U+0007 at byte 4",
		"line\nbreak":             "it has the control or format character U+000A at byte 4",
		"cr\r":                    "it has the control or format character U+000D at byte 2",
		"del\x7f":                 "it has the control or format character U+007F at byte 3",
		"c1\u009b":                "it has the control or format character U+009B at byte 2",
		"bidi\u202eabc":           "it has the control or format character U+202E at byte 4",
		"isolate\u2066":           "it has the control or format character U+2066 at byte 7",
		"zero\u200bwidth":         "it has the control or format character U+200B at byte 4",
		"sep\u2028":               "it has the control or format character U+2028 at byte 3",
		"bad\xff":                 "it is not valid UTF-8",
		string(make([]byte, 257)): "it is 257 bytes long; the limit is 256",
	}
	for s, want := range bad {
		if got := NameProblem(s); got != want {
			t.Errorf("NameProblem(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEscape(t *testing.T) {
	cases := map[string]string{
		"plain":              "plain",
		"café 日本":            "café 日本",
		"back\\slash":        "back\\slash", // nothing acts: unchanged
		"evil\x1b[201~\r":    `evil\x1b[201~\x0d`,
		"osc\x1b]52;c;x\a\\": `osc\x1b]52;c;x\x07\\`,
		"bidi\u202etxt.exe":  `bidi\u202etxt.exe`,
		"c1\u009b":           `c1\x9b`,
		"bad\xffbyte":        `bad\xffbyte`,
	}
	for in, want := range cases {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if got := Escape(in); !Inert(got) {
			t.Errorf("Escape(%q) = %q still acts", in, got)
		}
	}
}

func TestInert(t *testing.T) {
	if !Inert("two\nlines\tand a tab ✓") {
		t.Error("text with newline and tab refused")
	}
	for _, s := range []string{"a\x1b[201~", "a\rb", "a\u202e", "a\x00", "a\x9b", "a\xff"} {
		if Inert(s) {
			t.Errorf("Inert(%q) = true", s)
		}
	}
}

func FuzzEscapeIsInert(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[201~\r", "\u202e", "\xff\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !Inert(e) {
			t.Fatalf("Escape(%q) = %q acts", s, e)
		}
		if NameProblem(s) == "" && e != s {
			t.Fatalf("a valid name %q was changed to %q", s, e)
		}
	})
}

func TestControlProblem(t *testing.T) {
	long := "/" + strings.Repeat("a", 4*MaxName)
	for _, s := range []string{"", "/home/u/src/net-kingdom", "/srv/with space,comma/café", long} {
		if p := ControlProblem(s); p != "" {
			t.Errorf("ControlProblem(%q) = %q, want none", s, p)
		}
	}
	bad := map[string]string{
		"/src/\x1b]52;c;aGk=\a": "it has the control or format character U+001B at byte 5",
		"/src/a\nb":             "it has the control or format character U+000A at byte 6",
		"/src/\u202eab":         "it has the control or format character U+202E at byte 5",
		"/src/\xff":             "it is not valid UTF-8",
	}
	for s, want := range bad {
		if got := ControlProblem(s); got != want {
			t.Errorf("ControlProblem(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEscapeText(t *testing.T) {
	cases := map[string]string{
		"two\nlines\tand a tab ✓":     "two\nlines\tand a tab ✓",
		"back\\slash\n":               "back\\slash\n", // nothing acts: unchanged
		"end paste\x1b[201~\rrm -rf":  "end paste\\x1b[201~\\x0drm -rf",
		"osc\x1b]52;c;aGk=\a\n\\ok\t": "osc\\x1b]52;c;aGk=\\x07\n\\\\ok\t",
		"bidi\u202etxt\n":             "bidi\\u202etxt\n",
		"crlf\r\n":                    "crlf\\x0d\n",
		"bad\xff\n":                   "bad\\xff\n",
	}
	for in, want := range cases {
		got := EscapeText(in)
		if got != want {
			t.Errorf("EscapeText(%q) = %q, want %q", in, got, want)
		}
		if !Inert(got) {
			t.Errorf("EscapeText(%q) = %q still acts", in, got)
		}
	}
}

func FuzzEscapeTextIsInert(f *testing.F) {
	for _, s := range []string{"plain\n", "\x1b[201~\r\n\t", "\u202e", "\xff\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := EscapeText(s)
		if !Inert(e) {
			t.Fatalf("EscapeText(%q) = %q acts", s, e)
		}
		if Inert(s) && e != s {
			t.Fatalf("inert text %q was changed to %q", s, e)
		}
		if strings.Count(e, "\n") != strings.Count(s, "\n") {
			t.Fatalf("EscapeText(%q) = %q changed the lines", s, e)
		}
	})
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer line", 8, "a longer…"},
		{"héllo", 2, "h…"}, // é is two bytes: never split
		{"日本語", 4, "日…"},
		{"x", 0, "…"},
	} {
		if got := Cut(c.in, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
