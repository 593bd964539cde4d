package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

func newTaskSetCmd(a *app.App) *cobra.Command {
	var args api.TaskSetArgs
	cmd := &cobra.Command{
		Use:   "set TASK --status done|blocked|in_progress [--note TEXT]",
		Short: "Set a task's status in State Hub",
		Long: `Set the status of a State Hub task: done when the work is finished (mark it
done before releasing the lease: the tasks that wait on it become
actionable), blocked when it cannot go on, in_progress while it is worked on.
The others (todo, ready, cancelled) are a person's to set.

The State Hub contract takes it as PATCH /v1/tasks/{id}. GitHub Issues: done
closes the issue as completed, blocked and in_progress are the labels
blocked and in-progress (each taking the other off; names configurable).

--note goes to the tracker with the status (for GitHub, as one comment on
the issue): one line of plain text, at most 500 bytes, never a secret (a
note that looks like one is not sent). Receipts record the task id and the
status, never the note.`,
		Example: `  coordination-engine task set T-7 --status done
  coordination-engine task set T-7 --status blocked --note "needs the staging database"
  coordination-engine task set 'octo-org/alpha#12' --status done --note "merged in a1b2c3d"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			args.TaskID = pos[0]
			if args.Status == "" {
				return app.UsageError("--status is required: %s", strings.Join(api.TaskSetStatuses, ", "))
			}
			if err := args.Check(); err != nil {
				return app.UsageError("%s", err.(*errs.Error).Message)
			}
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			res, err := c.TaskSet(cmd.Context(), args)
			switch {
			case err != nil:
				return err
			case a.JSON:
				return a.PrintJSON(res)
			case !a.Quiet:
				a.Printf("task %s set to %s in State Hub\n", res.TaskID, res.Status)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&args.Status, "status", "", strings.Join(api.TaskSetStatuses, " | "))
	f.StringVar(&args.Note, "note", "", "one line for the tracker (at most 500 bytes; no secrets)")
	cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(api.TaskSetStatuses, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
