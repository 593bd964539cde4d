package broker

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/tamq/program"
)

// The programs the detector knows by their screens. Any other program is
// judged by the generic rule alone.
const (
	AgentClaude = program.Claude
	AgentCodex  = program.Codex
)

// AgentOf names the agent whose screen rules apply to a window's command,
// from its words: the first that is a known agent's program (claude, codex,
// or an npm shim such as node_modules/.bin/codex), else "". The names are
// internal/tamq/program's.
func AgentOf(argv []string) string {
	for _, arg := range argv {
		if a := program.CommandAgent(arg); a == AgentClaude || a == AgentCodex {
			return a
		}
	}
	return ""
}

// What a screen shows, as Classify names it.
const (
	// StatePrompt: the input box has the focus and is empty; a paste and an
	// Enter submit exactly the message.
	StatePrompt = "prompt"
	// StatePromptText: the input box holds text (the operator's draft, or
	// a paste): an Enter would send that too.
	StatePromptText = "prompt-text"
	// StateBusy: a turn is running.
	StateBusy = "busy"
	// StateStarting: the agent has not finished starting; a dialog may
	// still come up over its input box.
	StateStarting = "starting"
	// StateDialog: anything else that has the keyboard (a selection, a
	// confirmation, a permission prompt), or a screen not understood.
	StateDialog = "dialog"
)

// AtPrompt says whether the screen shows the agent waiting at its empty
// input prompt, where a delivery's paste and Enter submit the message; when
// it does not, reason says what shows instead. Unknown is not at the prompt.
func AtPrompt(s Screen) (bool, string) {
	state, reason := Classify(s)
	if state != StatePrompt {
		return false, reason
	}
	return true, ""
}

// Classify reads what the screen shows. The rules, every one of which must
// agree before it says StatePrompt:
//
//   - the agent's own report (Program Status Protocol, OSC 7501), when it
//     made one: "blocked" is a dialog, "working" busy;
//   - a title saying "Action Required" (Codex while an approval is open)
//     is a dialog, and so is a frame caught midway (synchronized output);
//   - dialog markers: a highlighted numbered option beside another
//     ("❯ 1. Yes", "› 1. Trust", "> 1. Sign in"), footers such as "Enter to
//     confirm", "Esc to cancel", "Press enter to continue", yes/no
//     questions; only where the input is asked for (promptFrom): what a
//     program printed before its prompt, and the transcript above Claude
//     Code's input box, is history, not a question open now;
//   - Claude Code: its input box (a row "❯" and a no-break space, under a
//     full-width rule, closed by another) with the cursor inside; busy while
//     its footer says "esc to interrupt"; empty when the cursor sits at
//     column 2 of the box's first row;
//   - Codex: a visible cursor (its dialogs hide it), a title set (none
//     until start-up is done), the cursor row inside the composer ("› "
//     and its indented rows); busy with a spinner title, "esc to
//     interrupt" or queued input; empty with the cursor at column 2 of
//     the composer's first row;
//   - for either, a picture that missed output is unknown;
//   - any other program (a shell, a REPL) with none of the markers is at
//     its prompt, as before the detector existed.
func Classify(s Screen) (state, reason string) {
	switch {
	case strings.HasPrefix(s.Status, "blocked"):
		return StateDialog, "the agent reports it is blocked (" + s.Status + ")"
	case s.Status == "working":
		return StateBusy, "the agent reports it is working"
	case strings.Contains(strings.ToLower(s.Title), "action required"):
		return StateDialog, "the terminal title says " + quoteRow(s.Title)
	case s.Drawing:
		return StateDialog, "the agent is midway through drawing its screen"
	case s.Stale && s.Agent != "":
		return StateDialog, "the screen model missed some of the agent's output"
	}
	if marker := dialogMarker(s.Rows, promptFrom(s)); marker != "" {
		return StateDialog, "a dialog shows: " + marker
	}
	switch s.Agent {
	case AgentClaude:
		return classifyClaude(s)
	case AgentCodex:
		return classifyCodex(s)
	}
	return StatePrompt, ""
}

func classifyClaude(s Screen) (string, string) {
	top, bottom, ok := claudeInputBox(s)
	if !ok {
		return StateDialog, "Claude Code's input box is not on screen"
	}
	for _, row := range s.Rows[bottom+1:] {
		if strings.Contains(row, "esc to interrupt") {
			return StateBusy, "Claude Code is busy (esc to interrupt)"
		}
	}
	if s.CursorX != 2 || s.CursorY != top {
		return StatePromptText, "Claude Code's input box holds text"
	}
	return StatePrompt, ""
}

func classifyCodex(s Screen) (string, string) {
	if !s.CursorVisible {
		return StateDialog, "Codex hides its cursor (its dialogs do; its composer does not)"
	}
	top, ok := codexComposer(s)
	if !ok {
		return StateDialog, "the cursor is not in Codex's composer"
	}
	if s.Title == "" {
		return StateStarting, "Codex has not finished starting (no title yet)"
	}
	if r, _ := utf8.DecodeRuneInString(s.Title); r >= 0x2800 && r <= 0x28ff {
		return StateBusy, "Codex is busy (spinner in the title)"
	}
	for _, row := range s.Rows {
		if strings.Contains(row, "esc to interrupt") || strings.Contains(row, "Queued follow-up inputs") {
			return StateBusy, "Codex is busy (" + quoteRow(row) + ")"
		}
	}
	if s.CursorX != 2 || s.CursorY != top {
		return StatePromptText, "Codex's composer holds text"
	}
	return StatePrompt, ""
}

// InputShows says whether text, just pasted, sits in the agent's input box
// with the cursor after it, so that the Enter will submit it; for programs
// without a box tamq can read (shells, REPLs) it holds. Claude Code shows a
// long paste as "[Pasted text #1 +42 lines]"; Codex shows its last lines.
func InputShows(s Screen, text string) (bool, string) {
	if s.Agent != AgentClaude && s.Agent != AgentCodex {
		return true, ""
	}
	state, reason := Classify(s)
	if state != StatePromptText {
		if state == StatePrompt {
			return false, "the input box is still empty after the paste"
		}
		return false, "after the paste: " + reason
	}
	row := s.Rows[s.CursorY]
	if s.Agent == AgentClaude && strings.Contains(row, "[Pasted text #") {
		return true, ""
	}
	for _, lead := range []string{"❯\u00a0", "› ", "  "} {
		row = strings.TrimPrefix(row, lead)
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	last, shown := squeeze(lines[len(lines)-1]), squeeze(row)
	// The cursor row shows the end of the text's last line (it may wrap).
	if shown != "" && last != "" && (strings.HasSuffix(last, shown) || strings.HasSuffix(shown, last)) {
		return true, ""
	}
	return false, "the pasted text does not show in the input box"
}

// squeeze drops all white space: the box wraps and indents the text.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// dialogPatterns are compiled on first use: every tamq command links this
// package, and only the broker needs them.
var dialogPatterns = sync.OnceValue(func() (p struct{ highlighted, numbered, footer *regexp.Regexp }) {
	// A highlighted numbered option: a highlight glyph, then "1." or "1)".
	p.highlighted = regexp.MustCompile(`^\s*[❯›>▸▶→●◉]\s*\d{1,2}[.)]\s+\S`)
	// Any numbered option.
	p.numbered = regexp.MustCompile(`^\s*(?:[❯›>▸▶→●◉]\s*)?\d{1,2}[.)]\s+\S`)
	// Footers and questions of selection dialogs and confirmations, as the
	// agents and common programs word them.
	p.footer = regexp.MustCompile(`(?i)\b(?:press\s+)?(?:enter|return)\s+(?:to\s+)?(?:confirm|continue|select|submit|approve|accept|proceed)\b` +
		`|\besc(?:ape)?\s+(?:to\s+)?(?:cancel|back|go\s+back|skip|exit|decline|reject)\b` +
		`|\btab to amend\b` +
		`|[(\[]\s*y(?:es)?\s*/\s*n(?:o)?\s*[)\]]` +
		`|\bdo you want to (?:proceed|continue|allow|run|make|create|trust)\b` +
		`|\bwould you like to (?:run|proceed|continue|allow|make|apply)\b` +
		`|\btrust this folder\b|\bhooks need review\b|\bwaiting for startup\b`)
	return p
})

// questionRows is how far above the cursor a question may stand when the
// program waits on a fresh line (a menu printed, then a read) or hides its
// cursor: a menu's options and footer fit in it.
const questionRows = 6

// promptFrom is the first row where dialog markers count: where the input
// is asked for, not the history above it.
//
//   - Claude Code with its input box on screen and the cursor in it: the
//     box's top rule; the transcript above it is history (a tool's output
//     may say anything). Without the box (a dialog replaces it), the whole
//     screen.
//   - Codex: the whole screen (its dialogs take the screen's bottom, with
//     the cursor hidden).
//   - Any other program: the cursor's row and below when the cursor row
//     shows the program's prompt ("$ ", ">>> "): a question printed above
//     it (a "[Y/n]" in a shell's history) was answered or abandoned. When
//     the cursor waits at the start of an empty row, sits on an option of
//     a numbered list, or is hidden, the program may have printed its
//     question just above: questionRows more.
func promptFrom(s Screen) int {
	switch s.Agent {
	case AgentClaude:
		if top, _, ok := claudeInputBox(s); ok {
			return top - 1
		}
		return 0
	case AgentCodex:
		return 0
	}
	y := min(max(s.CursorY, 0), len(s.Rows))
	if y < len(s.Rows) && s.CursorVisible && strings.TrimSpace(prefixCols(s.Rows[y], s.CursorX)) != "" &&
		!dialogPatterns().numbered.MatchString(s.Rows[y]) {
		return y
	}
	return max(y-questionRows, 0)
}

// prefixCols is the first n columns of a row (one rune a column: close
// enough to tell an empty row start from a prompt).
func prefixCols(row string, n int) string {
	for i := range row {
		if n == 0 {
			return row[:i]
		}
		n--
	}
	return row
}

// dialogMarker returns the first row from from on that marks a dialog, or "".
func dialogMarker(rows []string, from int) string {
	p := dialogPatterns()
	for y := from; y < len(rows); y++ {
		row := rows[y]
		if p.footer.MatchString(row) {
			return quoteRow(row)
		}
		if p.highlighted.MatchString(row) {
			// Another numbered option close by makes it a list to choose from.
			for z := max(y-6, 0); z < min(y+7, len(rows)); z++ {
				if z != y && p.numbered.MatchString(rows[z]) {
					return quoteRow(row)
				}
			}
		}
	}
	return ""
}

// isRule reports a horizontal rule across the screen's width.
func isRule(row string, width int) bool {
	return utf8.RuneCountInString(row) >= max(width-1, 20) && strings.Trim(row, "─") == ""
}

// claudeInputBox finds Claude Code's input box: a row that starts with "❯"
// and a no-break space (past prompts in the transcript have a plain space)
// right under a full-width rule, down to the next such rule, with the
// cursor inside. It returns the box's first text row and the closing rule's.
func claudeInputBox(s Screen) (top, bottom int, ok bool) {
	width := s.width()
	for y := len(s.Rows) - 1; y >= 1; y-- {
		if !strings.HasPrefix(s.Rows[y], "❯\u00a0") || !isRule(s.Rows[y-1], width) {
			continue
		}
		for z := y + 1; z < len(s.Rows); z++ {
			if isRule(s.Rows[z], width) {
				return y, z, s.CursorY >= y && s.CursorY < z
			}
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// codexComposer finds Codex's composer around the cursor: walking up from
// the cursor's row over rows indented by two spaces, a row that starts with
// "› ". It returns that row.
func codexComposer(s Screen) (top int, ok bool) {
	for y := min(s.CursorY, len(s.Rows)-1); y >= 0; y-- {
		row := s.Rows[y]
		if strings.HasPrefix(row, "› ") {
			return y, true
		}
		if !strings.HasPrefix(row, "  ") {
			return 0, false
		}
	}
	return 0, false
}

// width is the screen's width: Cols, or else the widest row (rows are
// trimmed; a full-width rule spans the screen).
func (s Screen) width() int {
	if s.Cols > 0 {
		return s.Cols
	}
	w := 0
	for _, row := range s.Rows {
		w = max(w, utf8.RuneCountInString(row))
	}
	return w
}

// quoteRow shows a row in a reason: trimmed and cut to 60 characters.
func quoteRow(row string) string {
	row = strings.TrimSpace(row)
	if r := []rune(row); len(r) > 60 {
		row = string(r[:60]) + "…"
	}
	return `"` + row + `"`
}
