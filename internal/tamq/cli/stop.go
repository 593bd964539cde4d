package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/client"
)

type stopRecord struct {
	WasRunning bool `json:"was_running"`
	PID        int  `json:"pid,omitempty"`
}

func newStopCmd(a *app.App) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the service (tmux windows and queues stay)",
		Long: `Ask the service to stop and wait until it has. Only the service stops: tmux
windows, their agents and the message queue are left as they are, and queued
messages are delivered after the next start. Stopping a service that is not
running is not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			res, err := client.New(p).Stop(cmd.Context())
			if errs.Is(err, errs.Unavailable) {
				if a.JSON {
					return a.PrintJSON(stopRecord{})
				}
				a.Printf("tamq is not running\n")
				return nil
			}
			if err != nil {
				return err
			}
			wait := timeout
			if wait == 0 {
				wait = time.Duration(res.GraceSeconds*float64(time.Second)) + 5*time.Second
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			if err := daemon.WaitGone(ctx, p, res.PID); err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(stopRecord{WasRunning: true, PID: res.PID})
			}
			a.Printf("tamq stopped (pid %d)\n", res.PID)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the service to exit (default: its grace period + 5s)")
	return cmd
}
