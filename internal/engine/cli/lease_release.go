package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
)

func newLeaseReleaseCmd(a *app.App) *cobra.Command {
	var args api.ReleaseArgs
	cmd := &cobra.Command{
		Use:   "release LEASE --result completed|failed|blocked [--reason TEXT] [--attempt N]",
		Short: "Release a lease with its result",
		Long: `Release a lease when the work ends, saying how: --result is required.
completed ends it; failed offers the work again as a new attempt after the
retry backoff (or stops it when the attempts are used up); blocked stops it
for a human, never retried. failed and blocked need --reason (kept in the
receipt: no secrets; one that looks like a secret is kept as "withheld
(secret-looking text)" and the command says so on stderr). A lease released blocked is woken again only when State
Hub changes its task (a person sets it back to todo or ready, or clears the
gate).`,
		Example: `  coordination-engine lease release L --result completed --attempt 1
  coordination-engine lease release L --result blocked --reason "needs a production credential"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			switch args.Result {
			case api.ResultCompleted, api.ResultFailed, api.ResultBlocked:
			case "":
				return app.UsageError("--result is required: completed, failed or blocked")
			default:
				return app.UsageError("--result must be completed, failed or blocked, not %q", args.Result)
			}
			if args.Result != api.ResultCompleted && strings.TrimSpace(args.Reason) == "" {
				return app.UsageError("--result %s needs --reason", args.Result)
			}
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			args.LeaseID = pos[0]
			l, err := c.Release(cmd.Context(), args)
			if err != nil {
				return err
			}
			return printLease(a, "released", l)
		},
	}
	cmd.Flags().StringVar(&args.Result, "result", "", "completed | failed | blocked (required)")
	cmd.Flags().StringVar(&args.Reason, "reason", "", "why the work failed or is blocked (required for those; kept in the receipt; no secrets)")
	cmd.RegisterFlagCompletionFunc("result", cobra.FixedCompletions([]string{api.ResultCompleted, api.ResultFailed, api.ResultBlocked}, cobra.ShellCompDirectiveNoFileComp))
	attemptFlag(cmd, &args.Attempt)
	return cmd
}
