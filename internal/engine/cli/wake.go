package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/api"
)

func newWakeCmd(a *app.App) *cobra.Command {
	var args api.WakeArgs
	cmd := &cobra.Command{
		Use:   "wake REPO",
		Short: "Wake a repo's agent now (a manual trigger)",
		Long: `Wake the agent of a gita-registered repo now, through exactly the path an
observed State Hub change takes: a trigger, the gates, a lease, and the wake
prompt queued by tamq into the repo's window. Exactly one attached tamq
endpoint must host the repo in trigger mode; with several, name one with
--endpoint. A trigger stopped at a gate prints why and exits 0 (the stop is
the result, with its receipt); an unregistered repo is refused.`,
		Example: `  coordination-engine wake net-kingdom
  coordination-engine wake net-kingdom --task T-42
  coordination-engine wake net-kingdom --endpoint tmux-amq-4242`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.CompleteRepos(a),
		RunE: func(cmd *cobra.Command, pos []string) error {
			args.Repo = pos[0]
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			res, err := c.Wake(cmd.Context(), args)
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			if res.Stopped != "" {
				a.Printf("trigger %s stopped at gate %s: %s\n", res.Trigger.ID, res.Stopped, res.Reason)
				return nil
			}
			l := res.Lease
			a.Printf("trigger %s: lease %s offered to %s (attempt %d of %d)", res.Trigger.ID, l.LeaseID, l.TargetRepo, l.Attempt, l.MaxAttempts)
			switch {
			case l.WakeOutcome != "":
				a.Printf("; tamq: %s, message %s\n", l.WakeOutcome, l.LocalLeaseID)
			default:
				a.Printf("; tamq has not answered yet, the engine keeps trying\n")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&args.Task, "task", "", "the State Hub task the wake is about")
	cmd.Flags().StringVar(&args.EndpointID, "endpoint", "", "the tamq endpoint (tmux-amq-<pid>) or coordination endpoint id to use")
	return cmd
}
