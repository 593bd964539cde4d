package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// The fixtures are terminal output recorded from the real agents (Claude
// Code 2.1.328, Codex 0.169.0, offline; on a 120×40 terminal unless the
// fixture says otherwise), each with the points where tmux's picture of the
// screen was taken, what tmux showed (cursor, its visibility, the title) and
// what the screen is (testdata/screens/fixtures.json). The points of the
// paste recordings (TestRecordPastes, under the agents build tag) name the
// text pasted and whether it shows in the input box.
type fixture struct {
	Name   string         `json:"name"`
	Agent  string         `json:"agent"`
	Cols   int            `json:"cols,omitempty"`
	Rows   int            `json:"rows,omitempty"`
	Points []fixturePoint `json:"points"`
}

type fixturePoint struct {
	Label   string `json:"label"`
	Offset  int    `json:"offset"`
	Want    string `json:"want"`
	X       int    `json:"cursor_x"`
	Y       int    `json:"cursor_y"`
	Visible bool   `json:"cursor_visible"`
	Title   string `json:"title"`
	// Paste is the text pasted (after Draft was typed); Shows whether it
	// must be taken as showing in the input box.
	Paste *pasteSpec `json:"paste,omitempty"`
	Draft string     `json:"draft,omitempty"`
	Shows *bool      `json:"shows,omitempty"`
}

// pasted is what the recordings pasted at their "pasted" points.
const pasted = "line one\nline two\nline three"

// Every recorded dialog is classified not at the prompt, every prompt
// screen at the prompt; every recorded paste is taken as showing in the
// input box, and none where the box holds more (a draft) or the agent is
// busy; the model's picture agrees with tmux's.
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
	pastes := map[string]int{}
	for _, f := range fixtures {
		raw, err := os.ReadFile(filepath.Join("testdata/screens", f.Name+".raw"))
		if err != nil {
			t.Fatal(err)
		}
		cols, rows := f.Cols, f.Rows
		if cols == 0 {
			cols, rows = 120, 40
		}
		// One model a recording, fed up to each point in turn.
		points := slices.Clone(f.Points)
		slices.SortStableFunc(points, func(a, b fixturePoint) int { return a.Offset - b.Offset })
		m := NewModel(cols, rows, nil)
		fed := 0
		for _, p := range points {
			feedModel(t, m, raw[fed:p.Offset])
			fed = p.Offset
			s := m.Snapshot()
			s.Agent = f.Agent
			t.Run(f.Name+"@"+p.Label, func(t *testing.T) {
				// tmux counts a cursor past the last column (a wrap pending) as
				// one more column; the emulator keeps it on the last.
				if s.CursorX != min(p.X, cols-1) || s.CursorY != p.Y || s.CursorVisible != p.Visible || s.Title != p.Title {
					t.Errorf("model: cursor %d,%d visible %v title %q; tmux: %d,%d %v %q", s.CursorX, s.CursorY, s.CursorVisible, s.Title, p.X, p.Y, p.Visible, p.Title)
				}
				state, reason := Classify(s)
				at, _ := AtPrompt(s)
				if at != (p.Want == StatePrompt) || state != p.Want && !(p.Want == StateStarting && state == StateDialog) {
					t.Errorf("Classify = %s (%s), want %s\n%s", state, reason, p.Want, strings.Join(s.Rows, "\n"))
				}
				text := pasted
				switch {
				case p.Paste != nil:
					text = p.Paste.text()
					if ok, why := InputShows(s, text); ok != *p.Shows {
						t.Errorf("InputShows = %v (%s), want %v\n%s", ok, why, *p.Shows, strings.Join(s.Rows, "\n"))
					}
					pastes[fmt.Sprintf("%s shows %v", f.Agent, *p.Shows)]++
				case p.Label == "pasted":
					if ok, why := InputShows(s, pasted); !ok {
						t.Errorf("InputShows after the paste: %s", why)
					}
				case p.Want != StatePromptText:
					// An empty box, a dialog, a busy agent: no text shows.
					if ok, _ := InputShows(s, pasted); ok {
						t.Errorf("InputShows on a screen of kind %s", p.Want)
					}
				}
				// Nor does a text that is not the one pasted: one more line.
				if ok, _ := InputShows(s, text+"\nx"); ok {
					t.Errorf("InputShows for a text one line longer than the paste\n%s", strings.Join(s.Rows, "\n"))
				}
			})
			kinds[p.Want]++
		}
		m.Close()
	}
	// The set covers every kind of screen, and pastes into either agent
	// that show and that do not.
	for _, k := range []string{StatePrompt, StatePromptText, StateBusy, StateStarting, StateDialog} {
		if kinds[k] == 0 {
			t.Errorf("no recorded screen of kind %s", k)
		}
	}
	for _, agent := range []string{AgentClaude, AgentCodex} {
		for _, shows := range []bool{true, false} {
			if k := fmt.Sprintf("%s shows %v", agent, shows); pastes[k] == 0 {
				t.Errorf("no recorded paste: %s", k)
			}
		}
	}
}

// feedModel hands out to the model in pieces it takes without skipping,
// and waits until it has taken them.
func feedModel(t *testing.T, m *Model, out []byte) {
	t.Helper()
	for len(out) > 0 {
		n := min(len(out), 64<<10)
		want := m.Handled() + uint64(n)
		m.Write(out[:n])
		out = out[n:]
		testutil.WaitFor(t, "the model to take the output", func() bool { return m.Handled() == want })
	}
}
