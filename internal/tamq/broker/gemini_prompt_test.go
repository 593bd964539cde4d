package broker

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Gemini CLI draws its empty composer before it turns bracketed paste on
// (under tamq's broker seconds before, while its terminal queries are
// answered). A paste then comes in as typed keys, unmarked, and shows as
// the text, never as the placeholder the check after the paste looks for:
// the broker waits for bracketed paste (starting), then reads the prompt.
func TestGeminiStartsOnceBracketedPasteIsOn(t *testing.T) {
	raw, err := os.ReadFile("testdata/screens/gemini-loop.raw")
	if err != nil {
		t.Fatal(err)
	}
	on := bytes.Index(raw, []byte("\x1b[?2004h"))
	if on < 0 {
		t.Fatal("the recording never turns bracketed paste on")
	}
	for _, tc := range []struct {
		upTo int
		want string
	}{{on, StateStarting}, {on + len("\x1b[?2004h"), StatePrompt}} {
		m := NewModel(80, 24, nil)
		feedModel(t, m, raw[:tc.upTo])
		s := m.Snapshot()
		m.Close()
		s.Agent = AgentGemini
		if !strings.Contains(strings.Join(s.Rows, "\n"), " >   Type your message") {
			t.Fatalf("the composer is not drawn at offset %d:\n%s", tc.upTo, strings.Join(s.Rows, "\n"))
		}
		if state, why := Classify(s); state != tc.want {
			t.Errorf("at offset %d: Classify = %s (%s), want %s", tc.upTo, state, why, tc.want)
		}
	}
}
