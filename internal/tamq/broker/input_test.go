package broker

import (
	"reflect"
	"strings"
	"testing"
)

type typed struct {
	passed []byte
	echo   []byte
	routed [][2]string
}

func newFilter() (*InputFilter, *typed) {
	t := &typed{}
	f := &InputFilter{
		Slugs: func() []string { return slugs },
		Route: func(target, body string) { t.routed = append(t.routed, [2]string{target, body}) },
		Echo:  func(p []byte) { t.echo = append(t.echo, p...) },
	}
	return f, t
}

func TestOperatorAddressLines(t *testing.T) {
	tests := []struct {
		name   string
		keys   string
		passed string
		routed [][2]string
	}{
		{"an address line is routed, not passed", "To:net-kingdom: please rebase\r", "", [][2]string{{"net-kingdom", "please rebase"}}},
		{"slug with space and comma", "To:with space,comma: hi\r", "", [][2]string{{"with space,comma", "hi"}}},
		{"other words pass", "Tomorrow is fine\r", "Tomorrow is fine\r", nil},
		{"unregistered slug passes", "To:nowhere: x\r", "To:nowhere: x\r", nil},
		{"not at line start", "ok To:net: x\r", "ok To:net: x\r", nil},
		{"after Enter a new line starts", "ls\rTo:net: x\r", "ls\r", [][2]string{{"net", "x"}}},
		{"empty body passes", "To:net:\r", "To:net:\r", nil},
		{"backspace while held", "To:net-\x7f: fixed\r", "", [][2]string{{"net", "fixed"}}},
		{"a typo releases the line to the agent", "To:nex\x7ft: x\r", "To:nex\x7ft: x\r", nil},
		{"control key releases", "To:ne\x03", "To:ne\x03", nil},
		{"escape sequence releases", "T\x1b[A", "T\x1b[A", nil},
		{"two messages", "To:net: a\rTo:railiance: b\r", "", [][2]string{{"net", "a"}, {"railiance", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bytewise := range []bool{false, true} {
				f, got := newFilter()
				if bytewise {
					for i := range len(tt.keys) {
						got.passed = append(got.passed, f.Filter([]byte{tt.keys[i]})...)
					}
				} else {
					got.passed = f.Filter([]byte(tt.keys))
				}
				if string(got.passed) != tt.passed {
					t.Errorf("bytewise=%v: passed %q, want %q", bytewise, got.passed, tt.passed)
				}
				if !reflect.DeepEqual(got.routed, tt.routed) {
					t.Errorf("bytewise=%v: routed %q, want %q", bytewise, got.routed, tt.routed)
				}
			}
		})
	}
}

func TestHeldKeysAreEchoedAndErasedOnRelease(t *testing.T) {
	f, got := newFilter()
	f.Filter([]byte("Tor"))
	if e := string(got.echo); !strings.HasPrefix(e, "Tor") || !strings.HasSuffix(e, strings.Repeat("\b \b", 3)) {
		t.Errorf("echo %q", e)
	}
}
