package broker

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// The screens below are drawn as Claude Code 2.1.328 and Codex 0.169.0 draw
// a paste (testdata/screens holds the real ones): claudePasted and
// codexPasted follow their rules for collapsing a paste into a placeholder,
// their wrapping and their scrolling.

// wrapRows breaks text into rows of at most width columns, as the agents
// do: at spaces, inside a word too long for a row; each line of the text
// starts a row.
func wrapRows(text string, width int) []string {
	var rows []string
	for _, line := range strings.Split(text, "\n") {
		row, w := "", 0
		for _, word := range strings.Split(line, " ") {
			ww := ansi.StringWidth(word)
			switch {
			case row == "":
			case w+1+ww <= width:
				row, w = row+" ", w+1
			default:
				rows, row, w = append(rows, row), "", 0
			}
			for w+ww > width {
				// Too long for a row: as much as fits, the rest on the next.
				cut, cw := 0, 0
				for i, r := range word {
					rw := ansi.StringWidth(string(r))
					if w+cw+rw > width {
						break
					}
					cut, cw = i+utf8.RuneLen(r), cw+rw
				}
				rows, row, w = append(rows, row+word[:cut]), "", 0
				word, ww = word[cut:], ww-cw
			}
			row, w = row+word, w+ww
		}
		rows = append(rows, row)
	}
	return rows
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, max(n, 0))
	for i := range out {
		out[i] = s
	}
	return out
}

// drawn says what else an agent's screen shows with the paste.
type drawn struct {
	draft string // typed before the paste
	busy  bool   // the agent works
}

// claudePasted draws Claude Code's screen after text was pasted into its
// input box: collapsed over 800 UTF-16 units or over min(height-10, 2)
// newlines, else wrapped, at most maxRows rows shown.
func claudePasted(text string, o drawn, width, height int) Screen {
	draft := o.draft
	newlines := strings.Count(text, "\n")
	shown := draft + text
	if len(utf16.Encode([]rune(text))) > 800 || newlines > max(0, min(height-10, 2)) {
		placeholder := fmt.Sprintf("[Pasted text #3 +%d lines]", newlines)
		if newlines == 0 {
			placeholder = "[Pasted text #3]"
		}
		shown = draft + placeholder
	}
	rows := wrapRows(shown, width-2)
	rule := strings.Repeat("─", width)
	top := rule
	if maxRows := max(height-17, 3); len(rows) > maxRows {
		more := fmt.Sprintf("─── ↑ %d more ", len(rows)-maxRows)
		top = more + strings.Repeat("─", width-utf8.RuneCountInString(more))
		rows = rows[len(rows)-maxRows:]
		for i := range rows {
			rows[i] = "  " + rows[i]
		}
	} else {
		for i := range rows {
			rows[i] = [2]string{"  ", "❯\u00a0"}[min(1, max(0, 1-i))] + rows[i]
		}
	}
	last := "● earlier output"
	if o.busy {
		last = "✻ Actioning…"
	}
	all := append(append(append(slicesRepeat("", height-len(rows)-5), last, "", top), rows...), rule, "  ⏸ manual mode on")
	y := len(all) - 3
	return Screen{Agent: AgentClaude, Rows: all, Cols: width, CursorY: y, CursorX: ansi.StringWidth(all[y]), Title: "✳ Claude Code"}
}

// codexPasted draws Codex's screen after text was pasted into its
// composer: collapsed over 1,000 characters, else wrapped, at most maxRows
// rows shown (the first then ends with "↑").
func codexPasted(text string, o drawn, width, height int) Screen {
	draft := o.draft
	shown := draft + text
	if n := utf8.RuneCountInString(text); n > 1000 {
		shown = draft + fmt.Sprintf("[Pasted Content %d chars]", n)
	}
	rows := wrapRows(shown, width-3)
	scrolled := false
	if maxRows := height - 10; len(rows) > maxRows {
		rows, scrolled = rows[len(rows)-maxRows:], true
	}
	for i := range rows {
		rows[i] = [2]string{"  ", "› "}[min(1, max(0, 1-i))] + rows[i]
	}
	if scrolled {
		rows[0] += strings.Repeat(" ", width-1-ansi.StringWidth(rows[0])) + "↑"
	}
	rows = append(rows, "", "  GPT-6.1-Sol default · /home/user/repo")
	all := append(append(slicesRepeat("", height-len(rows)-3), ">_ OpenAI Codex (v0.169.0)", "", "› an earlier prompt"), rows...)
	// Trailing white space is trimmed, as the model's rows are.
	for i := range all {
		all[i] = strings.TrimRight(all[i], " ")
	}
	y := len(all) - 3
	s := Screen{Agent: AgentCodex, Rows: all, Cols: width, CursorY: y, CursorX: ansi.StringWidth(all[y]), CursorVisible: true, Title: "repo", Status: "idle"}
	if o.busy {
		s.Status = "working"
	}
	return s
}

// Every paste of 1 byte to 8 KiB, of one line or many, at every width from
// 80 to 250 columns and heights 24 and 50, drawn as each agent draws it,
// shows; the same screen does not show another text, nor the paste after
// a draft, nor while the agent works.
func TestInputShowsDrawn(t *testing.T) {
	t.Parallel()
	var specs []pasteSpec
	for i, n := range []int{1, 17, 26, 100, 500, 799, 800, 801, 999, 1000, 1001, 1300, 4096, 8192} {
		prefix := [2]string{prefixEngine, prefixOperator}[i%2]
		specs = append(specs, pasteSpec{Prefix: prefix, Chars: n}, pasteSpec{Prefix: prefix, Chars: n, Line: 72, Para: 3},
			pasteSpec{Prefix: prefix, Chars: n, Line: 300}, pasteSpec{Prefix: prefix, Chars: n, Line: 20})
	}
	texts := make([]string, len(specs))
	for i, spec := range specs {
		texts[i] = spec.text()
	}
	draw := map[string]func(text string, o drawn, width, height int) Screen{AgentClaude: claudePasted, AgentCodex: codexPasted}
	checked := 0
	for width := 80; width <= 250; width++ {
		for _, height := range []int{24, 50} {
			for agent, pasted := range draw {
				// Every width, a few texts each; every text, at some widths.
				for i, text := range texts {
					if (i+width)%31 != 0 && width != 80 && width != 250 {
						continue
					}
					checked++
					name := fmt.Sprintf("%s %dx%d %+v", agent, width, height, specs[i])
					s := pasted(text, drawn{}, width, height)
					if ok, why := InputShows(s, text); !ok {
						t.Errorf("%s: InputShows = false (%s)\n%s", name, why, strings.Join(s.Rows, "\n"))
						continue
					}
					if ok, _ := InputShows(s, text+"\nx"); ok {
						t.Errorf("%s: shows a text one line longer", name)
					}
					// A draft in view (a long text scrolls it away).
					if s := pasted(text, drawn{draft: "my own draft "}, width, height); utf8.RuneCountInString(text) < 200 {
						if ok, _ := InputShows(s, text); ok {
							t.Errorf("%s: shows after a draft\n%s", name, strings.Join(s.Rows, "\n"))
						}
					}
					if s := pasted(text, drawn{busy: true}, width, height); s.Rows != nil {
						if ok, _ := InputShows(s, text); ok {
							t.Errorf("%s: shows while the agent works\n%s", name, strings.Join(s.Rows, "\n"))
						}
					}
				}
			}
		}
	}
	if checked < 1200 {
		t.Errorf("only %d screens checked", checked)
	}
}
