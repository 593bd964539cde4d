package broker

import (
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Issue 11, item 2: the broker's last line of defence. A delivery that could
// end the bracketed paste or press a key is refused before the gate looks at
// the agent or writes a byte (this gate has no relay: any write would crash).
func TestGateRefusesWhatCouldAct(t *testing.T) {
	g := &Gate{}
	for _, text := range []string{"x\x1b[201~echo pwned\r", "a\rb", "\x1b]52;c;aGk=\a", "\u009b", "\u202e"} {
		out := g.Deliver(Delivery{Text: text})
		if !errs.Is(out.Err, errs.BodyInvalid) || out.Written || out.MaybeWritten {
			t.Errorf("Deliver(%q) = %+v", text, out)
		}
	}
}
