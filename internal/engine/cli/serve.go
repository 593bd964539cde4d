package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/paths"
	tamqclient "github.com/tmux-amq/tamq/internal/tamq/client"
)

// serviceFlags are the flags of serve and start that shape the engine.
type serviceFlags struct {
	orwell   bool
	notifyFD int
}

func (f *serviceFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.orwell, "orwell", false,
		"UNSAFE diagnostics: also log prompts and other omitted fields to a private local file (needs a policy profile that allows orwell_diagnostics)")
}

func newServeCmd(a *app.App) *cobra.Command {
	var f serviceFlags
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
	f.register(cmd)
	cmd.Flags().IntVar(&f.notifyFD, "notify-fd", 0, "report readiness on this descriptor")
	cmd.Flags().MarkHidden("notify-fd")
	return cmd
}

// runService runs the engine until a signal or a stop request.
func runService(ctx context.Context, a *app.App, f serviceFlags) (err error) {
	detached := f.notifyFD > 0
	notified := false
	notify := func(startErr error) {
		if detached && !notified {
			notified = true
			daemon.NotifyReady(f.notifyFD, startErr)
		}
	}
	defer func() { notify(err) }()
	p, err := a.Paths()
	if err != nil {
		return err
	}
	cfg, err := a.Config()
	if err != nil {
		return err
	}
	tp, err := paths.Resolve(paths.Tamq, a.Getenv)
	if err != nil {
		return err
	}
	var orwell io.WriteCloser
	if f.orwell {
		if orwell, err = daemon.OpenOrwell(p, cfg.Policy.Profile, cfg.ActiveProfile(), cfg.ProfileRef(), a.Err); err != nil {
			return err
		}
		defer orwell.Close()
	}
	ctx, stopSignals := daemon.SignalContext(ctx)
	defer stopSignals()
	opts := service.Options{
		Paths: p, Config: cfg, Registry: a.Registry, Log: a.Logger(), Detached: detached,
		Tamq: tamqclient.New(tp), TamqSocket: tp.Socket,
	}
	if orwell != nil {
		opts.Orwell = orwell
	}
	svc, err := service.Start(ctx, opts)
	if err != nil {
		return err
	}
	notify(nil)
	return svc.Run(ctx)
}
