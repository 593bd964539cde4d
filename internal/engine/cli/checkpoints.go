package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/reltime"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newCheckpointsCmd(a *app.App) *cobra.Command {
	var args api.CheckpointsArgs
	cmd := &cobra.Command{
		Use:   "checkpoints",
		Short: "List the checkpoints agents recorded, newest first",
		Long: `List the checkpoints the engine recorded, newest first: when (relative to
now), the lease and attempt, the task, then the agent's summary, next action,
changed files and blocked reason. --json has the time in RFC 3339. --task T
takes those about task T, --lease L those of lease L.

Checkpoints stay on this machine: their text is the agents' words about
their work, never published to State Hub and never in a receipt. It is
printed escaped, so nothing in it can act in the terminal. While the engine
is not running, they are read from its database as it last wrote them (a
note on stderr says so; --json has "offline": true).`,
		Example: `  coordination-engine checkpoints
  coordination-engine checkpoints --task T-1 --limit 1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			// Stopped: every checkpoint it recorded is in its database.
			res, err := askOrRead(cmd.Context(), a, func() (api.CheckpointsResult, error) { return c.Checkpoints(cmd.Context(), args) },
				func(st *store.Store) (api.CheckpointsResult, error) {
					return offlineCheckpoints(cmd.Context(), st, args)
				})
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			a.Printf("%s", checkpointsText(res.Checkpoints, a.Now()))
			return nil
		},
	}
	cmd.Flags().StringVar(&args.TaskID, "task", "", "only checkpoints about this task")
	cmd.Flags().StringVar(&args.LeaseID, "lease", "", "only checkpoints of this lease")
	cmd.Flags().IntVar(&args.Limit, "limit", 100, "at most this many, the newest (up to 1000)")
	return cmd
}

// offlineCheckpoints is the checkpoint listing read from the database, as
// the engine answers it, every page of it.
func offlineCheckpoints(ctx context.Context, st *store.Store, args api.CheckpointsArgs) (api.CheckpointsResult, error) {
	var err error
	out := api.CheckpointsResult{Offline: true}
	out.Checkpoints, err = api.Gather(args.Offset, args.Limit, func(offset, limit int) ([]api.Checkpoint, bool, error) {
		args.Offset, args.Limit = offset, limit
		res, err := service.ListCheckpoints(ctx, st, args)
		return res.Checkpoints, res.More, err
	})
	return out, err
}

// checkpointsText is the checkpoint listing as a person reads it: a head
// line each, then the agent's words indented, one line each. Every text is
// escaped whole (a newline too): an agent's summary must not pass for
// another checkpoint, nor act in the terminal.
func checkpointsText(cs []api.Checkpoint, now time.Time) string {
	esc := textsafe.Escape
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s  lease %s", reltime.Ago(c.RecordedAt, now), esc(c.LeaseID))
		if c.Attempt > 0 {
			fmt.Fprintf(&b, " attempt %d", c.Attempt)
		}
		if c.TaskID != "" {
			fmt.Fprintf(&b, "  task %s", esc(c.TaskID))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "  summary: %s\n", esc(c.Summary))
		if c.NextAction != "" {
			fmt.Fprintf(&b, "  next:    %s\n", esc(c.NextAction))
		}
		if len(c.FilesChanged) > 0 {
			files := make([]string, len(c.FilesChanged))
			for j, f := range c.FilesChanged {
				files[j] = esc(f)
			}
			fmt.Fprintf(&b, "  files:   %s", strings.Join(files, ", "))
			if c.FilesOmitted > 0 {
				fmt.Fprintf(&b, " and %d more (too many to list)", c.FilesOmitted)
			}
			b.WriteString("\n")
		}
		if c.BlockedReason != "" {
			fmt.Fprintf(&b, "  blocked: %s\n", esc(c.BlockedReason))
		}
	}
	return b.String()
}
