package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
)

func newCheckpointCmd(a *app.App) *cobra.Command {
	var args api.CheckpointArgs
	cmd := &cobra.Command{
		Use:   "checkpoint --lease LEASE --summary TEXT",
		Short: "Record a checkpoint of the work on a lease",
		Long: `Record where the work stands (spec section 6): a summary, the files changed,
the next action, and why it is blocked if it is. The lease is renewed too. If
the lease runs out, the next attempt's wake prompt carries the latest
checkpoint, so the work resumes where it stopped. The summary stays in the
engine's database for that prompt; receipts never contain it. A summary, next
action or file that looks like a secret is kept as "withheld (secret-looking
text)", and the command says so on stderr.

--blocked-reason says the work cannot go on without someone else: the lease
ends at once as blocked (as ` + "`lease release --result blocked`" + ` does), and the
work is woken again only when State Hub changes its task.`,
		Example: `  coordination-engine checkpoint --lease L --summary "parser done, tests pass" --file parse.go --next "wire it into the CLI"
  coordination-engine checkpoint --lease L --summary "needs the deploy key" --blocked-reason secret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if args.LeaseID == "" || args.Summary == "" {
				return app.UsageError("--lease and --summary are required")
			}
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			l, err := c.Checkpoint(cmd.Context(), args)
			if err != nil {
				return err
			}
			return printLease(a, "checkpointed", l)
		},
	}
	f := cmd.Flags()
	f.StringVar(&args.LeaseID, "lease", "", "the lease the wake prompt names")
	f.StringVar(&args.Summary, "summary", "", "what is done and what is not (plain text, up to 4 KiB)")
	f.StringArrayVar(&args.FilesChanged, "file", nil, "a file changed (repeatable)")
	f.StringVar(&args.NextAction, "next", "", "the next action")
	f.StringVar(&args.TaskID, "task", "", "the State Hub task the work is for")
	f.StringVar(&args.BlockedReason, "blocked-reason", "", "human | secret | destructive | policy | dependency | unavailable (ends the lease as blocked)")
	cmd.RegisterFlagCompletionFunc("blocked-reason", cobra.FixedCompletions([]string{"human", "secret", "destructive", "policy", "dependency", "unavailable"}, cobra.ShellCompDirectiveNoFileComp))
	attemptFlag(cmd, &args.Attempt)
	return cmd
}
