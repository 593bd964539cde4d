package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
)

func newRetryCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID",
		Short: "Queue a failed or held message again",
		Long: `Queue failed message ID again, with the same id and a fresh budget of
attempts. This is the only way out of the failed state, and out of held (its
text sits in the agent's input box, the Enter held back) once you have cleared
the box.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return messageOp(cmd, a, (*client.Client).Retry, args[0], "queued again")
		},
	}
}
