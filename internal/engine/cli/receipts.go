package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/reltime"
)

func newReceiptsCmd(a *app.App) *cobra.Command {
	var args api.ReceiptsArgs
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "List the engine's receipts, oldest first",
		Long: `List the sanitized receipts the engine wrote for triggers, gates, lease
transitions, wakes, checkpoints, retries, stops and completions, one a line
under a header: when (relative to now), kind, status, the task and repo it is
about, the lease and attempt, and the reason. --json has the time in RFC 3339
and every field: trigger id, next retry, policy profile, config version,
detail. They never contain prompts, checkpoint summaries, message bodies or
credentials.

--task T takes those about task T (its triggers, their leases and wakes, and
what an agent relayed about it); --lease L those of lease L; --trigger ID
those of one trigger, by the engine's trigger id (trigger_id in --json, as
wake and explain print it); an id that is no trigger is an error, not an
empty list. While the engine is not running, they are read from its database
as it last wrote them (a note on stderr says so; --json has "offline": true).`,
		Example: `  coordination-engine receipts --task T-1
  coordination-engine receipts --lease 0197b2c4-5d1e-7c3a-9f00-1a2b3c4d5e6f --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			// Stopped: every receipt it wrote is in its database.
			res, err := askOrRead(cmd.Context(), a, func() (api.ReceiptsResult, error) { return c.Receipts(cmd.Context(), args) },
				func(st *store.Store) (api.ReceiptsResult, error) { return offlineReceipts(cmd.Context(), st, args) })
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			a.Printf("%s", receiptsTable(res.Receipts, a.Now()))
			return nil
		},
	}
	cmd.Flags().StringVar(&args.TaskID, "task", "", "only receipts about this task")
	cmd.Flags().StringVar(&args.LeaseID, "lease", "", "only receipts of this lease")
	cmd.Flags().StringVar(&args.TriggerID, "trigger", "", "only receipts of this trigger (its id, as trigger_id in --json)")
	cmd.Flags().IntVar(&args.Limit, "limit", 1000, "at most this many, the latest (up to 1000)")
	return cmd
}

// receiptsTable is the receipt listing as a person reads it.
func receiptsTable(rs []api.Receipt, now time.Time) string {
	t := newTable("WHEN", "KIND", "STATUS", "TASK", "REPO", "LEASE", "REASON")
	for _, r := range rs {
		l := r.LeaseID
		if l != "" && r.Attempt > 0 {
			l += fmt.Sprintf("#%d", r.Attempt)
		}
		t.row(reltime.Ago(r.At, now), r.Kind, r.Status, r.TaskID, r.Repo, l, r.Reason)
	}
	return t.String()
}
