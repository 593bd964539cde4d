package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newStartCmd(a *app.App) *cobra.Command {
	var (
		f       app.ServeFlags
		detach  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the engine unless it is running",
		Long: `Start coordination-engine unless it already answers (exit 0 either way,
unless the running engine reads another State Hub than this start would: then
exit 21, already_running, naming both, since the engine does not switch by
itself; run stop, then start). Like serve it stays in the foreground unless
--detach is given; detached, it runs in a new session and logs to
coordination-engine.log in its state directory. Starts are lock-protected: any
number of concurrent starts leave exactly one engine. If the engine cannot
start, the reason is printed and the exit status is non-zero.`,
		Example: `  coordination-engine start --detach
  coordination-engine start --detach --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.StartPaths()
			if err != nil {
				return err
			}
			if res, err := daemon.Ping(cmd.Context(), p); err == nil {
				if err := sameStateHub(cmd.Context(), a, p, res.PID); err != nil {
					return err
				}
				return a.ReportStart(res, true)
			}
			if !detach {
				return runService(cmd.Context(), a, f)
			}
			return a.StartDetached(cmd.Context(), f, nil, timeout)
		},
	}
	f.Register(cmd, "prompts")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "run the engine in the background")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the engine to become ready")
	return cmd
}

// sameStateHub refuses a start that asks for another State Hub than the
// running engine's (say STATEHUB_API_BASE set for this start only): "already
// running" alone would let the user believe the engine now reads the State
// Hub they named. A config that does not load is left to the engine's own
// checks, and a status that does not come back is not this start's to judge:
// both keep the plain "already running".
func sameStateHub(ctx context.Context, a *app.App, p paths.Paths, pid int) error {
	cfg, err := a.Config()
	if err != nil {
		return nil
	}
	r, err := client.New(p).Status(ctx)
	if err != nil || !r.Service.Running {
		return nil
	}
	// The status's address is redacted already; this one is redacted the
	// same way so that they compare, and so that no secret is printed.
	kind, base := cfg.StateHub.HubKind(), textsafe.RedactURL(cfg.StateHub.APIBase)
	if r.StateHub.Kind == kind && r.StateHub.APIBase == base {
		return nil
	}
	why := ""
	for _, o := range cfg.Overrides {
		if strings.HasPrefix(o, "statehub.") {
			why = " (" + o + ")"
		}
	}
	return errs.New(errs.AlreadyRunning,
		"coordination-engine is already running (pid %d) with State Hub %s at %s, not %s at %s as this start asks%s",
		pid, r.StateHub.Kind, r.StateHub.APIBase, kind, base, why).
		WithHint("to switch, run `coordination-engine stop`, then this start again; to keep the running engine, start without the new setting")
}
