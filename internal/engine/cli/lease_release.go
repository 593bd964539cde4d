package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/api"
)

func newLeaseReleaseCmd(a *app.App) *cobra.Command {
	var result, reason string
	cmd := &cobra.Command{
		Use:   "release LEASE",
		Short: "Release a lease with its result",
		Long: `Release a lease when the work ends. --result completed ends it (the default);
failed offers the work again as a new attempt after the retry backoff (or
stops it when the attempts are used up); blocked stops it for a human, with
--reason saying why (never retried).`,
		Example: `  coordination-engine lease release L --result completed
  coordination-engine lease release L --result blocked --reason "needs a production credential"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch result {
			case api.ResultCompleted, api.ResultFailed, api.ResultBlocked:
			default:
				return app.UsageError("--result must be completed, failed or blocked, not %q", result)
			}
			if result == api.ResultBlocked && reason == "" {
				return app.UsageError("--result blocked needs --reason")
			}
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			l, err := c.Release(cmd.Context(), api.ReleaseArgs{LeaseID: args[0], Result: result, Reason: reason})
			if err != nil {
				return err
			}
			return printLease(a, "released", l)
		},
	}
	cmd.Flags().StringVar(&result, "result", api.ResultCompleted, "completed | failed | blocked")
	cmd.Flags().StringVar(&reason, "reason", "", "why the work failed or is blocked (kept in the receipt; no secrets)")
	return cmd
}
