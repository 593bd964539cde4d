package cli

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/top"
)

// topCallTimeout bounds each call of a refresh. Both services probe State
// Hub for up to a second inside their status, so it is longer than that; a
// service that takes longer is shown as failing that frame.
const topCallTimeout = 3 * time.Second

func newTopCmd(a *app.App) *cobra.Command {
	var (
		once     bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A refreshing view of tamq, its windows and queue, and coordination-engine",
		Long: `Show the whole system on one screen, refreshed whenever either service's
state changes, and at least every 5 seconds (--interval): the loop (the tasks
that need you, then the live work), tamq's endpoints and windows, the queue by
state, coordination-engine's leases by state and latest receipts, and State Hub
as both services see it. Each service is asked on its own: one that is down is
said so in its section.

In the loop, the arrows pick a task; Enter goes to its window (switching your
tmux client when top runs in that tmux server), e shows its explain, c its
latest checkpoint, and Esc goes back (in the main view Esc does nothing).
q or Ctrl-C quits.

--once prints one frame as plain text and exits (no terminal needed); with
--json it prints the gathered snapshot instead. See docs/top.md.`,
		Example: `  tamq top
  tamq top --once
  tamq top --once --json | jq .coordination_engine.tasks`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < top.MinInterval {
				return app.UsageError("--interval %s is too short: at least %s", interval, top.MinInterval)
			}
			if a.JSON && !once {
				return app.UsageError("--json needs --once: the refreshing view is for a terminal")
			}
			tp, err := a.Paths()
			if err != nil {
				return err
			}
			ep, err := paths.Resolve(paths.Engine, a.Getenv)
			if err != nil {
				return err
			}
			gather := func(ctx context.Context) top.Snapshot {
				return top.Gather(ctx, top.Sources{Tamq: tp, Engine: ep, Timeout: topCallTimeout, Now: a.Now})
			}
			if once {
				snap := gather(cmd.Context())
				if a.JSON {
					return a.PrintJSON(snap)
				}
				width, _ := terminalSize(a.Out)
				_, err := io.WriteString(a.Out, top.Render(snap, top.Options{Width: width}))
				return err
			}
			if _, ok := terminalSize(a.Out); !ok {
				return app.UsageError("tamq top needs a terminal; --once prints one frame as plain text")
			}
			watch := func(ctx context.Context, snap top.Snapshot, wait time.Duration) {
				top.Watch(ctx, top.Sources{Tamq: tp, Engine: ep}, snap, wait)
			}
			return top.Run(a.In, a.Out, interval, gather, watch, topActions(a, ep))
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print one frame as plain text and exit (--json: the snapshot)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "the longest between refreshes; a change refreshes at once (at least 200ms)")
	return cmd
}

// terminalSize is w's width when it is a terminal.
func terminalSize(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, true
	}
	return width, true
}
