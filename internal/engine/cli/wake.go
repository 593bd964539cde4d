package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newWakeCmd(a *app.App) *cobra.Command {
	var args api.WakeArgs
	cmd := &cobra.Command{
		Use:   "wake REPO [--task T [--override-gate GATE]] [--endpoint ID] [--force]",
		Short: "Wake a repo's agent now (a manual trigger)",
		Long: `Wake the agent of a gita-registered repo now, through exactly the path an
observed State Hub change takes: a trigger, the gates, a lease, and the wake
prompt queued by tamq into the repo's window.

One live lease per task, whoever asks: with --task naming a task whose lease
lives, wake prints that lease and sends nothing. One lease at a time per repo:
without --task, a repo whose agent holds a live lease is refused (exit 13)
unless --force adds a second one.

When no window can take the wake now (no window for the repo, tamq not
attached, the window in manual mode, no agent running in it, its agent busy
with other work), the trigger waits and wake says for what (exit 0): it is
woken as soon as that changes. With several endpoints hosting the repo, name
one with --endpoint. A trigger stopped at a gate prints why and exits 0 (the
stop is the result, with its receipt); an unregistered repo is refused.

A task stopped at a gate (human, secret, destructive, policy, …) stays
stopped: wake --task prints the gate. A person who has looked and means to
go through says so with --override-gate GATE, naming that gate; the override
is recorded in a gate.overridden receipt. Only the operator may wake: the
command is refused from inside tamq's windows.`,
		Example: `  coordination-engine wake net-kingdom
  coordination-engine wake net-kingdom --task T-42
  coordination-engine wake net-kingdom --endpoint tmux-amq-4242
  coordination-engine wake net-kingdom --task T-42 --override-gate human`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.CompleteRepos(a),
		RunE: func(cmd *cobra.Command, pos []string) error {
			args.Repo = pos[0]
			if args.OverrideGate != "" && args.Task == "" {
				return app.UsageError("--override-gate needs --task: a gate belongs to a task")
			}
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
			esc := textsafe.Escape
			switch {
			case res.Stopped != "":
				a.Printf("trigger %s stopped at gate %s: %s\n", res.Trigger.ID, res.Stopped, esc(res.Reason))
				return nil
			case res.Waiting != "":
				a.Printf("trigger %s waiting (%s): %s; it is woken as soon as that changes\n", res.Trigger.ID, res.Waiting, esc(res.Reason))
				return nil
			}
			l := res.Lease
			if res.Existing {
				a.Printf("task %s already has lease %s: %s, attempt %d of %d; nothing new was sent\n", esc(args.Task), l.LeaseID, l.State, l.Attempt, l.MaxAttempts)
				return nil
			}
			a.Printf("trigger %s: lease %s offered to %s (attempt %d of %d)", res.Trigger.ID, l.LeaseID, l.TargetRepo, l.Attempt, l.MaxAttempts)
			switch {
			case l.State == "retry_wait":
				a.Printf("; tamq: no window can take it now, it waits for one\n")
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
	cmd.Flags().BoolVar(&args.Force, "force", false, "add a lease even though the repo's agent holds one")
	cmd.Flags().StringVar(&args.OverrideGate, "override-gate", "", "wake the task through this gate, which stops it (recorded in a receipt)")
	return cmd
}
