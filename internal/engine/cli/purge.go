package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
)

func newPurgeCmd(a *app.App) *cobra.Command {
	var before string
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge [--before AGE|DATE] [--yes]",
		Short: "Delete old history the engine no longer decides by (a dry run unless --yes)",
		Long: `Delete what the engine keeps only as history, older than --before: receipts
State Hub has received, leases that ended (completed or stopped) with their
checkpoints, and triggers in a final state that a newer trigger of the same
task or message replaced. What still decides anything stays: the newest
trigger of each task and message (so blocked work stays blocked and done work
is not woken again), live leases, and receipts not yet published.

Without --yes it counts what would go and deletes nothing. --before defaults
to coordination.retention_days (90 days), which the running engine also
applies by itself every few hours. The engine must be running; only the
operator may purge (not an agent in a window).`,
		Example: `  coordination-engine purge
  coordination-engine purge --before 30d --yes
  coordination-engine purge --before 2026-01-01 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.Config()
			if err != nil {
				return err
			}
			now := a.Now()
			args := api.PurgeArgs{DryRun: !yes}
			switch {
			case before != "":
				if args.Before, err = app.ParseTime("before", before, now); err != nil {
					return err
				}
			case cfg.Coordination.RetentionDays > 0:
				args.Before = now.Add(-time.Duration(cfg.Coordination.RetentionDays) * 24 * time.Hour)
			default:
				return app.UsageError("coordination.retention_days is 0 (keep everything): name a cutoff with --before")
			}
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			res, err := c.Purge(cmd.Context(), args)
			switch {
			case err != nil:
				return err
			case a.JSON:
				return a.PrintJSON(res)
			}
			verb := "deleted"
			if res.DryRun {
				verb = "would delete"
			}
			a.Printf("history before %s: %s %d receipts, %d leases, %d checkpoints, %d triggers\n", res.Before.Format(time.RFC3339),
				verb, res.Receipts, res.Leases, res.Checkpoints, res.Triggers)
			if res.DryRun && res.Receipts+res.Leases+res.Checkpoints+res.Triggers > 0 {
				a.Notef("dry run: nothing deleted; pass --yes to delete")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "history older than this: an age (30d, 12h) or a date (default: coordination.retention_days)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete (without it, only count)")
	return cmd
}
