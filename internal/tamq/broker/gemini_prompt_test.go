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

// geminiScreen is Gemini CLI's screen at 80 columns with box as its
// composer's rows, the cursor after the last one's text.
func geminiScreen(box ...string) Screen {
	rows := []string{"✦ Done.", "", strings.Repeat("─", 80), " Shift+Tab to accept edits", ""}
	top := len(rows)
	rows = append(rows, box...)
	last := rows[len(rows)-1]
	rows = append(rows, "", " workspace (/directory)          sandbox          /model")
	return Screen{Rows: rows, Cols: 80, CursorX: len([]rune(last)), CursorY: top + len(box) - 1, Agent: AgentGemini}
}

// Gemini CLI's placeholders count for the text they stand for, and only
// for it: over 5 lines by its lines, else over 500 characters by its
// UTF-16 units (a "#2" when the box holds another of the name).
func TestGeminiInputShows(t *testing.T) {
	six := "From:operator/o: one\ntwo\nthree\nfour\nfive\nsix"
	long := "From:operator/o: " + strings.Repeat("é", 600) // 617 UTF-16 units, 1217 bytes
	for _, tc := range []struct {
		name  string
		s     Screen
		text  string
		shows bool
	}{
		{"lines", geminiScreen(" > [Pasted Text: 6 lines]"), six, true},
		{"lines, with CRLF", geminiScreen(" > [Pasted Text: 6 lines]"), strings.ReplaceAll(six, "\n", "\r\n"), true},
		{"lines, a second of the name", geminiScreen(" > [Pasted Text: 6 lines #2]"), six, true},
		{"other lines", geminiScreen(" > [Pasted Text: 7 lines]"), six, false},
		{"chars", geminiScreen(" > [Pasted Text: 617 chars]"), long, true},
		{"chars counted as bytes", geminiScreen(" > [Pasted Text: 1217 chars]"), long, false},
		{"a draft before the placeholder", geminiScreen(" > my draft [Pasted Text: 6 lines]"), six, false},
		{"short text, typed out", geminiScreen(" > From:operator/o: one", "   two", "   three"), "From:operator/o: one\ntwo\nthree", true},
		{"short text after a draft", geminiScreen(" > draft From:operator/o: one", "   two"), "From:operator/o: one\ntwo", false},
		{"the empty composer", geminiScreen(" >   Type your message or @path/to/file"), "From:operator/o: one", false},
	} {
		s := tc.s
		if tc.name == "the empty composer" {
			s.CursorX = geminiTextCol
		}
		if ok, why := InputShows(s, tc.text); ok != tc.shows {
			t.Errorf("%s: InputShows = %v (%s), want %v", tc.name, ok, why, tc.shows)
		}
	}
	// The empty composer is the prompt; a busy spinner above it is busy.
	empty := geminiScreen(" >   Type your message or @path/to/file")
	empty.CursorX = geminiTextCol
	if st, why := Classify(empty); st != StatePrompt {
		t.Errorf("the empty composer: %s (%s)", st, why)
	}
	busy := empty
	busy.Rows = append([]string(nil), empty.Rows...)
	busy.Rows[1] = " ⠧ Thinking... (esc to cancel, 3s)"
	if st, why := Classify(busy); st != StateBusy {
		t.Errorf("the spinner: %s (%s), want busy and no dialog", st, why)
	}
}

// Gemini CLI's permission question is a dialog by what its screen shows,
// the box "Allow execution of [Shell]?" in place of its composer, not by
// its title ("✋  Action Required"), which any program can set and which
// Gemini CLI may not have set yet.
func TestGeminiPermissionBoxIsADialogWithoutItsTitle(t *testing.T) {
	raw, err := os.ReadFile("testdata/screens/gemini-loop.raw")
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.Index(raw, []byte("Allow execution of"))
	if end < 0 {
		t.Fatal("the recording shows no permission question")
	}
	// The box is drawn in one frame: feed up to the title Gemini CLI sets
	// after it.
	title := bytes.Index(raw[end:], []byte("\x1b]0;\xe2\x9c\x8b"))
	if title < 0 {
		t.Fatal("no Action Required title after the box")
	}
	m := NewModel(80, 24, nil)
	feedModel(t, m, raw[:end+title])
	s := m.Snapshot()
	m.Close()
	s.Agent = AgentGemini
	if strings.Contains(s.Title, "Action Required") {
		t.Fatalf("the title is already set: %q", s.Title)
	}
	if !strings.Contains(strings.Join(s.Rows, "\n"), "● 1. Allow once") {
		t.Fatalf("the box is not drawn yet:\n%s", strings.Join(s.Rows, "\n"))
	}
	state, why := Classify(s)
	if state != StateDialog || !strings.Contains(why, "Allow execution of [Shell]?") {
		t.Errorf("Classify = %s (%s), want a dialog naming the question\n%s", state, why, strings.Join(s.Rows, "\n"))
	}
}
