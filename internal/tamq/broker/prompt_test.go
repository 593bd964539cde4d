package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// The fixtures are terminal output recorded from the real agents (Claude
// Code 2.1.328, Codex 0.169.0, on a 120×40 terminal, offline), each with the
// points where tmux's picture of the screen was taken, what tmux showed
// (cursor, its visibility, the title) and what the screen is
// (testdata/screens/fixtures.json).
type fixture struct {
	Name   string `json:"name"`
	Agent  string `json:"agent"`
	Points []struct {
		Label   string `json:"label"`
		Offset  int    `json:"offset"`
		Want    string `json:"want"`
		X       int    `json:"cursor_x"`
		Y       int    `json:"cursor_y"`
		Visible bool   `json:"cursor_visible"`
		Title   string `json:"title"`
	} `json:"points"`
}

// pasted is what the recordings pasted at their "pasted" points.
const pasted = "line one\nline two\nline three"

// Every recorded dialog is classified not at the prompt, every prompt
// screen at the prompt; the model's picture agrees with tmux's.
func TestRecordedScreens(t *testing.T) {
	b, err := os.ReadFile("testdata/screens/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []fixture
	if err := json.Unmarshal(b, &fixtures); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range fixtures {
		raw, err := os.ReadFile(filepath.Join("testdata/screens", f.Name+".raw"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Points {
			t.Run(f.Name+"@"+p.Label, func(t *testing.T) {
				s := screenAfter(t, raw[:p.Offset])
				s.Agent = f.Agent
				// tmux counts a cursor past the last column (a wrap pending) as
				// column 120; the emulator keeps it on 119.
				if s.CursorX != min(p.X, 119) || s.CursorY != p.Y || s.CursorVisible != p.Visible || s.Title != p.Title {
					t.Errorf("model: cursor %d,%d visible %v title %q; tmux: %d,%d %v %q", s.CursorX, s.CursorY, s.CursorVisible, s.Title, p.X, p.Y, p.Visible, p.Title)
				}
				state, reason := Classify(s)
				at, _ := AtPrompt(s)
				if at != (p.Want == StatePrompt) || state != p.Want && !(p.Want == StateStarting && state == StateDialog) {
					t.Errorf("Classify = %s (%s), want %s\n%s", state, reason, p.Want, strings.Join(s.Rows, "\n"))
				}
				if p.Label == "pasted" {
					if ok, why := InputShows(s, pasted); !ok {
						t.Errorf("InputShows after the paste: %s", why)
					}
				}
				if p.Want == StatePrompt {
					if ok, _ := InputShows(s, pasted); ok {
						t.Error("InputShows on an empty input box")
					}
				}
				kinds[p.Want]++
			})
		}
	}
	// The set covers every kind of screen.
	for _, k := range []string{StatePrompt, StatePromptText, StateBusy, StateStarting, StateDialog} {
		if kinds[k] == 0 {
			t.Errorf("no recorded screen of kind %s", k)
		}
	}
}

// screenAfter is the model's picture after out, on a 120×40 terminal.
func screenAfter(t *testing.T, out []byte) Screen {
	t.Helper()
	m := NewModel(120, 40, nil)
	defer m.Close()
	m.Write(out)
	testutil.WaitFor(t, "the model to take the output", func() bool { return m.Handled() == uint64(len(out)) })
	return m.Snapshot()
}
