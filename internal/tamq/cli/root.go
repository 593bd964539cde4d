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

// NewRoot builds tamq's command tree, every command in it.
func NewRoot(a *app.App) *cobra.Command {
	root := newBareRoot(a)
	for _, c := range commands {
		root.AddCommand(c.build(a))
	}
	return root
}

// commands are tamq's own commands, each by its name (the first word of its
// Use) and how to build it; TestCommandsNamed checks the names.
var commands = []struct {
	name  string
	build func(*app.App) *cobra.Command
}{
	{"open", newOpenCmd},
	{"send", newSendCmd},
	{"ack", newAckCmd},
	{"retry", newRetryCmd},
	{"cancel", newCancelCmd},
	{"history", newHistoryCmd},
	{"export", newExportCmd},
	{"replay", newReplayCmd},
	{"purge", newPurgeCmd},
	{"broker", newBrokerCmd},
	{"hook", newHookCmd},
	{"agent", newAgentCmd},
	{"serve", newServeCmd},
	{"start", newStartCmd},
	{"stop", func(a *app.App) *cobra.Command {
		return app.NewStopCmd(a, "Stop the service (tmux windows and queues stay)", `Ask the service to stop and wait until it has. Only the service stops: tmux
windows, their agents and the message queue are left as they are, and queued
messages are delivered after the next start. Stopping a service that is not
running is not an error.`)
	}},
	{"ping", app.NewPingCmd},
	{"status", newStatusCmd},
	{"doctor", newDoctorCmd},
	{"endpoints", newEndpointsCmd},
	{"top", newTopCmd},
}

// newBareRoot is the root command with its flags and the commands both
// programs share, without tamq's own commands.
func newBareRoot(a *app.App) *cobra.Command {
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
		// The root form's flags say the words are repos; without them, a
		// first word close to a command's name and not a repo is a mistyped
		// command even when a later word is a repo (tamq opne webapp): it
		// gets the command's did-you-mean, not a lookup of "opne" in gita.
		rootForm := cmd.Flags().Changed("command") || cmd.Flags().Changed("mode")
		if s := cmd.SuggestionsFor(args[0]); !rootForm && len(s) > 0 && !anyRegistered(a, args[:1]) {
			return unknownCommandOrRepo(cmd, args[0], s)
		}
		if !rootForm && !anyRegistered(a, args) {
			// Neither a repo nor the root form's flags: most likely a mistyped command.
			return unknownCommandOrRepo(cmd, args[0], nil)
		}
		return runOpen(cmd, a, o, args)
	}
	return root
}

// unknownCommandOrRepo is the usage error for a first word that is neither
// a command nor a registered repo, with the commands it is close to.
func unknownCommandOrRepo(cmd *cobra.Command, word string, suggestions []string) error {
	msg := fmt.Sprintf("unknown command or repo %q for %q", word, cmd.CommandPath())
	if len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t")
	}
	return app.UsageError("%s", msg)
}

// newRootFor builds the tree args need: when they run one of tamq's own
// commands, the root with that command alone. tamq send and tamq ping are
// process starts agents pay on every message, and building the eighteen
// other commands with their flags took about 0.2 ms of each (0.6 ms of tree
// before cobra ran, 0.35 ms now, on a loaded 2-core machine). Cobra itself
// finds the command, among stand-ins that have only a name, past the root's
// flags, as it would in the full tree; anything else (the root form, help,
// completion, a mistyped command and its suggestions) gets the full tree,
// which those list.
func newRootFor(a *app.App, args []string) *cobra.Command {
	root := newBareRoot(a)
	standIns := make([]*cobra.Command, len(commands))
	for i, c := range commands {
		standIns[i] = &cobra.Command{Use: c.name}
	}
	root.AddCommand(standIns...)
	found, _, err := root.Find(args)
	root.RemoveCommand(standIns...)
	for i, c := range commands {
		if err == nil && found == standIns[i] {
			root.AddCommand(c.build(a))
			// Not the completion command, so cobra need not build it and its
			// four shells' help at every start.
			root.CompletionOptions.DisableDefaultCmd = true
			return root
		}
	}
	for _, c := range commands {
		root.AddCommand(c.build(a))
	}
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
	return app.Run(a, newRootFor(a, os.Args[1:]), os.Args[1:])
}
