package service

import (
	"context"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// A window without a broker session (opened without the service, or whose
// broker has not attached yet) gets the same rule as a brokered one: nothing
// is written unless an agent is the foreground program of its terminal. The
// service reads that from the pane's process, as tmux names it.

// paneVerdict says whether an agent is the foreground program of the pane
// whose process is panePID. The window's command is read from the pane's
// own process (what tmux runs: `sh -c CMD`, the command itself, or the
// user's shell), not from the record, which a window opened without the
// service lacks. A pane that runs a tamq broker without a session has the
// agent behind the broker's terminal: its child's terminal is read instead.
// known is false when the process table cannot say (the pane's process or
// the broker's child is not there yet).
func paneVerdict(panePID int, extra []string) (v program.Verdict, known bool) {
	if panePID <= 0 {
		return program.Verdict{}, false
	}
	fg, err := proc.ForegroundOf(panePID)
	if err != nil {
		return program.Verdict{}, false
	}
	self := fg.Argv
	if !fg.OwnGroup {
		self, _ = proc.Cmdline(panePID)
	}
	if inner, ok := program.BrokerChild(self); ok {
		kids, _ := proc.Children(panePID)
		for _, kid := range kids {
			if kfg, err := proc.ForegroundOf(kid); err == nil && kfg.PGID > 0 {
				return program.Judge(program.Foreground{Argv: kfg.Argv, OwnGroup: kfg.OwnGroup}, program.ArgvCommand(inner), extra), true
			}
		}
		return program.Verdict{}, false
	}
	return program.Judge(program.Foreground{Argv: fg.Argv, OwnGroup: fg.OwnGroup}, program.ArgvCommand(self), extra), true
}

// paneReady says whether a window without a broker can take a delivery now:
// an agent in its terminal's foreground, at its input prompt as its pane
// shows it; when not, the wait reason.
func paneReady(ctx context.Context, srv tmux.Server, w queue.Window, panePID int, extra []string) (bool, string) {
	v, _ := paneVerdict(panePID, extra)
	if !v.Running {
		return false, program.NoAgentRunning
	}
	if ok, why := paneAtPrompt(ctx, srv, w, v.Rules); !ok {
		return false, notAtPrompt(why)
	}
	return true, ""
}
