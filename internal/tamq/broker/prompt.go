package broker

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/tmux-amq/tamq/internal/tamq/program"
)

// The programs the detector knows by their screens. Any other program is
// judged by the generic rule alone.
const (
	AgentClaude = program.Claude
	AgentCodex  = program.Codex
	AgentGemini = program.Gemini
)

// AgentOf names the agent whose screen rules apply to a window's command,
// from its words: the first that is a known agent's program (claude, codex,
// or an npm shim such as node_modules/.bin/codex), else "". The names are
// internal/tamq/program's.
func AgentOf(argv []string) string {
	for _, arg := range argv {
		if a := program.CommandAgent(arg); hasRules(a) {
			return a
		}
	}
	return ""
}

// hasRules says tamq knows agent's screens: Claude Code, Codex and Gemini
// CLI.
func hasRules(agent string) bool {
	return agent == AgentClaude || agent == AgentCodex || agent == AgentGemini
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
//   - a frame caught midway (synchronized output) is a dialog;
//   - dialog markers: a highlighted numbered option beside another
//     ("❯ 1. Yes", "› 1. Trust", "> 1. Sign in"), footers such as "Enter to
//     confirm", "Esc to cancel", "Press enter to continue", yes/no
//     questions; only where the input is asked for (promptFrom): what a
//     program printed before its prompt, and the transcript above Claude
//     Code's input box, is history, not a question open now;
//   - a title saying "Action Required" (Codex, Gemini CLI while an approval
//     is open) is only a hint, never a dialog by itself: any program in
//     the terminal can set the title (one printf), and a title believed
//     alone would hold the window's deliveries and keep its lease renewed
//     while the agent idles. For a program without rules of its own it
//     widens where markers count (dialogTitled); Claude Code's and Codex's
//     dialogs show on their screens (no input box, a hidden cursor);
//   - Claude Code: its input box (a row "❯" and a no-break space, under a
//     full-width rule, closed by another; or, scrolled, indented rows under
//     a rule saying "↑ N more") with the cursor inside; busy while its
//     footer says "esc to interrupt" or its spinner shows above the box
//     ("✻ Actioning…"); empty when the cursor sits at column 2 of the
//     box's first row;
//   - Codex: a visible cursor (its dialogs hide it), a title set (none
//     until start-up is done), the cursor row inside the composer ("› "
//     and its indented or empty rows); busy with a spinner title, "esc to
//     interrupt", queued input or "tab to queue message"; empty with the
//     cursor at column 2 of the composer's first row;
//   - for either, a picture that missed output is unknown;
//   - any other program (a shell, a REPL) with none of the markers is at
//     its prompt, as before the detector existed.
func Classify(s Screen) (state, reason string) {
	switch {
	case strings.HasPrefix(s.Status, "blocked"):
		return StateDialog, "the agent reports it is blocked (" + s.Status + ")"
	case s.Status == "working":
		return StateBusy, "the agent reports it is working"
	case s.Drawing:
		return StateDialog, "the agent is midway through drawing its screen"
	case s.Stale && s.Agent != "":
		return StateDialog, "the screen model missed some of the agent's output"
	}
	if marker := dialogMarker(s, promptFrom(s)); marker != "" {
		return StateDialog, "a dialog shows: " + marker
	}
	if marker := dialogTitled(s); marker != "" {
		return StateDialog, "a dialog shows: " + marker + ", and the terminal title says " + quoteRow(s.Title)
	}
	switch s.Agent {
	case AgentClaude:
		return classifyClaude(s)
	case AgentCodex:
		return classifyCodex(s)
	case AgentGemini:
		return classifyGemini(s)
	}
	return StatePrompt, ""
}

// classifyGemini reads Gemini CLI's screen. Its dialogs (the first start's
// "Do you trust the files in this folder?" and sign-in menu, a permission
// box "Allow execution of [Shell]?") replace its composer, so a screen
// without the composer is a dialog, whatever the title says (it says
// "◇  Ready" over the trust box); it hides the terminal's cursor and draws
// its own, leaving the terminal's at its end of the text.
func classifyGemini(s Screen) (string, string) {
	box, ok := geminiComposer(s)
	if !ok {
		reason := "Gemini CLI's input box is not on screen"
		for _, row := range s.Rows {
			if m := dialogPatterns().geminiDialog.FindString(row); m != "" {
				return StateDialog, reason + " (" + quoteRow(m) + ")"
			}
		}
		return StateDialog, reason
	}
	// It draws its composer before it turns bracketed paste on (once its
	// terminal queries are answered, which took seconds under load): a
	// paste before that comes in as typed keys, unmarked, each newline a
	// line of the box and never the placeholder.
	if s.NoBracketedPaste {
		return StateStarting, "Gemini CLI has not finished starting (bracketed paste is not on yet)"
	}
	// Its spinner and "esc to cancel" stand just above the composer's rule
	// while a turn runs (a command too); the title says "✦  Working…".
	for y := max(box.rule-geminiSpinnerRows, 0); y < box.rule; y++ {
		row := strings.TrimSpace(s.Rows[y])
		if r, _ := utf8.DecodeRuneInString(row); r >= 0x2800 && r <= 0x28ff || strings.Contains(row, "esc to cancel") {
			return StateBusy, "Gemini CLI is busy (" + quoteRow(row) + ")"
		}
	}
	if strings.Contains(s.Title, "Working…") {
		return StateBusy, "Gemini CLI is busy (its title says " + quoteRow(s.Title) + ")"
	}
	if box.bottom != box.top || !dialogPatterns().geminiEmpty.MatchString(s.Rows[box.top]) ||
		s.CursorX != geminiTextCol || s.CursorY != box.top {
		return StatePromptText, "Gemini CLI's input box holds text"
	}
	return StatePrompt, ""
}

// geminiSpinnerRows is how far above its composer's rule Gemini CLI draws
// its spinner.
const geminiSpinnerRows = 3

// geminiTextCol is the column where the text of Gemini CLI's composer
// starts (" > ").
const geminiTextCol = 3

// geminiRuleRows is how far above its composer Gemini CLI's rule may
// stand: a mode line and an empty row may come between.
const geminiRuleRows = 3

// geminiBox is where Gemini CLI's composer stands.
type geminiBox struct {
	rule   int // the full-width rule above it
	top    int // its first row: " > " and the text
	bottom int // its last row of text
}

// geminiComposer finds Gemini CLI's composer with the cursor in it: a row
// starting " > " (or " ! " in shell mode) under a full-width rule (a mode
// line such as "Shift+Tab to accept edits" and an empty row may stand
// between), and the
// rows under it indented by three spaces (or empty: an empty line of the
// text), down to its footer.
func geminiComposer(s Screen) (geminiBox, bool) {
	width := s.width()
	for y := len(s.Rows) - 1; y >= 1; y-- {
		if !strings.HasPrefix(s.Rows[y], " > ") && s.Rows[y] != " >" && !strings.HasPrefix(s.Rows[y], " ! ") {
			continue
		}
		rule := -1
		for z := y - 1; z >= max(y-geminiRuleRows, 0); z-- {
			if isRule(s.Rows[z], width) {
				rule = z
				break
			}
		}
		if rule < 0 {
			continue // a past prompt in the transcript
		}
		box := geminiBox{rule: rule, top: y, bottom: y}
		for z := y + 1; z < len(s.Rows) && (s.Rows[z] == "" || strings.HasPrefix(s.Rows[z], "   ")); z++ {
			if s.Rows[z] != "" {
				box.bottom = z
			}
		}
		return box, s.CursorY >= box.top && s.CursorY <= box.bottom
	}
	return geminiBox{}, false
}

func classifyClaude(s Screen) (string, string) {
	box, ok := claudeInputBox(s)
	if !ok {
		return StateDialog, "Claude Code's input box is not on screen"
	}
	for _, row := range s.Rows[box.bottom+1:] {
		if strings.Contains(row, "esc to interrupt") {
			return StateBusy, "Claude Code is busy (esc to interrupt)"
		}
	}
	// With text in the box its footer no longer says "esc to interrupt";
	// the spinner above the box still shows.
	for y := max(box.rule-claudeSpinnerRows, 0); y < box.rule; y++ {
		if dialogPatterns().spinner.MatchString(s.Rows[y]) {
			return StateBusy, "Claude Code is busy (" + quoteRow(s.Rows[y]) + ")"
		}
	}
	if box.above || s.CursorX != 2 || s.CursorY != box.top {
		return StatePromptText, "Claude Code's input box holds text"
	}
	return StatePrompt, ""
}

// claudeSpinnerRows is how far above its input box Claude Code draws its
// spinner (a line of effort or a hint may stand between).
const claudeSpinnerRows = 4

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
		if strings.Contains(row, "esc to interrupt") || strings.Contains(row, "Queued follow-up inputs") || strings.Contains(row, "tab to queue message") {
			return StateBusy, "Codex is busy (" + quoteRow(row) + ")"
		}
	}
	if s.CursorX != 2 || s.CursorY != top {
		return StatePromptText, "Codex's composer holds text"
	}
	return StatePrompt, ""
}

// InputShows says whether text, just pasted, is what the agent's input box
// holds, with the cursor at its end, so that the Enter submits exactly it;
// for programs without a box tamq can read (shells, REPLs) it holds.
//
// The box must hold the text and nothing else, as the agent shows it:
//
//   - Claude Code collapses a paste of over 800 characters (UTF-16 units),
//     or of more lines than fit (over min(rows-10, 2) newlines: four lines
//     or more, fewer under 13 rows), into "[Pasted text #K]" or "[Pasted
//     text #K +M lines]", where K counts its pastes and M is the text's
//     newlines;
//   - Codex collapses one of over 1,000 characters into "[Pasted Content N
//     chars]", N the text's characters (Unicode code points);
//   - Gemini CLI collapses one of over 5 lines into "[Pasted Text: N
//     lines]" (N the text's lines), else one of over 500 characters into
//     "[Pasted Text: N chars]" (UTF-16 units), with " #K" added when the
//     box holds another of the same name;
//   - anything shorter shows as typed, wrapped at the box's width (at word
//     ends, or inside a word too long for a row) and indented: compared
//     without white space. A box taller than the agent allows scrolls to
//     its end (Claude Code's top rule says "↑ N more", Codex marks its
//     first row "↑"): then what shows must be the text's end.
//
// A placeholder counts only in the box, never in the transcript above it;
// a draft beside the paste, a placeholder of another size or line count,
// text after the cursor, an empty box, a dialog or a busy agent do not
// show the paste.
func InputShows(s Screen, text string) (bool, string) {
	if !hasRules(s.Agent) {
		return true, ""
	}
	state, reason := Classify(s)
	if state != StatePromptText {
		if state == StatePrompt {
			return false, "the input box is still empty after the paste"
		}
		return false, "after the paste: " + reason
	}
	box, ok := inputText(s)
	switch {
	case !ok:
		return false, "the cursor is not in the input box"
	case box.after:
		return false, "the input box holds text after the cursor"
	}
	shown := strings.TrimSpace(strings.Join(box.rows, "\n"))
	if ok, placeholder, why := pastedPlaceholder(s.Agent, shown, text); placeholder {
		return ok, why
	}
	got, want := squeeze(shown), squeeze(text)
	switch {
	case got == want:
		return true, ""
	case box.above && got != "" && strings.HasSuffix(want, got):
		return true, ""
	case strings.HasSuffix(got, want):
		return false, "the input box holds other text before the paste"
	}
	return false, "the pasted text does not show in the input box"
}

// pastedPlaceholder reads the box as the agent's placeholder for a long
// paste: placeholder says it is one, ok that it stands for text.
func pastedPlaceholder(agent, shown, text string) (ok, placeholder bool, why string) {
	p := dialogPatterns()
	switch agent {
	case AgentClaude:
		m := p.claudePaste.FindStringSubmatch(shown)
		if m == nil {
			return false, false, ""
		}
		lines := strings.Count(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
		if m[1] == "" && lines == 0 || m[1] == strconv.Itoa(lines) {
			return true, true, ""
		}
		return false, true, fmt.Sprintf("the input box shows a paste of other lines (%s), not of %d newlines", quoteRow(shown), lines)
	case AgentCodex:
		m := p.codexPaste.FindStringSubmatch(shown)
		if m == nil {
			return false, false, ""
		}
		n := utf8.RuneCountInString(text)
		if m[1] == strconv.Itoa(n) {
			return true, true, ""
		}
		return false, true, fmt.Sprintf("the input box shows a paste of another size (%s), not of %d characters", quoteRow(shown), n)
	case AgentGemini:
		m := p.geminiPaste.FindStringSubmatch(shown)
		if m == nil {
			return false, false, ""
		}
		text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
		lines := strings.Count(text, "\n") + 1
		want := fmt.Sprintf("%d lines", lines)
		if lines <= geminiPasteLines {
			want = fmt.Sprintf("%d chars", len(utf16.Encode([]rune(text))))
		}
		if m[1] == want {
			return true, true, ""
		}
		return false, true, fmt.Sprintf("the input box shows a paste of another size (%s), not of %s", quoteRow(shown), want)
	}
	return false, false, ""
}

// geminiPasteLines is the most lines Gemini CLI shows a paste as typed.
const geminiPasteLines = 5

// boxText is what an agent's input box shows, without its marks: its rows
// from the first shown down to the cursor's.
type boxText struct {
	rows []string
	// above: the box scrolled, rows before the first are hidden.
	above bool
	// after: text follows the cursor's row (or rows are hidden below).
	after bool
}

// inputText reads the input box the cursor is in.
func inputText(s Screen) (boxText, bool) {
	var b boxText
	y := s.CursorY
	if y < 0 || y >= len(s.Rows) {
		return b, false
	}
	switch s.Agent {
	case AgentClaude:
		box, ok := claudeInputBox(s)
		if !ok {
			return b, false
		}
		b.above, b.after = box.above, box.below
		for z := box.top; z <= y; z++ {
			b.rows = append(b.rows, strings.TrimPrefix(strings.TrimPrefix(s.Rows[z], "❯\u00a0"), "  "))
		}
		for z := y + 1; z < box.bottom; z++ {
			b.after = b.after || strings.TrimSpace(s.Rows[z]) != ""
		}
	case AgentCodex:
		top, ok := codexComposer(s)
		if !ok {
			return b, false
		}
		for z := top; z <= y; z++ {
			row := s.Rows[z]
			if z == top {
				row, b.above = cutScrollMark(row, s.width())
				// The mark may follow an empty line of the text.
				row = strings.TrimPrefix(strings.TrimPrefix(row, "›"), " ")
			}
			b.rows = append(b.rows, strings.TrimPrefix(row, "  "))
		}
		// The composer ends at an empty row (the footer follows it).
		for z := y + 1; z < len(s.Rows) && strings.TrimSpace(s.Rows[z]) != ""; z++ {
			b.after = true
		}
	case AgentGemini:
		box, ok := geminiComposer(s)
		if !ok {
			return b, false
		}
		for z := box.top; z <= y; z++ {
			row := s.Rows[z]
			if z == box.top {
				row = strings.TrimPrefix(strings.TrimPrefix(row, " >"), " ")
			}
			b.rows = append(b.rows, strings.TrimPrefix(row, "   "))
		}
		b.after = y < box.bottom
	default:
		return b, false
	}
	return b, true
}

// cutScrollMark cuts Codex's scroll mark off the first row of its
// composer: an "↑" in the screen's last column says rows are hidden above.
func cutScrollMark(row string, width int) (string, bool) {
	if rest, ok := strings.CutSuffix(row, "↑"); ok && ansi.StringWidth(row) == width {
		return strings.TrimRight(rest, " "), true
	}
	return row, false
}

// squeeze drops all white space: the box wraps and indents the text.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// dialogPatterns are compiled on first use: every tamq command links this
// package, and only the broker needs them.
var dialogPatterns = sync.OnceValue(func() (p struct {
	highlighted, numbered, footer, spinner, claudePaste, codexPaste, more *regexp.Regexp
	geminiPaste, geminiEmpty, geminiDialog                                *regexp.Regexp
}) {
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
	// Claude Code's spinner while it works: a star, then a verb and an
	// ellipsis ("✻ Actioning…"), or its retries; a finished turn's line
	// ("✻ Crunched for 2s") has neither.
	p.spinner = regexp.MustCompile(`^[·✢✳✶✻✽*] (?:\S+…|.*\bretrying in\b|.*\besc to interrupt\b)`)
	// The agents' placeholders for a long paste, as the whole box.
	p.claudePaste = regexp.MustCompile(`^\[Pasted text #\d+(?: \+(\d+) lines)?\]$`)
	p.codexPaste = regexp.MustCompile(`^\[Pasted Content (\d+) chars\]$`)
	p.geminiPaste = regexp.MustCompile(`^\[Pasted Text: (\d+ (?:lines|chars))(?: #\d+)?\]$`)
	// Gemini CLI's empty composer shows its placeholder after the marker.
	p.geminiEmpty = regexp.MustCompile(`^ >   Type your message`)
	// What Gemini CLI's dialogs ask, to name one in a reason.
	p.geminiDialog = regexp.MustCompile(`Allow execution of \[[^\]]*\]\?|Allow execution of .*\?|Do you trust the files in this folder\?|How would you like to authenticate[^?]*\?|Apply this change\?|Allow execution of MCP tool`)
	// What Claude Code's rule says of a box that scrolled.
	p.more = regexp.MustCompile(`^ ([↑↓]) \d+ more $`)
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
//
// The agent's input box itself, with the cursor in it, holds what was
// typed or pasted, not a question (inputRows): dialogMarker skips it.
func promptFrom(s Screen) int {
	switch s.Agent {
	case AgentClaude:
		if box, ok := claudeInputBox(s); ok {
			return box.rule
		}
		return 0
	case AgentCodex:
		return 0
	case AgentGemini:
		if box, ok := geminiComposer(s); ok {
			return box.rule
		}
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

// inputRows are the rows of the agent's input box the cursor is in, where
// text typed or pasted shows: first > last when there is none.
func inputRows(s Screen) (first, last int) {
	switch s.Agent {
	case AgentClaude:
		if box, ok := claudeInputBox(s); ok {
			return box.top, box.bottom - 1
		}
	case AgentCodex:
		if top, ok := codexComposer(s); ok && s.CursorVisible {
			return top, s.CursorY
		}
	case AgentGemini:
		if box, ok := geminiComposer(s); ok {
			return box.top, box.bottom
		}
	}
	return 0, -1
}

// dialogMarker returns the first row from from on, outside the input box,
// that marks a dialog, or "".
func dialogMarker(s Screen, from int) string {
	p := dialogPatterns()
	rows := s.Rows
	first, last := inputRows(s)
	input := func(y int) bool { return y >= first && y <= last }
	for y := from; y < len(rows); y++ {
		row := rows[y]
		if input(y) {
			continue
		}
		if p.footer.MatchString(row) {
			return quoteRow(row)
		}
		if p.highlighted.MatchString(row) {
			// Another numbered option close by makes it a list to choose from.
			for z := max(y-6, 0); z < min(y+7, len(rows)); z++ {
				if z != y && !input(z) && p.numbered.MatchString(rows[z]) {
					return quoteRow(row)
				}
			}
		}
	}
	return ""
}

// dialogTitled returns the row that marks a dialog on a screen whose title
// says one is open ("Action Required"), or "". The title is a hint, not a
// witness: it lets markers count anywhere on the screen, and inside a box
// ("│ ● 1. Allow once │": a TUI's dialog drawn in a frame), where an
// untitled screen's do not; a screen without any (an idle prompt) is no
// dialog whatever the title says. Only for programs without rules of their
// own: Claude Code's and Codex's screens show their dialogs plainly.
func dialogTitled(s Screen) string {
	if s.Agent != "" || !strings.Contains(strings.ToLower(s.Title), "action required") {
		return ""
	}
	unboxed := s
	unboxed.Rows = make([]string, len(s.Rows))
	for y, row := range s.Rows {
		unboxed.Rows[y] = strings.TrimRight(strings.TrimLeft(row, boxSides), boxSides)
	}
	return dialogMarker(unboxed, 0)
}

// boxSides are what a frame drawn round a dialog puts at its rows' ends,
// and the space beside.
const boxSides = "│┃║| \u00a0"

// isRule reports a horizontal rule across the screen's width.
func isRule(row string, width int) bool {
	ok, more := boxRule(row, width)
	return ok && more == ""
}

// boxRule reports a horizontal rule across the screen's width, as Claude
// Code draws its input box's; more is "↑" or "↓" when the rule says rows
// of the box are hidden beyond it ("─── ↑ 4 more ───").
func boxRule(row string, width int) (ok bool, more string) {
	if utf8.RuneCountInString(row) < max(width-1, 20) {
		return false, ""
	}
	mid := strings.Trim(row, "─")
	if mid == "" {
		return true, ""
	}
	if !strings.HasPrefix(row, "─") || !strings.HasSuffix(row, "─") {
		return false, ""
	}
	if m := dialogPatterns().more.FindStringSubmatch(mid); m != nil {
		return true, m[1]
	}
	return false, ""
}

// claudeBox is where Claude Code's input box stands.
type claudeBox struct {
	rule   int // the top rule's row
	top    int // the first row of text shown
	bottom int // the closing rule's row
	// above, below: the box holds more rows than it shows, hidden above
	// its first row or below its last (its rules say "↑ N more").
	above, below bool
}

// claudeInputBox finds Claude Code's input box, with the cursor inside: a
// row that starts with "❯" and a no-break space (past prompts in the
// transcript have a plain space) right under a full-width rule, down to the
// next such rule. A box taller than Claude Code lets it grow scrolls: its
// top rule then says "↑ N more" and its first row shown is one of its
// text's, indented by two spaces.
func claudeInputBox(s Screen) (claudeBox, bool) {
	width := s.width()
	for y := len(s.Rows) - 1; y >= 1; y-- {
		rule, more := boxRule(s.Rows[y-1], width)
		switch {
		case !rule:
			continue
		case more == "" && strings.HasPrefix(s.Rows[y], "❯\u00a0"):
		case more == "↑" && strings.HasPrefix(s.Rows[y], "  "):
		default:
			continue
		}
		for z := y + 1; z < len(s.Rows); z++ {
			if ok, below := boxRule(s.Rows[z], width); ok && below != "↑" {
				box := claudeBox{rule: y - 1, top: y, bottom: z, above: more == "↑", below: below == "↓"}
				return box, s.CursorY >= y && s.CursorY < z
			}
		}
		return claudeBox{}, false
	}
	return claudeBox{}, false
}

// codexComposer finds Codex's composer around the cursor: walking up from
// the cursor's row over rows indented by two spaces, and empty ones (a
// pasted text's empty lines), a row that starts with "› ". It returns that
// row.
func codexComposer(s Screen) (top int, ok bool) {
	for y := min(s.CursorY, len(s.Rows)-1); y >= 0; y-- {
		row := s.Rows[y]
		if strings.HasPrefix(row, "› ") {
			return y, true
		}
		if row != "" && !strings.HasPrefix(row, "  ") {
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
