package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newEndpointsForgetCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "forget ENDPOINT",
		Short: "Forget an endpoint whose tmux server is gone for good",
		Long: `Forget an endpoint whose tmux server is gone: it is no longer listed, counted
in status, restored by 'tamq start' or offered as a target, but stays in
history. Its undelivered messages fail (see them with 'tamq history --state
failed'); 'tamq retry ID' sends one again through the repo's live window. A
coordination-engine wake among them was never typed: the engine spends no
attempt on it and sends the work to the repo's live window, or waits for one,
even when the wake was pinned to this endpoint ('wake --endpoint'). A
connected endpoint cannot be forgotten (exit 13).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			res, err := client.New(p).Forget(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			if !a.Quiet {
				a.Printf("forgot %s (%d undelivered messages failed)\n", textsafe.Escape(res.EndpointID), res.FailedMessages)
			}
			return nil
		},
	}
}
