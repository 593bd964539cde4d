package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
)

func newTaskCmd(a *app.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Read your task and state its status in State Hub (run by the agent)",
		Long: `The agent reads the State Hub task it works on (task show: its description,
where the tracker has one) and states its status (task set) through the
engine's daemon, which holds State Hub's address and credentials. The engine
relays what the agent states; it never decides a task's state.

Exit status: 0 on success; 2 (usage) for a status or note not allowed; 8
(unavailable) when the engine or State Hub does not answer (or asked for no
requests for a while: GitHub's rate limits); 12 (not_found) for a task State
Hub does not have; 14 (policy_refused) for a note holding secret material
(not sent), a description withheld as secret, or an issue that is not a task;
15 (bad_request) when State Hub refuses what was stated; 24 (unsupported) when
State Hub does not offer it (use the tracker's own tools).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTaskSetCmd(a), newTaskShowCmd(a))
	return cmd
}
