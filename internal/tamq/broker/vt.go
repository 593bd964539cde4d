package broker

import (
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi/parser"
)

// vt drives the DEC ANSI state machine of charmbracelet/x/ansi (its parser
// package: the maintained transition table) and reports only what the
// observer needs: printed runes, control characters, CSI and ESC sequences,
// and bytes that are not valid UTF-8. The full ansi package is not used
// here: the observer runs on every byte the agent prints and needs none of
// its cell model (the screen model in model.go has that).
type vt struct {
	print   func(r rune)
	execute func(b byte)
	csi     func(prefix, final byte, params []int)
	esc     func(inter, final byte)
	// broken is told of bytes that are not valid UTF-8 (each is shown as
	// U+FFFD, as terminals do).
	broken func()

	state  parser.State
	rune   []byte
	prefix byte
	inter  byte
	params []int
	cur    int
}

func (v *vt) advance(b byte) {
	if v.state == parser.Utf8State {
		if b >= 0x80 && b <= 0xBF {
			v.rune = append(v.rune, b)
			if utf8.FullRune(v.rune) {
				r, size := utf8.DecodeRune(v.rune)
				if r == utf8.RuneError && size <= 1 {
					// Overlong forms and surrogates decode to nothing valid.
					v.broken()
				}
				v.print(r)
				v.state = parser.GroundState
			}
			return
		}
		v.broken() // a sequence cut short; b starts something new
		v.print(utf8.RuneError)
		v.state = parser.GroundState
	}
	if v.state == parser.GroundState && b >= 0x80 && (b < 0xC2 || b > 0xF4) {
		// Not the start of a UTF-8 sequence: a broken one (the parser would
		// take 0x80–0x9F for C1 controls, which a UTF-8 terminal does not).
		v.broken()
		v.print(utf8.RuneError)
		return
	}
	next, action := parser.Table.Transition(v.state, b)
	switch action {
	case parser.PrintAction:
		v.print(rune(b))
	case parser.ExecuteAction:
		v.execute(b)
	case parser.ClearAction:
		v.prefix, v.inter, v.params, v.cur = 0, 0, v.params[:0], 0
	case parser.PrefixAction:
		v.prefix = b
	case parser.CollectAction:
		if next == parser.Utf8State {
			v.rune = append(v.rune[:0], b)
		} else {
			v.inter = b
		}
	case parser.ParamAction:
		if b == ';' || b == ':' {
			v.params = append(v.params, v.cur)
			v.cur = 0
		} else if v.cur < 1<<20 {
			v.cur = v.cur*10 + int(b-'0')
		}
	case parser.DispatchAction:
		switch v.state {
		case parser.CsiEntryState, parser.CsiParamState, parser.CsiIntermediateState:
			v.csi(v.prefix, b, append(v.params, v.cur))
		case parser.EscapeState, parser.EscapeIntermediateState:
			v.esc(v.inter, b)
		}
	}
	v.state = next
}
