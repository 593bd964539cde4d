package app

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
)

type stopRecord struct {
	WasRunning bool `json:"was_running"`
	PID        int  `json:"pid,omitempty"`
}

// NewStopCmd is both programs' stop: ask the service to stop and wait until
// it has; the program's data stays.
func NewStopCmd(a *App, short, long string) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop",
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			res, err := daemon.Stop(cmd.Context(), p)
			if errs.Is(err, errs.Unavailable) {
				if a.JSON {
					return a.PrintJSON(stopRecord{})
				}
				a.Printf("%s is not running\n", a.Name())
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
			a.Printf("%s stopped (pid %d)\n", a.Name(), res.PID)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the service to exit (default: its grace period + 5s)")
	return cmd
}
