package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/front"
)

func newSendCmd(a *app.App) *cobra.Command {
	var endpoint, mode string
	cmd := &cobra.Command{
		Use:   "send 'To:REPO: TEXT' | send -",
		Short: "Queue a message for the agent in a repo's window",
		Long: `Queue one message, written 'To:<repo>: text'. The text may span lines; with '-'
it is read from standard input. The repo must be registered in gita and have a
window on exactly one connected endpoint (else name one with --endpoint). The
sender is the process that runs the command: one started inside a tamq window
(a descendant of its pane's process) speaks for that window's repo; anything
else is the operator (marked /o). Environment variables do not change it. Bodies are UTF-8 text of at most 8 KiB;
newlines and tabs are the only control characters allowed.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAddresses(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			return front.Send(cmd.Context(), p, a.In, args[0], front.SendOptions{Endpoint: endpoint, AckMode: mode}, a.Output())
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the endpoint (tmux-amq-<pid>) to deliver through, when the repo has windows on several")
	cmd.Flags().StringVar(&mode, "ack-mode", "", strings.Join(ackmode.Names(), " or ")+" (default: delivery_ack_mode from config)")
	cmd.RegisterFlagCompletionFunc("ack-mode", cobra.FixedCompletions(ackmode.Names(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// completeAddresses completes the message's start to 'To:<repo>:' for each
// registered repo, without the space a completion usually adds: the text
// follows the colon.
func completeAddresses(a *app.App) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		reg, err := a.Registry()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, slug := range reg.Slugs() {
			if address := queue.AddressPrefix + slug + ":"; strings.HasPrefix(address, toComplete) {
				out = append(out, address)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}
