package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/service"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/tmux"
)

func newStartCmd(a *app.App) *cobra.Command {
	var (
		f          serviceFlags
		detach     bool
		timeout    time.Duration
		tmuxSocket string
	)
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the service unless it is running",
		Long: `Start tamq's service unless it already answers (exit 0 either way). Like serve
it stays in the foreground unless --detach is given; detached, it runs in a new
session and logs to tamq.log in the state directory. It also brings back the
workspace, whether the service was running or not: the windows recorded by
earlier opens (with their command and mode) whose agent was running are reused
or opened again on every tmux server that runs, and on the server of
--tmux-socket (default: tmux's own), which is started again after a reboot. A
window whose agent exited, or that was closed, is left as it is, and start
names it: no command is run again. Servers of other sockets that are gone are
left alone. Starts are lock-protected: any number of concurrent starts leave
exactly one service. If the service cannot start, the reason is printed and the
exit status is non-zero. A start that starts the service prints the history
advisory on stderr when the history is over 100 MB (the detached service only
logs it).`,
		Example: `  tamq start --detach
  tamq start --detach --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.StartPaths()
			if err != nil {
				return err
			}
			// Like the spec says, start also brings back the recorded windows.
			recreate := tmux.ChoosePath(tmuxSocket, a.Getenv)
			if res, err := daemon.Ping(cmd.Context(), p); err == nil {
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				if _, err := client.New(p).Restore(ctx, []string{recreate}); err != nil {
					return err
				}
				if err := a.ReportStart(res, true); err != nil {
					return err
				}
				reportLeftAsTheyWere(cmd.Context(), a, p)
				return nil
			}
			f.restore, f.recreate = true, []string{recreate}
			if !detach {
				return runService(cmd.Context(), a, f)
			}
			if err := a.StartDetached(cmd.Context(), f.ServeFlags, []string{"--restore", "--recreate", recreate}, timeout); err != nil {
				return err
			}
			printHistoryAdvisory(cmd.Context(), a)
			reportLeftAsTheyWere(cmd.Context(), a, p)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "run the service in the background")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the service to become ready")
	cmd.Flags().StringVar(&tmuxSocket, "tmux-socket", "", "the tmux server whose windows come back even if it is gone: a socket name as tmux -L, or a path as tmux -S (default: the server tmux would use)")
	return cmd
}

// reportLeftAsTheyWere says which recorded windows start left as they were
// (their agent exited, or they were closed) and how to run them again, so
// that a person who expected them back is not left to guess. The service
// has restored the workspace before it answers anyone, so its status
// already says how each window ended. Only in words: status --json has the
// same, and a failure to ask leaves it to status and doctor.
func reportLeftAsTheyWere(ctx context.Context, a *app.App, p paths.Paths) {
	if a.JSON || a.Quiet {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := client.New(p).Status(sctx)
	if err != nil {
		return
	}
	e := endedWindowsOf(st.Endpoints)
	for _, line := range e.ended {
		a.Printf("left as it was: %s\n", line)
	}
	if len(e.ended) > 0 {
		a.Printf("%s\n", e.rerunHint())
	}
}

// printHistoryAdvisory prints the spec's history advisory on stderr, once,
// when a command has just started a detached service (start --detach,
// open): the service prints it at start, but a detached one only into its
// log, which nobody reads then. It reads the database read-only, as the
// service measures it; when that fails, the service's own log line stands.
func printHistoryAdvisory(ctx context.Context, a *app.App) {
	if a.Quiet {
		return
	}
	p, err := a.Paths()
	if err != nil {
		return
	}
	cfg, err := a.Config()
	if err != nil {
		return
	}
	db, ok, err := openHistoryAt(ctx, p, cfg)
	if err != nil || !ok {
		return
	}
	defer db.Close()
	size, since, _, err := store.HistorySize(ctx, db)
	if err != nil {
		return
	}
	if msg := service.HistoryAdvisory(size, since, service.AdvisoryLimit); msg != "" {
		fmt.Fprintln(a.Err, msg)
	}
}
