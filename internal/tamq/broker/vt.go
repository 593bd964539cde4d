package broker

import (
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi/parser"
)

// vt drives the DEC ANSI state machine of charmbracelet/x/ansi (its parser
// package: the maintained transition table) and reports only what the
// observer needs: printed runes, control characters and CSI sequences.
// The full ansi package is not used because its dependencies build large
// tables at program start, which every tamq command would pay for.
type vt struct {
	print   func(r rune)
	execute func(b byte)
	csi     func(prefix, final byte, params []int)

	state  parser.State
	rune   []byte
	prefix byte
	params []int
	cur    int
}

func (v *vt) advance(b byte) {
	if v.state == parser.Utf8State {
		if b >= 0x80 && b <= 0xBF {
			v.rune = append(v.rune, b)
			if utf8.FullRune(v.rune) {
				r, _ := utf8.DecodeRune(v.rune)
				v.print(r)
				v.state = parser.GroundState
			}
			return
		}
		v.print(utf8.RuneError) // a broken sequence; b starts something new
		v.state = parser.GroundState
	}
	next, action := parser.Table.Transition(v.state, b)
	switch action {
	case parser.PrintAction:
		v.print(rune(b))
	case parser.ExecuteAction:
		v.execute(b)
	case parser.ClearAction:
		v.prefix, v.params, v.cur = 0, v.params[:0], 0
	case parser.PrefixAction:
		v.prefix = b
	case parser.CollectAction:
		if next == parser.Utf8State {
			v.rune = append(v.rune[:0], b)
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
		}
	}
	v.state = next
}
