package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

func newReceiptsCmd(a *app.App) *cobra.Command {
	var args api.ReceiptsArgs
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "List the engine's receipts, oldest first",
		Long: `List the sanitized receipts the engine wrote for triggers, gates, lease
transitions, wakes, checkpoints, retries, stops and completions: identifiers,
status, reason, attempt, next retry, policy profile and config version. They
never contain prompts, checkpoint summaries, message bodies or credentials.
While the engine is not running, they are read from its database as it last
wrote them (a note on stderr says so; --json has "offline": true).`,
		Example: `  coordination-engine receipts --lease 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f
  coordination-engine receipts --trigger T --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			res, err := c.Receipts(cmd.Context(), args)
			if errs.Is(err, errs.Unavailable) {
				// Stopped: every receipt it wrote is in its database.
				st, oerr := offlineStore(cmd.Context(), a, err)
				if oerr != nil {
					return oerr
				}
				defer st.DB.Close()
				res, err = offlineReceipts(cmd.Context(), st, args)
			}
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			for _, r := range res.Receipts {
				a.Printf("%s  %-20s %-12s", r.At.Format(time.RFC3339), r.Kind, r.Status)
				if r.LeaseID != "" {
					a.Printf("  lease %s#%d", r.LeaseID, r.Attempt)
				}
				if r.Reason != "" {
					a.Printf("  %s", r.Reason)
				}
				a.Printf("\n")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&args.LeaseID, "lease", "", "only receipts of this lease")
	cmd.Flags().StringVar(&args.TriggerID, "trigger", "", "only receipts of this trigger")
	cmd.Flags().IntVar(&args.Limit, "limit", 1000, "at most this many (up to 1000)")
	return cmd
}
