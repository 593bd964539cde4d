package cli

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamqclient"
)

func newServeCmd(a *app.App) *cobra.Command {
	var f app.ServeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine in the foreground, logging to stderr",
		Long: `Run coordination-engine in the foreground: it owns its lease database and
listens on its Unix socket (mode 0600, same user only). It logs to stderr and
stops on SIGTERM or SIGINT within the configured grace period: no new leases,
the transaction under way finished, endpoints marked detached, a shutdown
receipt written; leases stay for the next start. Use 'coordination-engine start
--detach' to run it in the background.`,
		Example: `  coordination-engine serve
  coordination-engine serve --verbose`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runService(cmd.Context(), a, f)
		},
	}
	f.Register(cmd, "prompts")
	f.RegisterNotify(cmd)
	return cmd
}

// memoryLimit is the engine's soft memory limit unless GOMEMLIMIT sets one.
// A look that sees State Hub change decodes every workplan again (some
// 20 MB of garbage for 10,000 tasks); without a limit the runtime lets the
// heap grow to twice what is live before it collects, and a burst of changes
// took the engine to 50 MB. With it, it collects sooner during the burst.
const memoryLimit = 24 << 20

// runService runs the engine until a signal or a stop request.
func runService(ctx context.Context, a *app.App, f app.ServeFlags) error {
	if a.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	tp, err := paths.Resolve(paths.Tamq, a.Getenv)
	if err != nil {
		return err
	}
	var claims *cluster.Late
	defer func() {
		if claims != nil {
			claims.Close()
		}
	}()
	return a.Serve(ctx, f, func(d app.Daemon) (app.Runner, error) {
		opts := service.Options{
			Paths: d.Paths, Config: d.Config, Registry: a.Registry, Log: a.Logger(), Detached: d.Detached,
			Tamq: tamqclient.New(tp), TamqSocket: tp.Socket, HostID: d.Config.Cluster.HostID,
		}
		if d.Orwell != nil {
			opts.Orwell = d.Orwell
		}
		if d.Config.ClusterOn() {
			// The engine's id in its claims is filled by the service, from
			// its database. An etcd away at the start is waited for as one
			// that goes away later (work waits); a refused login stops the
			// start.
			var err error
			if claims, err = cluster.OpenLate(d.Ctx, cluster.ConfigFrom(d.Config.Cluster, "")); err != nil {
				return nil, err
			}
			opts.Cluster = claims
		}
		if opts.HostID == "" {
			// Receipts name the host even without a cluster.
			opts.HostID, _ = os.Hostname()
		}
		return service.Start(d.Ctx, opts)
	})
}
