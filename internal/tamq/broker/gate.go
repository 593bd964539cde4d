package broker

import (
	"errors"
	"os"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Gate writes deliveries into the agent and presses their Enter only when it
// can tell the Enter submits the text: an agent in the terminal's
// foreground, at its input prompt, not in a selection dialog, a
// confirmation or a permission prompt, where an Enter would choose something
// nobody chose. Every signal must agree:
//
//  0. an agent is the terminal's foreground program (Foreground): a shell
//     would run every line of the text as a command;
//  1. the screen model has caught up with the agent's output, and two reads
//     of it in a row show the prompt (AtPrompt), for the agent's kind;
//  2. the agent's hooks, when it has them, report no open dialog;
//  3. after the paste, the text shows in the input box with the cursor
//     after it (InputShows; for other programs, still no dialog markers),
//     and no hook event came in between.
//
// When 0 does not hold, nothing is written and the delivery is answered at
// once (api.NotAtPrompt, program.NoAgentRunning); it is checked again right
// before the first byte. When 1 or 2 do not hold within the delivery's wait,
// nothing is written (api.NotAtPrompt, with the reason). When 3 fails the
// text is in but the Enter is not pressed (api.EnterHeld, with the reason);
// a second Enter is never sent.
type Gate struct {
	Relay *Relay
	Model *Model
	// Hooks is what the agent's hooks said; nil when none report.
	Hooks *HookState
	// Foreground says whether an agent is the foreground program, and whose
	// screen rules apply; nil: Agent runs, always.
	Foreground *Foreground
	// Agent is AgentOf the window's command: the screen rules when
	// Foreground is nil.
	Agent string
	// Busy says the operator is midway through typing a line.
	Busy func() bool
	// Settle is the pause between the two reads of the screen.
	Settle time.Duration
}

// Delivery is one message to write.
type Delivery struct {
	Text      string
	Bracketed bool
	// Pause is the gap between the paste and its Enter; Quiet and MaxWait
	// as in Moment. MaxWait also bounds the wait for the prompt.
	Pause, Quiet, MaxWait time.Duration
	// Current, when set, is asked right before the first byte whether the
	// delivery is still wanted (a wake whose lease ended while the gate
	// waited is not); false, with why, writes nothing.
	Current func() (bool, string)
}

// idleQuietWait bounds the wait for a quiet moment, beyond the quiet asked
// for, when a known agent shows its empty input box.
const idleQuietWait = 100 * time.Millisecond

// geminiEnterGap is the least pause between a paste and its Enter for
// Gemini CLI, whatever delivery.enter_pause_ms says. It takes an Enter for
// a newline while a paste is recent: an Enter within 30 ms of a key, and,
// outside the kitty keyboard protocol, any Enter before a 40 ms timer set
// by the paste has fired and its input box has been drawn again
// (recentUnsafePasteTime in its InputPrompt), which nothing on the screen
// shows. Busy starting up on a loaded machine, its event loop ran that
// timer over 300 ms late (make test-agents, seven agents starting at once):
// one second covers it.
const geminiEnterGap = time.Second

// pasteShowsWithin bounds how long after the pause the text may take to
// show in the input box, and the agent to stop drawing it. An agent on a
// loaded machine (several agents on two cores) takes seconds; past the bound
// the Enter is held back and the message fails for the operator to see.
const pasteShowsWithin = 5 * time.Second

// agent says whether an agent is the foreground program, whose screen rules
// apply, and what program is in the foreground ("" when unknown); fresh
// reads the process table now.
func (g *Gate) agent(fresh bool) (rules string, running bool, name string) {
	if g.Foreground == nil {
		return g.Agent, true, ""
	}
	v := g.Foreground.Look()
	if fresh {
		v = g.Foreground.Fresh()
	}
	return v.Rules, v.Running, v.Program
}

// State is the broker's view of its agent as the service hears it: one
// look at the foreground, so its fields agree.
func (g *Gate) State() api.BrokerState {
	rules, running, name := g.agent(false)
	screen, reason, status := g.viewOf(rules, running)
	return api.BrokerState{AtPrompt: screen == StatePrompt, Screen: screen, Reason: reason, NoAgent: !running, Program: name,
		Reads: running && (rules != "" || status != "")}
}

// View is the broker's view of its agent now: at its prompt or not, and why
// not (program.NoAgentRunning when no agent is the foreground program).
func (g *Gate) View() (atPrompt bool, reason string) {
	rules, running, _ := g.agent(false)
	screen, reason, _ := g.viewOf(rules, running)
	return screen == StatePrompt, reason
}

// viewOf is View for one look at the foreground, with what the screen shows
// as Classify names it ("" when no agent runs), and the agent's last
// Program Status Protocol report ("" when it made none); a dialog the hooks
// report is a dialog whatever the screen shows.
func (g *Gate) viewOf(rules string, running bool) (screen, reason, status string) {
	if !running {
		return "", program.NoAgentRunning, ""
	}
	s := g.Model.Snapshot()
	s.Agent = rules
	screen, reason = Classify(s)
	if g.Hooks != nil {
		if d := g.Hooks.Dialog(screen == StatePrompt, time.Now()); d != "" {
			return StateDialog, d, s.Status
		}
	}
	if screen == StatePrompt {
		reason = ""
	}
	return screen, reason, s.Status
}

// Deliver writes d into the agent when it is at its prompt, and says what
// became of it.
func (g *Gate) Deliver(d Delivery) api.DeliveryOutcome {
	// The last line of defence: whatever the service sent, nothing written
	// here may end the bracketed paste or press a key.
	if !textsafe.Inert(d.Text) {
		return api.DeliveryOutcome{Kind: api.Failed, Err: errs.New(errs.BodyInvalid, "refusing to type a delivery with a control character other than newline and tab")}
	}
	start := time.Now()
	if _, running, _ := g.agent(false); !running {
		return api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: program.NoAgentRunning}
	}
	deadline := start.Add(d.MaxWait)
	wait := d.MaxWait
	if g.idleAtPrompt() {
		// A known agent's screen shows its empty input box: what it still
		// draws (a cursor, a status line) is no turn running. The screen
		// reads below still decide.
		wait = min(wait, d.Quiet+idleQuietWait)
	}
	quiet, _ := g.Relay.AwaitMoment(Moment{Quiet: d.Quiet, MaxWait: wait, Busy: g.Busy})
	var hooks uint64
	for {
		var reason string
		hooks, reason = g.ready(deadline)
		if reason == "" {
			break
		}
		// No agent: nothing to wait for; the service holds the window
		// until the broker reports one.
		if reason == program.NoAgentRunning || !time.Now().Before(deadline) {
			return api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: reason, Quiet: quiet, Waited: time.Since(start)}
		}
		time.Sleep(min(100*time.Millisecond, time.Until(deadline)))
	}
	out := api.DeliveryOutcome{Quiet: quiet, Waited: time.Since(start)}
	if rules, _, _ := g.agent(false); rules == AgentGemini {
		d.Pause = max(d.Pause, geminiEnterGap)
	}
	body := d.Text
	if d.Bracketed {
		body = "\x1b[200~" + d.Text + "\x1b[201~"
	}
	noAgent, maybeWritten := false, false
	err := g.Relay.Exclusive(func(write func([]byte) error) error {
		// The last look before the first byte: a shell that took the
		// foreground since the screen was read (the agent exited, or was
		// suspended) gets nothing, nor does a delivery no longer wanted.
		if _, running, _ := g.agent(true); !running {
			noAgent = true
			return nil
		}
		if d.Current != nil {
			if ok, why := d.Current(); !ok {
				out.Kind, out.Reason = api.Cancelled, why
				return nil
			}
		}
		// From the first byte on, the text may be in the agent's input.
		maybeWritten = true
		if err := write([]byte(body)); err != nil {
			return err
		}
		// Agents take an Enter that comes with a paste for a newline: the
		// pause keeps them apart.
		time.Sleep(d.Pause)
		if reason := g.pasteShows(d.Text, hooks); reason != "" {
			out.Kind, out.Held, out.Reason = api.EnterHeld, g.heldFor(), reason
			return nil
		}
		// An agent draws the paste once it has read it, which under load
		// can be well after the write; an Enter that follows its reading
		// too closely is taken for part of the paste (Codex: within
		// 120 ms). So the pause also runs from the agent's last output.
		if quiet, _ := g.Relay.AwaitMoment(Moment{Quiet: d.Pause, MaxWait: pasteShowsWithin}); !quiet {
			out.Kind, out.Held, out.Reason = api.EnterHeld, g.heldFor(), "the agent kept drawing after the paste"
			return nil
		}
		if reason := g.pasteShows(d.Text, hooks); reason != "" {
			out.Kind, out.Held, out.Reason = api.EnterHeld, g.heldFor(), reason
			return nil
		}
		if err := write([]byte{'\r'}); err != nil {
			return err
		}
		out.Kind, out.At = api.Written, time.Now().UTC()
		return nil
	})
	switch {
	case noAgent && err == nil:
		return api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: program.NoAgentRunning, Quiet: quiet, Waited: time.Since(start)}
	case errors.Is(err, os.ErrClosed) && !maybeWritten:
		// The terminal is not open yet (the session came before the agent
		// started) or any more (it exited): nothing was written, and the
		// message waits for the window without spending its attempt.
		return api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: "the agent's terminal is not open", Quiet: quiet, Waited: time.Since(start)}
	case err != nil:
		out.Kind, out.Err, out.MaybeWritten = api.Failed, err, maybeWritten
	}
	return out
}

// idleAtPrompt says a known agent (Claude Code, Codex: screens whose rules
// tamq knows) shows its empty input box. Its turn-end hook brings this
// look at once: the hook's event makes the broker report, and the service
// tries the window's delivery again.
func (g *Gate) idleAtPrompt() bool {
	rules, running, _ := g.agent(false)
	if rules == "" || !running {
		return false
	}
	screen, _, _ := g.viewOf(rules, running)
	return screen == StatePrompt
}

// heldFor names, in a word, what held an Enter back: the screen as it is
// now shows a dialog (or the hooks say one is open), a busy agent, or
// something else ("unknown screen": the paste did not show as it should).
func (g *Gate) heldFor() string {
	rules, running, _ := g.agent(false)
	switch screen, _, _ := g.viewOf(rules, running); screen {
	case StateDialog:
		return "dialog"
	case StateBusy:
		return "busy"
	}
	return "unknown screen"
}

// ready reads the screen twice, Settle apart (once when the agent wrote
// nothing for Settle before), and returns "" when both show
// the prompt and the hooks agree, with the hooks' event count at the first
// read.
func (g *Gate) ready(deadline time.Time) (hooks uint64, reason string) {
	hooks = g.hookSeq()
	// Output that outran the wait for a quiet moment still gets a moment to
	// reach the model.
	deadline = later(deadline, time.Now().Add(250*time.Millisecond))
	for read := 0; ; read++ {
		// A screen the agent has not written to for Settle already reads the
		// same twice: one read of it is the two reads.
		stable := g.Relay.Idle() >= g.Settle
		if !g.caughtUp(deadline) {
			return hooks, "the screen model is behind the agent's output"
		}
		if at, why := g.View(); !at {
			return hooks, why
		}
		if stable || read == 1 {
			break
		}
		time.Sleep(g.Settle)
	}
	if g.hookSeq() != hooks {
		return hooks, "the agent's hooks reported an event while the screen was read"
	}
	return hooks, ""
}

// pasteShows checks, after the paste, that the text sits in the input box
// and nothing else happened; "" when the Enter may go.
func (g *Gate) pasteShows(text string, hooks uint64) string {
	deadline := time.Now().Add(pasteShowsWithin)
	for {
		g.caughtUp(deadline)
		s := g.Model.Snapshot()
		s.Agent, _, _ = g.agent(false)
		reason := ""
		if g.hookSeq() != hooks {
			return "the agent's hooks reported an event during the paste"
		}
		if ok, why := InputShows(s, text); !ok {
			reason = why
		} else if at, why := AtPrompt(s); s.Agent == "" && !at {
			// A program tamq cannot read an input box of: no dialog came up.
			reason = "after the paste: " + why
		}
		if reason == "" || !time.Now().Before(deadline) {
			return reason
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *Gate) hookSeq() uint64 {
	if g.Hooks == nil {
		return 0
	}
	return g.Hooks.Seq()
}

// caughtUp waits (up to deadline) until the model has taken all the output
// the relay passed on.
func (g *Gate) caughtUp(deadline time.Time) bool {
	for g.Model.Handled() < g.Relay.Output() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
