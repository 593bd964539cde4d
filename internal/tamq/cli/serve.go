package cli

import (
	"context"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/service"
)

// serviceFlags are the flags of serve and start that shape the service.
type serviceFlags struct {
	orwell   bool
	notifyFD int
	restore  bool
	recreate []string
}

func (f *serviceFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.orwell, "orwell", false,
		"UNSAFE diagnostics: also log message bodies and other omitted fields to a private local file (needs a policy profile that allows orwell_diagnostics)")
}

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
			return runService(cmd.Context(), a, f, a.Err)
		},
	}
	f.register(cmd)
	// Set by `start --detach` for the child it spawns.
	cmd.Flags().IntVar(&f.notifyFD, "notify-fd", 0, "report readiness on this descriptor")
	cmd.Flags().MarkHidden("notify-fd")
	cmd.Flags().BoolVar(&f.restore, "restore", false, "reopen the recorded windows (what start does)")
	cmd.Flags().MarkHidden("restore")
	cmd.Flags().StringArrayVar(&f.recreate, "recreate", nil, "with --restore: a tmux socket whose windows come back even if its server is gone")
	cmd.Flags().MarkHidden("recreate")
	return cmd
}

// runService runs the service until a signal or a stop request.
func runService(ctx context.Context, a *app.App, f serviceFlags, stderr io.Writer) (err error) {
	detached := f.notifyFD > 0
	notified := false
	// A detached start waits for exactly one report: ready, or why not.
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
	var orwell io.WriteCloser
	if f.orwell {
		if orwell, err = daemon.OpenOrwell(p, cfg.Policy.Profile, cfg.ActiveProfile(), cfg.ProfileRef(), a.Err); err != nil {
			return err
		}
		defer orwell.Close()
	}
	engine, err := paths.Resolve(paths.Engine, a.Getenv)
	if err != nil {
		return err
	}
	ctx, stopSignals := daemon.SignalContext(ctx)
	defer stopSignals()

	opts := service.Options{
		Paths: p, Engine: engine, Config: cfg, Registry: a.Registry, Log: a.Logger(),
		Notices: stderr, Detached: detached, Restore: f.restore, Recreate: f.recreate,
	}
	if orwell != nil {
		opts.Orwell = orwell
	}
	// A diagnostic for performance work: a CPU profile of the whole run.
	if path := a.Getenv("TAMQ_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	svc, err := service.Start(ctx, opts)
	if err != nil {
		return err
	}
	notify(nil)
	return svc.Run(ctx)
}
