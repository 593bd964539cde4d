package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

func newLeasesCmd(a *app.App) *cobra.Command {
	var args api.LeasesArgs
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List coordination leases, newest first",
		Long: `List the engine's leases, newest first: state, attempt, repo, deadline and the
tamq message of the wake. --state narrows to one state (offered, acknowledged,
running, checkpointed, completed, retry_wait, stopped). While the engine is not
running, they are read from its database as it last wrote them (a note on
stderr says so; --json has "offline": true).`,
		Example: `  coordination-engine leases
  coordination-engine leases --state retry_wait --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			res, err := c.Leases(cmd.Context(), args)
			if errs.Is(err, errs.Unavailable) {
				// Stopped: the leases as it last wrote them still answer the question.
				st, oerr := offlineStore(cmd.Context(), a, err)
				if oerr != nil {
					return oerr
				}
				defer st.DB.Close()
				res, err = offlineLeases(cmd.Context(), st, args)
			}
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			for _, l := range res.Leases {
				due := l.ExpiresAt
				if l.NextRetryAt != nil {
					due = *l.NextRetryAt
				}
				a.Printf("%s  %-12s  %d/%d  %s  due %s  %s %s\n", l.LeaseID, l.State, l.Attempt, l.MaxAttempts, l.TargetRepo,
					due.Format(time.RFC3339), l.WakeOutcome, l.LocalLeaseID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&args.State, "state", "", "only leases in this state")
	cmd.Flags().IntVar(&args.Limit, "limit", 100, "at most this many (up to 1000)")
	return cmd
}
