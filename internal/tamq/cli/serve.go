package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/service"
)

// serviceFlags are the flags of serve and start that shape the service:
// both programs' own, and tamq's workspace restore.
type serviceFlags struct {
	app.ServeFlags
	restore  bool
	recreate []string
}

func (f *serviceFlags) register(cmd *cobra.Command) { f.Register(cmd, "message bodies") }

func newServeCmd(a *app.App) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service in the foreground, logging to stderr",
		Long: `Run tamq's service in the foreground: it owns the message database and listens
on the Unix socket (mode 0600, same user only). It logs to stderr and stops on
SIGTERM or SIGINT within the configured grace period, keeping queues for the next
start. Use 'tamq start --detach' to run it in the background.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runService(cmd.Context(), a, f)
		},
	}
	f.register(cmd)
	f.RegisterNotify(cmd)
	cmd.Flags().BoolVar(&f.restore, "restore", false, "reopen the recorded windows (what start does)")
	cmd.Flags().MarkHidden("restore")
	cmd.Flags().StringArrayVar(&f.recreate, "recreate", nil, "with --restore: a tmux socket whose windows come back even if its server is gone")
	cmd.Flags().MarkHidden("recreate")
	return cmd
}

// runService runs the service until a signal or a stop request.
func runService(ctx context.Context, a *app.App, f serviceFlags) error {
	engine, err := paths.Resolve(paths.Engine, a.Getenv)
	if err != nil {
		return err
	}
	return a.Serve(ctx, f.ServeFlags, func(d app.Daemon) (app.Runner, error) {
		opts := service.Options{
			Paths: d.Paths, Engine: engine, Config: d.Config, Registry: a.Registry, Addresses: a.WatchedRegistry,
			Log: a.Logger(), Notices: a.Err, Detached: d.Detached, Restore: f.restore, Recreate: f.recreate,
		}
		if d.Orwell != nil {
			opts.Orwell = d.Orwell
		}
		return service.Start(d.Ctx, opts)
	})
}
