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

// A title holding UTF-8 with a 0x9C byte (Gemini CLI's "✦  Working…",
// "✋  Action Required") is no text on the screen, whole or cut into bytes:
// the emulator's parser would take 0x9C for the string's end and print the
// rest.
func TestTitleIsNotPrintedOnTheScreen(t *testing.T) {
	out := "row one\r\n\x1b]0;✋  Action Required (repo)   \x07\x1b]2;✦  Working… (repo)\x1b\\row two\x1b[1mbold\x1b[0m"
	for _, bytewise := range []bool{false, true} {
		m := NewModel(40, 5, nil)
		if bytewise {
			for i := range len(out) {
				feedModel(t, m, []byte{out[i]})
			}
		} else {
			feedModel(t, m, []byte(out))
		}
		s := m.Snapshot()
		m.Close()
		if s.Rows[0] != "row one" || s.Rows[1] != "row twobold" || s.Rows[2] != "" || s.Title != "✦  Working… (repo)" {
			t.Errorf("bytewise=%v: rows %q, title %q", bytewise, s.Rows[:3], s.Title)
		}
	}
}
