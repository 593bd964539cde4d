package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
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
		Long: `Start coordination-engine unless it already answers (exit 0 either way). Like
serve it stays in the foreground unless --detach is given; detached, it runs in
a new session and logs to coordination-engine.log in its state directory.
Starts are lock-protected: any number of concurrent starts leave exactly one
engine. If the engine cannot start, the reason is printed and the exit status
is non-zero.`,
		Example: `  coordination-engine start --detach
  coordination-engine start --detach --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.StartPaths()
			if err != nil {
				return err
			}
			if res, err := daemon.Ping(cmd.Context(), p); err == nil {
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
