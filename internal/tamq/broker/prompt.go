package broker

import (
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The programs the detector knows by their screens. Any other program is
// judged by the generic rule alone.
const (
	AgentClaude = "claude"
	AgentCodex  = "codex"
)

// AgentOf names the agent a window's command runs, from its words: the
// first that is a known agent's program (claude, codex, or an npm shim
// such as node_modules/.bin/codex), else "".
func AgentOf(argv []string) string {
	for _, arg := range argv {
		for _, word := range strings.Fields(arg) {
			switch strings.Trim(filepath.Base(word), `'"`) {
			case "claude":
				return AgentClaude
			case "codex":
				return AgentCodex
			}
		}
	}
	return ""
}

// AtPrompt says whether the screen shows the agent waiting at its input
// prompt, where a delivery's Enter submits the text; when it does not,
// reason says what shows instead. Unknown is not at the prompt. The rules:
//
//   - a title saying "Action Required" (Codex while an approval or input
//     overlay is open) is a dialog;
//   - dialog markers anywhere on an agent's screen, or from 10 rows above
//     the cursor down for other programs: a highlighted numbered option
//     beside another numbered option ("❯ 1. Yes", "› 1. Trust",
//     "> 1. Sign in"), footers such as "Enter to confirm", "Esc to cancel",
//     "Press enter to continue", and yes/no questions;
//   - Claude Code is at its prompt only with its input box on screen (a
//     "❯" row between two rules) and the cursor in it; Codex only with its
//     composer ("›" row) on screen and its visible cursor in it;
//   - for Claude Code and Codex, a picture that missed output is unknown,
//     and for any program a frame caught midway (synchronized output);
//   - any other program (a shell, a REPL, a recorder) with none of the
//     markers is at its prompt, as before the detector existed.
func AtPrompt(s Screen) (bool, string) {
	if strings.Contains(strings.ToLower(s.Title), "action required") {
		return false, "the terminal title says " + quoteRow(s.Title)
	}
	if s.Stale && s.Agent != "" {
		return false, "the screen model missed some of the agent's output"
	}
	if s.Drawing {
		return false, "the agent is midway through drawing its screen"
	}
	from := 0
	if s.Agent == "" {
		from = max(s.CursorY-10, 0)
	}
	if marker := dialogMarker(s.Rows, from); marker != "" {
		return false, "a dialog shows: " + marker
	}
	switch s.Agent {
	case AgentClaude:
		if _, _, ok := claudeInputBox(s); !ok {
			return false, "Claude Code's input box is not on screen"
		}
	case AgentCodex:
		if _, _, ok := codexComposer(s); !ok {
			return false, "Codex's composer is not on screen"
		}
	}
	return true, ""
}

// InputShows says whether text, just pasted, sits in the agent's input box,
// so that the Enter will submit it; for programs without a box tamq can read
// (shells, REPLs) it holds. Agents show a long paste as a placeholder
// ("[Pasted text #1 +42 lines]", "[Pasted Content 9000 chars]"), which
// counts as the text.
func InputShows(s Screen, text string) (bool, string) {
	var first, last int
	var ok bool
	var lead string
	switch s.Agent {
	case AgentClaude:
		first, last, ok = claudeInputBox(s)
		lead = "❯"
	case AgentCodex:
		first, last, ok = codexComposer(s)
		lead = "›"
	default:
		return true, ""
	}
	if !ok {
		return false, "the input box is gone after the paste"
	}
	var box strings.Builder
	for y := first; y <= last; y++ {
		row := s.Rows[y]
		if y == first {
			row = strings.TrimPrefix(row, lead)
		}
		box.WriteString(row)
	}
	shown := squeeze(box.String())
	if strings.Contains(shown, "[Pastedtext#") || strings.Contains(shown, "[PastedContent") {
		return true, ""
	}
	if want := squeeze(text); want != "" && strings.Contains(shown, want) {
		return true, ""
	}
	return false, "the pasted text does not show in the input box"
}

// squeeze drops all white space: the box wraps and indents the text.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

var (
	// A highlighted numbered option: a highlight glyph, then "1." or "1)".
	highlighted = regexp.MustCompile(`^\s*[❯›>▸▶→●◉]\s*\d{1,2}[.)]\s+\S`)
	// Any numbered option.
	numbered = regexp.MustCompile(`^\s*(?:[❯›>▸▶→●◉]\s*)?\d{1,2}[.)]\s+\S`)
	// Footers and questions of selection dialogs and confirmations.
	footer = regexp.MustCompile(`(?i)\b(?:press\s+)?(?:enter|return)\s+(?:to\s+)?(?:confirm|continue|select|submit|approve|accept|proceed)\b` +
		`|\besc(?:ape)?\s+(?:to\s+)?(?:cancel|back|go\s+back|exit|decline|reject)\b` +
		`|[(\[]\s*y(?:es)?\s*/\s*n(?:o)?\s*[)\]]` +
		`|\bdo you want to (?:proceed|continue|allow|run|make|create|trust)\b` +
		`|\bwould you like to (?:run|proceed|continue|allow|make|apply)\b` +
		`|\b(?:yes|no),? i (?:trust|accept)\b` +
		`|\btrust this folder\b`)
)

// dialogMarker returns the first row from from on that marks a dialog, or "".
func dialogMarker(rows []string, from int) string {
	for y := from; y < len(rows); y++ {
		row := rows[y]
		if footer.MatchString(row) {
			return quoteRow(row)
		}
		if highlighted.MatchString(row) {
			// Another numbered option close by makes it a list to choose from.
			for z := max(y-6, 0); z < min(y+7, len(rows)); z++ {
				if z != y && numbered.MatchString(rows[z]) {
					return quoteRow(row)
				}
			}
		}
	}
	return ""
}

// isRule reports a horizontal rule across (most of) the screen.
func isRule(row string) bool {
	t := strings.TrimSpace(row)
	return utf8.RuneCountInString(t) >= 20 && strings.Trim(t, "─━") == ""
}

// claudeInputBox finds Claude Code's input box: a row that starts with "❯"
// right under a rule, continued by indented rows down to the next rule,
// with the cursor inside. It returns the box's first and last text rows.
func claudeInputBox(s Screen) (first, last int, ok bool) {
	for y := 1; y < len(s.Rows); y++ {
		if !strings.HasPrefix(s.Rows[y], "❯") || !isRule(s.Rows[y-1]) {
			continue
		}
		z := y + 1
		for z < len(s.Rows) && !isRule(s.Rows[z]) {
			if !strings.HasPrefix(s.Rows[z], "  ") && s.Rows[z] != "" {
				break
			}
			z++
		}
		if z < len(s.Rows) && isRule(s.Rows[z]) && s.CursorY >= y && s.CursorY < z {
			return y, z - 1, true
		}
	}
	return 0, 0, false
}

// codexComposer finds Codex's composer: a row that starts with "›" (not a
// numbered option), continued by indented rows, with the visible cursor on
// it or its continuation rows.
func codexComposer(s Screen) (first, last int, ok bool) {
	if !s.CursorVisible {
		return 0, 0, false
	}
	for y := len(s.Rows) - 1; y >= 0; y-- {
		row := s.Rows[y]
		if !strings.HasPrefix(row, "›") || numbered.MatchString(row) {
			continue
		}
		z := y
		for z+1 < len(s.Rows) && strings.HasPrefix(s.Rows[z+1], "  ") && z+1 <= s.CursorY {
			z++
		}
		if s.CursorY >= y && s.CursorY <= z {
			return y, z, true
		}
		return 0, 0, false // the last "›" row is the composer; the cursor is elsewhere
	}
	return 0, 0, false
}

// quoteRow shows a row in a reason: trimmed and cut to 60 characters.
func quoteRow(row string) string {
	row = strings.TrimSpace(row)
	if r := []rune(row); len(r) > 60 {
		row = string(r[:60]) + "…"
	}
	return `"` + row + `"`
}
