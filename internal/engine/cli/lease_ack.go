package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
)

func newLeaseAckCmd(a *app.App) *cobra.Command {
	var attempt int
	cmd := &cobra.Command{
		Use:   "ack LEASE [--attempt N]",
		Short: "Acknowledge a lease before starting the work",
		Long: `Acknowledge the lease the wake prompt names: the work begins. The wake message
is acknowledged in tamq too, so it is not presented again. Acknowledging twice
is harmless. --attempt names the attempt the prompt gave: an older attempt is
refused (exit 23), since a newer prompt is the one to follow.`,
		Example: `  coordination-engine lease ack 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f --attempt 1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			l, err := c.Ack(cmd.Context(), api.LeaseArgs{LeaseID: args[0], Attempt: attempt})
			if err != nil {
				return err
			}
			return printLease(a, "acknowledged", l)
		},
	}
	attemptFlag(cmd, &attempt)
	return cmd
}
