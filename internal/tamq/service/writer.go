package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// Writer puts text into a window's terminal and says what became of it.
// confirm, when not nil, is asked right before the first byte whether the
// delivery is still wanted (its messages not cancelled meanwhile); false
// writes nothing.
type Writer interface {
	Write(ctx context.Context, ep queue.Endpoint, w queue.Window, text string, confirm *Confirm) Written
}

// Confirm names the messages a writer confirms with the service right
// before the first byte, and how (Current reads their state now).
type Confirm struct {
	IDs     []string
	Current func() (bool, string)
}

// Written is what a Writer reports of one delivery: its outcome, and the
// way it went.
type Written struct {
	Outcome api.DeliveryOutcome
	// Path is "broker" or "tmux".
	Path string
	// broker is the session that answered, and brokerStates how many agent
	// states it had reported before its answer.
	broker       *brokerConn
	brokerStates uint64
}

// claimKey carries, in the context of a write, the claim of the messages
// written (an api.DeliveryClaim): a broker remembers it with its answer, so
// that the next start of a service killed mid-delivery knows what went in.
// Only the broker's writer uses it; the Writer interface stays what every
// writer needs.
type claimKey struct{}

// withClaim is ctx carrying the claim of ms, claimed together (one time
// for a batch).
func withClaim(ctx context.Context, ms []queue.Message) context.Context {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return context.WithValue(ctx, claimKey{}, api.DeliveryClaim{IDs: ids, At: ms[0].UpdatedAt})
}

// detail is the receipt detail of a delivery: how, never what. Through a
// broker, its moment: "quiet" when the agent's output was quiet and the
// operator not mid-line, "bounded" when the wait for that ran out.
func (w Written) detail() map[string]any {
	d := map[string]any{"path": w.Path}
	if w.Path == "broker" {
		d["moment"], d["waited_ms"] = "bounded", w.Outcome.Waited.Milliseconds()
		if w.Outcome.Quiet {
			d["moment"] = "quiet"
		}
	}
	return d
}

// TmuxWriter writes through tmux: one bracketed paste of the whole text
// through a uniquely named buffer, a pause, then Enter as a write of its own
// (docs/delivery.md explains why).
type TmuxWriter struct {
	// Clock paces the pause before the Enter and the looks at the process
	// table; nil is the system's.
	Clock clock.Clock
	Pause func(text string) time.Duration
	// Agent says whether an agent is the foreground program of the
	// window's pane, and whose screen rules apply; nil: the window's
	// recorded command runs, always.
	Agent func(ctx context.Context, ep queue.Endpoint, w queue.Window) program.Verdict
}

// agent is Agent's answer, or the recorded command's.
func (tw TmuxWriter) agent(ctx context.Context, ep queue.Endpoint, w queue.Window) program.Verdict {
	if tw.Agent == nil {
		return program.Verdict{Running: true, Rules: broker.AgentOf(strings.Fields(w.Command))}
	}
	return tw.Agent(ctx, ep, w)
}

func (tw TmuxWriter) clock() clock.Clock {
	if tw.Clock == nil {
		return clock.System
	}
	return tw.Clock
}

// Write implements Writer. Both writes are guarded: tmux itself checks, at
// the moment of each, that the pane is the window's (same server, same repo
// mark) and that its program is alive.
func (tw TmuxWriter) Write(ctx context.Context, ep queue.Endpoint, w queue.Window, text string, confirm *Confirm) Written {
	srv := tmux.Server{Socket: ep.TmuxSocket}
	g := tmux.Guard{PaneID: w.PaneID, ServerPID: ep.ServerPID, Repo: w.Repo}
	// Nothing goes in unless an agent is the foreground program (a shell
	// would run every line), at its input prompt: the Enter would otherwise
	// answer whatever dialog shows. The agent is looked at last, right
	// before the paste.
	v := tw.agent(ctx, ep, w)
	if !v.Running {
		return tmuxWrote(api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: program.NoAgentRunning})
	}
	if ok, why := paneAtPrompt(ctx, srv, w, v.Rules); !ok {
		return tmuxWrote(api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: notAtPrompt(why)})
	}
	if !tw.agent(ctx, ep, w).Running {
		return tmuxWrote(api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: program.NoAgentRunning})
	}
	if confirm != nil {
		if ok, why := confirm.Current(); !ok {
			return tmuxWrote(api.DeliveryOutcome{Kind: api.Cancelled, Reason: why})
		}
	}
	if err := srv.Paste(ctx, g, text); err != nil {
		if r := tmux.RefusalOf(err); r != nil {
			return tmuxWrote(api.DeliveryOutcome{Kind: api.Unreachable, Reason: r.Reason})
		}
		return tmuxWrote(api.DeliveryOutcome{Kind: api.Failed, Err: err, MaybeWritten: !errors.Is(err, tmux.ErrNotWritten)})
	}
	select {
	case <-tw.clock().After(tw.Pause(text)):
	case <-ctx.Done():
		return tmuxWrote(api.DeliveryOutcome{Kind: api.Failed, Err: ctx.Err(), MaybeWritten: true})
	}
	if ok, why := pasteShows(ctx, srv, w, text, v.Rules); !ok {
		// The text is in but not where the Enter would submit it: no Enter.
		return tmuxWrote(api.DeliveryOutcome{Kind: api.Failed, MaybeWritten: true,
			Err: errs.New(errs.Unavailable, "the text is in but the Enter was held back: %s", why)})
	}
	if !tw.stillAgent(ctx, ep, w) {
		// The agent left the foreground during the pause: an Enter now
		// would go to whatever took it.
		return tmuxWrote(api.DeliveryOutcome{Kind: api.Failed, MaybeWritten: true,
			Err: errs.New(errs.Unavailable, "the text is in but the Enter was held back: %s", program.NoAgentRunning)})
	}
	if err := srv.SendEnter(ctx, g); err != nil {
		return tmuxWrote(api.DeliveryOutcome{Kind: api.Failed, Err: err, MaybeWritten: true})
	}
	return tmuxWrote(api.DeliveryOutcome{Kind: api.Written})
}

// tmuxWrote is what the TmuxWriter reports: out, through tmux.
func tmuxWrote(out api.DeliveryOutcome) Written {
	return Written{Outcome: out, Path: "tmux"}
}

// stillAgent looks again, after the text went in, whether the agent is the
// foreground program. A process caught in the middle of an exec (a
// wrapper's `sh -c '…; exec agent'`) shows no command line for a moment, so
// a "no" is looked at twice more before the text is given up on: the
// process table offers no event to wait on.
func (tw TmuxWriter) stillAgent(ctx context.Context, ep queue.Endpoint, w queue.Window) bool {
	for try := 0; ; try++ {
		if tw.agent(ctx, ep, w).Running {
			return true
		}
		if try == 2 {
			return false
		}
		select {
		case <-tw.clock().After(25 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}

// screenOf reads a pane as the broker's detector reads its model; rules
// names the agent whose screen rules apply (program.Verdict.Rules).
func screenOf(ctx context.Context, srv tmux.Server, w queue.Window, rules string) (broker.Screen, error) {
	c, err := srv.Capture(ctx, w.PaneID)
	if err != nil {
		return broker.Screen{}, err
	}
	return broker.Screen{Rows: c.Rows, Cols: c.Width, CursorX: c.CursorX, CursorY: c.CursorY, CursorVisible: c.CursorVisible,
		Title: c.Title, AltScreen: c.AltScreen, Agent: rules}, nil
}

// paneAtPrompt says whether a window without a broker shows its program at
// its input prompt, with the broker's rules; a pane that cannot be read is
// not. (The guard of the write still checks the pane itself.)
func paneAtPrompt(ctx context.Context, srv tmux.Server, w queue.Window, rules string) (bool, string) {
	scr, err := screenOf(ctx, srv, w, rules)
	if err != nil {
		return false, "its screen cannot be read: " + err.Error()
	}
	return broker.AtPrompt(scr)
}

// pasteShows says whether the pasted text sits in the program's input box.
func pasteShows(ctx context.Context, srv tmux.Server, w queue.Window, text, rules string) (bool, string) {
	scr, err := screenOf(ctx, srv, w, rules)
	if err != nil {
		return false, "its screen cannot be read: " + err.Error()
	}
	return broker.InputShows(scr, text)
}

// enterPause grows with the text: long pastes take agents longer to take in.
func enterPause(c *config.Loaded, text string) time.Duration {
	return c.EnterPause() + time.Duration(len(text)/1024)*10*time.Millisecond
}
