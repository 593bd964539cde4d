// Package cli is coordination-engine's command line: it adds the engine's own
// commands to the root both programs share.
package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/paths"
)

const short = "wake repository agents when State Hub says their work is ready"

// NewApp returns coordination-engine's App wired to the real process environment.
func NewApp() *app.App { return app.NewApp(paths.Engine, short, store.Migrations) }

// NewRoot builds coordination-engine's command tree.
func NewRoot(a *app.App) *cobra.Command {
	root := app.NewRoot(a)
	root.Long = `coordination-engine watches State Hub, turns changes into deduplicated
triggers, stops with a durable receipt wherever a human must decide, takes an
idempotent lease, and wakes the owning repository's agent through tamq.`
	root.AddCommand(
		newServeCmd(a),
		newStartCmd(a),
		app.NewStopCmd(a, "Stop the engine (leases and receipts stay)", `Ask coordination-engine to stop and wait until it has. Leases, their
deadlines and receipts stay in its database and are taken up at the next
start; tamq and the agents' windows are not touched. Stopping an engine that
is not running is not an error.`),
		app.NewPingCmd(a),
		newStatusCmd(a),
		newDoctorCmd(a),
		newWakeCmd(a),
		newLeaseCmd(a),
		newCheckpointCmd(a),
		newTaskCmd(a),
		newTasksCmd(a),
		newMessageCmd(a),
		newLeasesCmd(a),
		newReceiptsCmd(a),
		newCheckpointsCmd(a),
		newExplainCmd(a),
		newPurgeCmd(a),
		newDevStateHubCmd(a),
	)
	return root
}

// Main runs coordination-engine with the process's arguments and returns its exit status.
func Main() int {
	a := NewApp()
	return app.Run(a, NewRoot(a), os.Args[1:])
}
