package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Issue 11, item 2: the broker's last line of defence. A delivery that could
// end the bracketed paste or press a key is refused before the gate looks at
// the agent or writes a byte (this gate has no relay: any write would crash).
func TestGateRefusesWhatCouldAct(t *testing.T) {
	g := &Gate{}
	for _, text := range []string{"x\x1b[201~echo pwned\r", "a\rb", "\x1b]52;c;aGk=\a", "\u009b", "\u202e"} {
		out := g.Deliver(Delivery{Text: text})
		if out.Kind != api.Failed || !errs.Is(out.Err, errs.BodyInvalid) || out.MaybeWritten {
			t.Errorf("Deliver(%q) = %+v", text, out)
		}
	}
}

// Issue 37: one printf of "Action Required" into the window's title (OSC 2,
// which any program in the agent's terminal can print) made the broker
// believe a dialog was open while the agent idled at its prompt: it held
// the window's deliveries and reported "dialog", which keeps a wake's lease
// renewed. The title alone is no dialog: the broker reports the prompt, and
// the delivery goes in with its Enter.
func TestATitleAloneIsNoDialog(t *testing.T) {
	got := filepath.Join(t.TempDir(), "got")
	script := `printf '\033]2;[ ! ] Action Required | repo\007$ '; IFS= read -r line; printf '%s' "$line" > '` + got + `'; exec sleep 60`
	r, m := runUnderModel(t, script, nil)
	testutil.WaitFor(t, "the title and the prompt", func() bool {
		s := m.Snapshot()
		return strings.Contains(s.Title, "Action Required") && len(s.Rows) > 0 && s.Rows[0] == "$"
	})
	g := &Gate{Relay: r, Model: m, Settle: 20 * time.Millisecond}
	if st := g.State(); st.Screen != StatePrompt || !st.AtPrompt {
		t.Fatalf("the broker reports %+v at an idle prompt under the title", st)
	}
	out := g.Deliver(Delivery{Text: "From:alpha: hello", Pause: 20 * time.Millisecond, Quiet: 20 * time.Millisecond, MaxWait: 3 * time.Second})
	if out.Kind != api.Written || out.Held != "" {
		t.Fatalf("delivery under the title: %+v", out)
	}
	testutil.WaitFor(t, "the program to read the delivery", func() bool {
		b, _ := os.ReadFile(got)
		return string(b) == "From:alpha: hello"
	})
}
