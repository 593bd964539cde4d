package broker

import "testing"

func TestTitleScanner(t *testing.T) {
	tests := []struct{ name, out, want, status string }{
		{"OSC 2 with BEL", "\x1b]2;[ ! ] Action Required\x07", "[ ! ] Action Required", ""},
		{"OSC 0 with ST", "\x1b]0;repo\x1b\\", "repo", ""},
		{"UTF-8 with a 0x9C byte inside", "\x1b]0;✳ Claude Code\x07", "✳ Claude Code", ""},
		{"the last one wins", "\x1b]0;one\x07text\x1b]2;two\x07", "two", ""},
		{"other OSCs are not titles", "\x1b]0;kept\x07\x1b]8;;http://x\x07link\x1b]8;;\x07\x1b]11;?\x1b\\", "kept", ""},
		{"a cut string sets nothing", "\x1b]0;kept\x07\x1b]2;cut\x1b[0m", "kept", ""},
		{"program status", "\x1b]7501;?\x07\x1b]7501;state=idle:app=codex\x07\x1b]7501;state=blocked:app=codex:kind=permission\x07", "", "blocked:permission"},
		{"child records are not the agent's", "\x1b]7501;state=idle:app=claude-code\x1b\\\x1b]7501;state=working:id=7\x07", "", "idle"},
	}
	for _, tt := range tests {
		for _, bytewise := range []bool{false, true} {
			var s titleScanner
			if bytewise {
				for i := range len(tt.out) {
					s.feed([]byte{tt.out[i]})
				}
			} else {
				s.feed([]byte(tt.out))
			}
			if s.title != tt.want || s.status != tt.status {
				t.Errorf("%s (bytewise=%v): title %q, status %q; want %q, %q", tt.name, bytewise, s.title, s.status, tt.want, tt.status)
			}
		}
	}
}
