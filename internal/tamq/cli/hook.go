package cli

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
)

// maxHookInput bounds what is read of a hook's input; the fields tamq wants
// come first in every agent's JSON, and a tool's input can be large.
const maxHookInput = 1 << 20

func newHookCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "hook [JSON]",
		Short: "Forward an agent's hook event to its window's broker (for agent hook settings)",
		Long: `Run by an agent's hooks (Claude Code's hooks, Codex's hooks and notify): reads
the hook's JSON (the argument when given, as Codex's notify passes it, else
standard input), and tells the window's broker which event fired, so the
broker never presses a delivery's Enter into a dialog. Only the event's
name, notification type and tool name are forwarded, over the private socket
named by $TAMQ_HOOK_SOCKET (set by the broker for its agent).

It prints nothing and always exits 0: a hook that failed or answered could
deny a permission or change what the agent does. Outside a tamq window it
does nothing. docs/broker.md shows the settings for Claude Code and Codex.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := a.Getenv(broker.HookSocketEnv)
			if path == "" {
				return nil
			}
			var raw []byte
			if len(args) == 1 {
				raw = []byte(args[0])
			} else {
				raw, _ = io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxHookInput))
			}
			e, err := broker.ParseHook(raw)
			if err != nil {
				a.Logger().Debug("hook input not forwarded", "error", err.Error())
				return nil
			}
			if err := broker.SendHook(path, e, time.Second); err != nil {
				a.Logger().Debug("hook event not forwarded", "event", e.Event, "error", err.Error())
			}
			return nil
		},
	}
}
