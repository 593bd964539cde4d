package app

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/quick"
)

// NewPingCmd is both programs' ping: one round trip to the program's service.
// tamq's front program runs the same quick.Ping without this command tree.
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
			return quick.Ping(cmd.Context(), p, a.Output())
		},
	}
}
