package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
)

func newLeaseAckCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "ack LEASE",
		Short: "Acknowledge a lease before starting the work",
		Long: `Acknowledge the lease the wake prompt names: the work begins. The wake message
is acknowledged in tamq too, so it is not presented again. Acknowledging twice
is harmless.`,
		Example: `  coordination-engine lease ack 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			l, err := c.Ack(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printLease(a, "acknowledged", l)
		},
	}
}
