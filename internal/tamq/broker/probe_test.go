package broker

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestStatusProbeAnswers(t *testing.T) {
	tests := []struct {
		name  string
		reads []string
		want  []string
	}{
		{"BEL", []string{"ui\x1b]7501;?\x07\x1b[c"}, []string{"\x1b]7501;?\x07"}},
		{"ST", []string{"\x1b]7501;?\x1b\\"}, []string{"\x1b]7501;?\x1b\\"}},
		{"split in the probe", []string{"text \x1b]75", "01;?\x07 more"}, []string{"\x1b]7501;?\x07"}},
		{"split before the terminator", []string{"\x1b]7501;?", "\x07"}, []string{"\x1b]7501;?\x07"}},
		{"split inside ST", []string{"\x1b]7501;?\x1b", "\\"}, []string{"\x1b]7501;?\x1b\\"}},
		{"a state report is no probe", []string{"\x1b]7501;state=idle:app=codex\x07"}, nil},
		{"two", []string{"\x1b]7501;?\x07x\x1b]7501;?\x07"}, []string{"\x1b]7501;?\x07", "\x1b]7501;?\x07"}},
		{"plain output", []string{strings.Repeat("7501;? ", 100)}, nil},
	}
	for _, tt := range tests {
		var p probeScanner
		var got []string
		for _, r := range tt.reads {
			for _, a := range p.answers([]byte(r)) {
				got = append(got, string(a))
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: answers %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The relay answers the child's probe itself (tmux would not), ahead of
// anything the terminal answers.
func TestRelayAnswersTheStatusProbe(t *testing.T) {
	got := t.TempDir() + "/got"
	r := &Relay{Argv: []string{"sh", "-c", `stty raw -echo; printf '\033]7501;?\007'; head -c 9 > "$0"`, got}, Out: io.Discard, AnswerStatusProbe: true}
	if _, err := r.Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); string(b) != "\x1b]7501;?\x07" {
		t.Fatalf("the child read %q", b)
	}
}
