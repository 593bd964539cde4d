package textsafe

import "testing"

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
