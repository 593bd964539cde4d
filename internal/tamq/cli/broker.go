package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
)

func newBrokerCmd(a *app.App) *cobra.Command {
	var repo, gitaDir string
	var exitWait time.Duration
	cmd := &cobra.Command{
		Use:   "broker --repo REPO -- COMMAND [ARGS...]",
		Short: "Run an agent under tamq's PTY broker (what tamq windows run)",
		Long: `Run COMMAND under a new pseudo-terminal and relay the terminal to it unchanged.
Lines the agent prints as 'To:<repo>: text' (a block, up to an empty line, a
quiet spell or a redrawn screen) are sent as the window's messages; a line the
operator types as 'To:<repo>: text' and Enter is sent as an operator message
and not passed to the agent. Only an agent gets deliveries, and only what an
agent prints is routed: the terminal's foreground program must be COMMAND
(unless it is a shell) or a known agent (claude, codex, gemini, or a name in
delivery.agent_programs), started by hand or not; while a shell or any other
program has the foreground, messages wait with "no agent running". When the service is down the terminal keeps
working and such lines are kept in a spool of this broker's own
(STATE_DIR/spool/<pid>.jsonl) and sent when it is back. When the agent exits,
the broker waits up to --exit-wait for the service to take what it still
holds. The exit status is the agent's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			// A config file being edited must not keep agents from starting:
			// the broker falls back to the defaults and says so.
			cfg, cfgErr := a.Config()
			if cfgErr != nil {
				cfg = config.Defaults(p)
			}
			if repo == "" {
				return app.UsageError("--repo is required")
			}
			registry := a.Registry
			if gitaDir != "" {
				registry = gita.NewReader(gitaDir).Load
			}
			code, err := broker.Process{Argv: args, Repo: repo, Paths: p, Delivery: cfg.Delivery, ConfigErr: cfgErr,
				Registry: registry, Getenv: a.Getenv, ExitWait: exitWait, In: os.Stdin, Out: os.Stdout}.Run()
			if err != nil {
				return err
			}
			return app.PassStatus(code)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the gita repo this window belongs to")
	cmd.Flags().StringVar(&gitaDir, "gita-dir", "", "the gita registry directory (default: gita's own)")
	cmd.Flags().DurationVar(&exitWait, "exit-wait", 10*time.Second, "how long to wait at exit for the service to take the lines not yet sent")
	cmd.RegisterFlagCompletionFunc("repo", app.CompleteRepos(a))
	return cmd
}
