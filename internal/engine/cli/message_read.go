package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
)

func newMessageReadCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "read MESSAGE",
		Short: "Mark a State Hub message read",
		Long: `Mark a State Hub message read (POST /v1/messages/{id}/read), once the agent has
acted on it: a read message no longer wakes anyone. The engine relays the
request and records a message.read receipt with the message's id.`,
		Example: `  coordination-engine message read m-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stateHubID("message id", args[0]); err != nil {
				return err
			}
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			res, err := c.MessageRead(cmd.Context(), args[0])
			switch {
			case err != nil:
				return err
			case a.JSON:
				return a.PrintJSON(res)
			case !a.Quiet:
				a.Printf("message %s marked read in State Hub\n", res.MessageID)
			}
			return nil
		},
	}
}
