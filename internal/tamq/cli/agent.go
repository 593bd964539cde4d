package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
)

func newAgentCmd(a *app.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Set up coding agents (Claude Code, Codex) for tamq's windows",
		Long: `Commands about the coding agents that run in tamq's windows. 'tamq agent
setup claude|codex' writes into an agent's own settings what coordination-
engine's wake loop needs (docs/agent-setup.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newAgentSetupCmd(a))
	return cmd
}
