package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/reltime"
)

func newLeasesCmd(a *app.App) *cobra.Command {
	var args api.LeasesArgs
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List coordination leases, newest first",
		Long: `List the engine's leases, newest first, one a line under a header: lease id,
task, repo, state, attempt of the most it may make, who acknowledged the
attempt (broker: tamq saw its agent take the prompt; agent: its own command)
and when, and its deadline ("in 4m10s"; "retry at 14:05:10" while it waits
for its next attempt; when it ended), then tamq's answer to the wake. Times
are relative to now; --json has them in RFC 3339, with task_id, acked_by
and acked_at. --state narrows to one state (offered, acknowledged, running,
checkpointed, completed, retry_wait, stopped). While the engine is not
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
			// Stopped: the leases as it last wrote them still answer the question.
			res, err := askOrRead(cmd.Context(), a, func() (api.LeasesResult, error) { return c.Leases(cmd.Context(), args) },
				func(st *store.Store) (api.LeasesResult, error) { return offlineLeases(cmd.Context(), st, args) })
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			a.Printf("%s", leasesTable(res.Leases, a.Now()))
			return nil
		},
	}
	cmd.Flags().StringVar(&args.State, "state", "", "only leases in this state")
	cmd.Flags().IntVar(&args.Limit, "limit", 100, "at most this many (up to 1000)")
	return cmd
}

// leasesTable is the lease listing as a person reads it.
func leasesTable(ls []api.Lease, now time.Time) string {
	t := newTable("LEASE", "TASK", "REPO", "STATE", "ATTEMPT", "ACKED BY", "EXPIRES", "WAKE")
	for _, l := range ls {
		acked := ""
		if l.AckedBy != "" {
			acked = l.AckedBy
			if l.AckedAt != nil {
				acked += " " + reltime.Ago(*l.AckedAt, now)
			}
		}
		t.row(l.LeaseID, l.TaskID, l.TargetRepo, l.State, fmt.Sprintf("%d/%d", l.Attempt, l.MaxAttempts), acked,
			leaseDue(l, now), l.WakeOutcome)
	}
	return t.String()
}

// leaseDue is when a lease is next due: its deadline while it lives, its
// next attempt in retry_wait, when it ended otherwise.
func leaseDue(l api.Lease, now time.Time) string {
	switch {
	case l.NextRetryAt != nil:
		return "retry at " + reltime.ClockTime(*l.NextRetryAt, now)
	case !lease.State(l.State).Live():
		return "ended " + reltime.Ago(l.UpdatedAt, now)
	default:
		return reltime.Until(l.ExpiresAt, now)
	}
}
