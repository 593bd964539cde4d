package broker

import (
	"strings"
	"testing"
)

// screen builds a screen from rows, with the cursor at the end of the last
// non-empty row.
func screen(agent string, rows ...string) Screen {
	s := Screen{Rows: rows, Agent: agent, CursorVisible: true, Cols: 80}
	for y, r := range rows {
		if r != "" {
			s.CursorY, s.CursorX = y, len([]rune(r))
		}
	}
	return s
}

// framed is a TUI's permission dialog drawn in a frame (as Gemini CLI
// draws one), with the cursor hidden under it and the title given.
func framed(title string) Screen {
	return Screen{Title: title, CursorY: 9, Rows: []string{
		"╭──────────────────────────────────╮",
		"│ Shell rm -rf build               │",
		"│                                  │",
		"│ Allow execution of: 'rm'?        │",
		"│                                  │",
		"│ ● 1. Yes, allow once             │",
		"│   2. Yes, allow always           │",
		"│   3. No, suggest changes (esc)   │",
		"╰──────────────────────────────────╯",
		"",
	}}
}

func TestClassifyOtherPrograms(t *testing.T) {
	menuThenRead := screen("", "Choose how to sign in.", "", "> 1. Sign in with a browser", "  2. Use a key", "", "Press enter to continue", "")
	menuThenRead.CursorY, menuThenRead.CursorX = 6, 0
	tests := []struct {
		name string
		s    Screen
		want string
	}{
		{"a shell prompt", screen("", "$ ls", "README", "$ "), StatePrompt},
		{"a REPL", screen("", ">>> 1+1", "2", ">>> "), StatePrompt},
		{"an empty screen (the test recorders)", Screen{Rows: make([]string, 24)}, StatePrompt},
		{"a numbered list printed by a program", screen("", "1. one", "2. two", "$ "), StatePrompt},
		{"one highlighted line is no menu", screen("", "> 1. the only step", "$ "), StatePrompt},
		{"apt asks", screen("", "Need to get 10 MB.", "Do you want to continue? [Y/n] "), StateDialog},
		{"a menu", screen("", "> 1. Sign in", "  2. Quit", ""), StateDialog},
		{"a menu with ❯", screen("", "❯ 1. Yes", "  2. No", "Esc to cancel"), StateDialog},
		{"a confirmation footer", screen("", "Delete it?", "Enter to confirm · Esc to cancel"), StateDialog},
		{"press enter to continue", screen("", "Press Enter to continue"), StateDialog},
		{"an old dialog far above the cursor", screen("", append([]string{"Press enter to continue"}, append(make([]string, 12), "$ ")...)...), StatePrompt},
		// The live screen is judged where the input is asked for: a question
		// in the history above a shell's prompt was answered long ago.
		{"a [Y/n] answered in a shell's history", screen("", "$ sudo apt install jq", "Do you want to continue? [Y/n] y",
			"Setting up jq (1.7.1) ...", "$ "), StatePrompt},
		{"a file that says press enter, printed by cat", screen("", "$ cat notes.txt", "Press enter to continue", "> 1. Yes", "  2. No", "$ "), StatePrompt},
		{"a menu, then a read on a fresh line", menuThenRead, StateDialog},
		{"a question above a hidden cursor", Screen{Rows: []string{"Overwrite it?", "[y/N]", "", ""}, CursorY: 3}, StateDialog},
		// The title is a hint, never a dialog by itself: any program in the
		// terminal can set it (issue 37).
		{"Action Required in the title over a prompt", Screen{Rows: []string{"$ "}, Title: "[ ! ] Action Required | repo", CursorX: 2, CursorVisible: true}, StatePrompt},
		{"Action Required in the title over an empty screen", Screen{Rows: make([]string, 24), Title: "✋ Action Required"}, StatePrompt},
		{"a dialog in a frame, titled", framed("✋  Action Required (repo)"), StateDialog},
		{"the same frame untitled (as before: the title let it count)", framed(""), StatePrompt},
		{"blocked by its own report", Screen{Rows: []string{"$ "}, Status: "blocked:permission"}, StateDialog},
		{"working by its own report", Screen{Rows: []string{"$ "}, Status: "working"}, StateBusy},
		{"idle by its own report", Screen{Rows: []string{"$ "}, Status: "idle"}, StatePrompt},
		{"a frame half drawn", Screen{Rows: []string{"$ "}, Drawing: true}, StateDialog},
		{"a stale picture of a shell still counts", Screen{Rows: []string{"$ "}, Stale: true}, StatePrompt},
	}
	for _, tt := range tests {
		if got, why := Classify(tt.s); got != tt.want {
			t.Errorf("%s: Classify = %s (%s), want %s", tt.name, got, why, tt.want)
		}
	}
}

func TestClassifyAgents(t *testing.T) {
	rule := strings.Repeat("─", 80)
	claudeBox := func(input string, footer string) Screen {
		s := Screen{Agent: AgentClaude, Cols: 80, Rows: []string{"● earlier output", "", rule, "❯\u00a0" + input, rule, "  " + footer}}
		s.CursorY, s.CursorX = 3, 2+len([]rune(input))
		return s
	}
	codex := func(title, input string) Screen {
		s := Screen{Agent: AgentCodex, Title: title, CursorVisible: true, Rows: []string{">_ OpenAI Codex", "", "› " + input, "", "  model · /repo"}}
		s.CursorY, s.CursorX = 2, 2+len([]rune(input))
		if input == "" {
			s.Rows[2] = "› Ask Codex to do anything"
		}
		return s
	}
	titled := func(s Screen) Screen { s.Title = "[ ! ] Action Required | repo"; return s }
	stale := claudeBox("", "? for shortcuts")
	stale.Stale = true
	hidden := codex("repo", "")
	hidden.CursorVisible = false
	// A tool's output in the transcript above the input box asks nothing.
	transcript := claudeBox("", "? for shortcuts")
	transcript.Rows[0] = "  ⎿  Do you want to proceed? [Y/n]"
	pastBox := claudeBox("", "? for shortcuts")
	pastBox.Rows[3] = "❯ an old prompt" // a plain space: the transcript, not the box
	tests := []struct {
		name string
		s    Screen
		want string
	}{
		{"Claude at its prompt", claudeBox("", "? for shortcuts"), StatePrompt},
		{"Claude with a draft", claudeBox("half typed", "? for shortcuts"), StatePromptText},
		{"Claude busy", claudeBox("", "esc to interrupt"), StateBusy},
		{"Claude's transcript, no box", pastBox, StateDialog},
		{"Claude's transcript quotes a question", transcript, StatePrompt},
		{"Claude, a stale picture", stale, StateDialog},
		{"Codex at its prompt", codex("repo", ""), StatePrompt},
		{"Codex starting", codex("", ""), StateStarting},
		{"Codex busy", codex("⠦ repo", ""), StateBusy},
		{"Codex with a draft", codex("repo", "draft"), StatePromptText},
		{"Codex with its cursor hidden", hidden, StateDialog},
		// A title of "Action Required" that the screen does not bear out
		// (any program can set it, issue 37) makes no dialog of an idle box.
		{"Claude at its prompt, Action Required in the title", titled(claudeBox("", "? for shortcuts")), StatePrompt},
		{"Codex at its prompt, Action Required in the title", codex("[ ! ] Action Required | repo", ""), StatePrompt},
		{"Codex's approval, titled", titled(hidden), StateDialog},
	}
	for _, tt := range tests {
		if got, why := Classify(tt.s); got != tt.want {
			t.Errorf("%s: Classify = %s (%s), want %s", tt.name, got, why, tt.want)
		}
	}
}

func TestInputShows(t *testing.T) {
	rule := strings.Repeat("─", 80)
	box := func(cx int, rows ...string) Screen {
		all := append(append([]string{"● earlier output", "", rule}, rows...), rule, "  ⏸ manual mode on")
		return Screen{Agent: AgentClaude, Cols: 80, Rows: all, CursorX: cx, CursorY: 2 + len(rows)}
	}
	// Claude Code's box, scrolled: its top rule says how many rows hide.
	scrolled := box(14, "  line two", "  line three")
	scrolled.Rows[2] = "─── ↑ 1 more " + strings.Repeat("─", 67)
	transcript := box(2, "❯\u00a0")
	transcript.Rows[0] = "❯ [Pasted text #1 +2 lines]"
	draftUnder := box(7, "❯\u00a0draft")
	draftUnder.Rows[0] = transcript.Rows[0]
	busy := box(12, "❯\u00a0line one")
	busy.Rows[0] = "✻ Actioning…"
	done := box(12, "❯\u00a0line one")
	done.Rows[0] = "✻ Crunched for 2s · done 7:00 PM"
	composer := func(cx int, rows ...string) Screen {
		all := append(append([]string{">_ OpenAI Codex (v0.169.0)", "", "› an earlier prompt", ""}, rows...), "", "  GPT-6.1-Sol default · /repo")
		return Screen{Agent: AgentCodex, Cols: 80, Rows: all, CursorX: cx, CursorY: 3 + len(rows), CursorVisible: true, Title: "repo"}
	}
	codexHistory := composer(2, "› Ask Codex to do anything")
	codexHistory.Rows[2] = "› [Pasted Content 1294 chars]"
	codexScrolled := composer(12, "›"+strings.Repeat(" ", 78)+"↑", "  line three")
	codexWorking := composer(12, "› line three")
	codexWorking.Status = "working"
	long := strings.Repeat("x", 1294)
	lines := strings.Repeat("line\n", 29) + "end"
	tests := []struct {
		name string
		s    Screen
		text string
		want bool
	}{
		{"three lines", box(12, "❯\u00a0line one", "  line two", "  line three"), "line one\nline two\nline three", true},
		{"collapsed", box(30, "❯\u00a0[Pasted text #1 +29 lines]"), lines, true},
		{"collapsed, one line", box(18, "❯\u00a0[Pasted text #4]"), long, true},
		{"collapsed, other lines", box(30, "❯\u00a0[Pasted text #1 +29 lines]"), "long\ntext", false},
		{"collapsed, lines for one", box(30, "❯\u00a0[Pasted text #1 +29 lines]"), long, false},
		{"collapsed after a draft", box(30, "❯\u00a0draft [Pasted text #2]"), long, false},
		{"two pastes", box(30, "❯\u00a0[Pasted text #1][Pasted text #2]"), long, false},
		{"a draft, not our text", box(7, "❯\u00a0draft"), "line one", false},
		{"a draft before our text", box(16, "❯\u00a0draft line one"), "line one", false},
		{"text after the cursor", box(10, "❯\u00a0line one", "  and more"), "line one", false},
		{"still empty", box(2, "❯\u00a0"), "line one", false},
		{"a placeholder in the transcript, the box empty", transcript, lines, false},
		{"a placeholder in the transcript, a draft in the box", draftUnder, "draft\nx\ny", false},
		{"scrolled to the text's end", scrolled, "line one\nline two\nline three", true},
		{"scrolled, another text", scrolled, "line one\nline two\nline four", false},
		{"busy", busy, "line one", false},
		{"a finished turn above", done, "line one", true},
		{"a question pasted", box(40, "❯\u00a0Do you want to proceed? [y/n]"), "Do you want to proceed? [y/n]", true},
		{"Codex: collapsed", composer(29, "› [Pasted Content 1294 chars]"), long, true},
		{"Codex: collapsed, another size", composer(29, "› [Pasted Content 1294 chars]"), long[1:], false},
		{"Codex: the same size twice", composer(32, "› [Pasted Content 1294 chars][Pasted Content 1294 chars] #2"), long, false},
		{"Codex: collapsed after a draft", composer(37, "› my draft[Pasted Content 1294 chars]"), long, false},
		{"Codex: a placeholder in the history", codexHistory, long, false},
		{"Codex: empty lines", composer(7, "› one", "", "  two"), "one\n\ntwo", true},
		{"Codex: scrolled", codexScrolled, "one\n\nline three", true},
		{"Codex: working", codexWorking, "line three", false},
		{"Codex: a footer pasted", composer(25, "› Press enter to continue"), "Press enter to continue", true},
		{"a shell: nothing to read", Screen{Rows: []string{"$ "}}, "anything", true},
	}
	for _, tt := range tests {
		if got, why := InputShows(tt.s, tt.text); got != tt.want {
			t.Errorf("%s: InputShows = %v (%s), want %v\n%s", tt.name, got, why, tt.want, strings.Join(tt.s.Rows, "\n"))
		}
	}
}

func TestAgentOf(t *testing.T) {
	for argv, want := range map[string]string{
		"claude":                                  AgentClaude,
		"/x/node_modules/.bin/codex --no-daemon":  AgentCodex,
		"sh -c 'exec claude --settings s.json'":   AgentClaude,
		"bash":                                    "",
		"sh -c 'stty raw -echo; exec cat > file'": "",
	} {
		if got := AgentOf(strings.Fields(argv)); got != want {
			t.Errorf("AgentOf(%q) = %q, want %q", argv, got, want)
		}
	}
}
