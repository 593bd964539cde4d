package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
)

func newLeaseRenewCmd(a *app.App) *cobra.Command {
	var attempt int
	cmd := &cobra.Command{
		Use:   "renew LEASE [--attempt N]",
		Short: "Renew a lease while working on it",
		Long: `Renew an acknowledged lease: it stays yours for lease_missed_renewals more
renewal intervals. The first renewal marks the lease running. A renewal of an
attempt after a newer one was offered is refused (exit 23): stop, and follow
the newer prompt.`,
		Example: `  coordination-engine lease renew 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f --attempt 1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			l, err := c.Renew(cmd.Context(), api.LeaseArgs{LeaseID: args[0], Attempt: attempt})
			if err != nil {
				return err
			}
			return printLease(a, "renewed", l)
		},
	}
	attemptFlag(cmd, &attempt)
	return cmd
}
