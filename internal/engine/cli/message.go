package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

func newMessageCmd(a *app.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "message",
		Short: "Read a State Hub message's body, mark it read (run by the agent)",
		Long: `A wake for a State Hub message names the message; its body stays in State Hub.
The agent reads it with 'message show ID' and, once it has acted on it, marks
it read with 'message read ID'. Both go through coordination-engine's daemon,
which holds State Hub's address and credentials; the agent's window has
neither. The engine keeps no body: it fetches it when asked, scans it for
secret material as it scans a prompt, and withholds it when the scan finds
some.

Exit status: 0 on success; 8 (unavailable) when the engine or State Hub does
not answer; 12 (not_found) for a message State Hub does not have; 14
(policy_refused) for a body withheld by the secret gate; 24 (unsupported) when
State Hub does not offer the route (use the tracker's own tools).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newMessageShowCmd(a), newMessageReadCmd(a))
	return cmd
}

// stateHubID checks an id given on the command line as the engine will,
// before JSON could change bytes that are not UTF-8.
func stateHubID(what, id string) error {
	if err := api.CheckStateHubID(what, id); err != nil {
		return app.UsageError("%s", err.(*errs.Error).Message)
	}
	return nil
}
