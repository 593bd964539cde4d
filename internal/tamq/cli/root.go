// Package cli is tamq's command line: it adds tamq's own commands to the root
// both programs share.
package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

const short = "tmux agentic message queueing: durable messages between agent terminals"

// NewApp returns tamq's App wired to the real process environment.
func NewApp() *app.App { return app.NewApp(paths.Tamq, short, store.Migrations) }

// NewRoot builds tamq's command tree.
func NewRoot(a *app.App) *cobra.Command {
	root := app.NewRoot(a)
	root.Long = `tamq opens one tmux window per gita-registered repository, keeps a durable
SQLite message queue, and delivers 'To:<repo>: text' messages between the agents
in those windows. It works on its own; coordination-engine wakes agents through it.`
	// The spec's root form, `tamq --command codex --mode trigger REPO...`, is open.
	var o openOptions
	o.register(root)
	root.Args = cobra.ArbitraryArgs
	root.SuggestionsMinimumDistance = 2
	root.ValidArgsFunction = app.CompleteRepos(a)
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		if !cmd.Flags().Changed("command") && !cmd.Flags().Changed("mode") && !anyRegistered(a, args) {
			// Neither a repo nor the root form's flags: most likely a mistyped command.
			msg := fmt.Sprintf("unknown command or repo %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
			}
			return app.UsageError("%s", msg)
		}
		return runOpen(cmd, a, o, args)
	}
	root.AddCommand(
		newOpenCmd(a),
		newSendCmd(a),
		newAckCmd(a),
		newRetryCmd(a),
		newHistoryCmd(a),
		newExportCmd(a),
		newReplayCmd(a),
		newPurgeCmd(a),
		newBrokerCmd(a),
		newHookCmd(a),
		newAgentCmd(a),
		newServeCmd(a),
		newStartCmd(a),
		app.NewStopCmd(a, "Stop the service (tmux windows and queues stay)", `Ask the service to stop and wait until it has. Only the service stops: tmux
windows, their agents and the message queue are left as they are, and queued
messages are delivered after the next start. Stopping a service that is not
running is not an error.`),
		app.NewPingCmd(a),
		newStatusCmd(a),
		newDoctorCmd(a),
		newEndpointsCmd(a),
		newTopCmd(a),
	)
	return root
}

// anyRegistered reports whether some arg is a registered repo slug.
func anyRegistered(a *app.App, args []string) bool {
	reg, err := a.Registry()
	if err != nil {
		return false
	}
	for _, arg := range args {
		if _, ok := reg.Lookup(arg); ok {
			return true
		}
	}
	return false
}

// Main runs tamq with the process's arguments and returns its exit status.
func Main() int {
	a := NewApp()
	return app.Run(a, NewRoot(a), os.Args[1:])
}
