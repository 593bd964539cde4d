package app

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/daemon"
)

// pingRecord is ping's --json record.
type pingRecord struct {
	daemon.PingResult
	RoundTripMS float64 `json:"round_trip_ms"`
}

// NewPingCmd is both programs' ping: one round trip to the program's service.
func NewPingCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "ping",
		Short: "Check that the service answers",
		Long: `One round trip over the Unix socket. Exit status 0 when the service answers,
non-zero (8, unavailable) with a message on stderr when it does not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Only the socket path is needed: no config is read, so ping stays cheap.
			p, err := a.Paths()
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := daemon.Ping(cmd.Context(), p)
			if err != nil {
				return err
			}
			rtt := float64(time.Since(start).Microseconds()) / 1000
			if a.JSON {
				return a.PrintJSON(pingRecord{PingResult: res, RoundTripMS: rtt})
			}
			if !a.Quiet {
				a.Printf("%s is alive (pid %d, version %s, protocol %s, %.2f ms)\n", a.Name(), res.PID, res.ServerVersion, res.Proto, rtt)
			}
			return nil
		},
	}
}
