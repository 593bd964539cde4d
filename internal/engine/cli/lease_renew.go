package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
)

func newLeaseRenewCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "renew LEASE",
		Short: "Renew a lease while working on it",
		Long: `Renew an acknowledged lease: it stays yours for lease_missed_renewals more
renewal intervals. The first renewal marks the lease running.`,
		Example: `  coordination-engine lease renew 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			l, err := c.Renew(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printLease(a, "renewed", l)
		},
	}
}
