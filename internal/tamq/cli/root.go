// Package cli is tamq's command line: it adds tamq's own commands to the root
// both programs share.
package cli

import (
	"os"

	"github.com/spf13/cobra"

	sharedcli "github.com/tmux-amq/tamq/internal/cli"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

const short = "tmux agentic message queueing: durable messages between agent terminals"

// NewApp returns tamq's App wired to the real process environment.
func NewApp() *sharedcli.App { return sharedcli.NewApp(paths.Tamq, short, store.Migrations) }

// NewRoot builds tamq's command tree.
func NewRoot(a *sharedcli.App) *cobra.Command {
	root := sharedcli.NewRoot(a)
	root.Long = `tamq opens one tmux window per gita-registered repository, keeps a durable
SQLite message queue, and delivers 'To:<repo>: text' messages between the agents
in those windows. It works on its own; coordination-engine wakes agents through it.`
	root.AddCommand(
		newServeCmd(a),
		newStartCmd(a),
		newStopCmd(a),
		newPingCmd(a),
		newStatusCmd(a),
	)
	return root
}

// Main runs tamq with the process's arguments and returns its exit status.
func Main() int {
	a := NewApp()
	return sharedcli.Run(a, NewRoot(a), os.Args[1:])
}
