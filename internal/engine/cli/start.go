package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
)

type startRecord struct {
	Running        bool   `json:"running"`
	AlreadyRunning bool   `json:"already_running"`
	PID            int    `json:"pid"`
	Socket         string `json:"socket"`
	LogFile        string `json:"log_file,omitempty"`
}

func newStartCmd(a *app.App) *cobra.Command {
	var (
		f       serviceFlags
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
			p, err := a.Paths()
			if err != nil {
				return err
			}
			cfg, err := a.Config()
			if err != nil {
				return err
			}
			if f.orwell && detach {
				// Refuse here, where the operator sees it, not in the child's log.
				if _, err := daemon.OpenOrwell(p, cfg.Policy.Profile, cfg.ActiveProfile(), cfg.ProfileRef(), a.Err); err != nil {
					return err
				}
			}
			if res, err := daemon.Ping(cmd.Context(), p); err == nil {
				return reportStart(a, res, true, p.Socket, "")
			}
			if !detach {
				return runService(cmd.Context(), a, f)
			}
			exe, err := os.Executable()
			if err != nil {
				return errs.Wrap(errs.Internal, err, "cannot find the coordination-engine executable")
			}
			childArgs := []string{"serve"}
			if f.orwell {
				childArgs = append(childArgs, "--orwell")
			}
			if a.Verbose {
				childArgs = append(childArgs, "--verbose")
			}
			if a.JSON {
				childArgs = append(childArgs, "--json")
			}
			res, err := daemon.EnsureRunning(cmd.Context(), daemon.Options{Paths: p, Exe: exe, Args: childArgs, Timeout: timeout})
			if err != nil {
				return err
			}
			return reportStart(a, res.Ping, res.AlreadyRunning, p.Socket, p.LogFile)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "run the engine in the background")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the engine to become ready")
	return cmd
}

func reportStart(a *app.App, res daemon.PingResult, already bool, socket, logFile string) error {
	if a.JSON {
		return a.PrintJSON(startRecord{Running: true, AlreadyRunning: already, PID: res.PID, Socket: socket, LogFile: logFile})
	}
	if already {
		a.Printf("coordination-engine is already running (pid %d, socket %s)\n", res.PID, socket)
		return nil
	}
	a.Printf("coordination-engine started (pid %d, socket %s, log %s)\n", res.PID, socket, logFile)
	return nil
}
