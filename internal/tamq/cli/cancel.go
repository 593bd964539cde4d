package cli

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
)

func newCancelCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Drop a queued message, so that it is never delivered",
		Long: `Cancel message ID, which is queued: it waits to be delivered, e.g. to a window
that runs a shell rather than an agent. It ends cancelled, with a receipt, and
is never written; the window's next message may go. A message being written or
written cannot be cancelled (tamq ack ID stops one awaiting its ack from being
presented again; a held one is in the input box already), nor a wake from
coordination-engine (its lease decides it). Only the operator may cancel (not
an agent in a window). The service must be running.`,
		Example: `  tamq history --state queued   # the ids of the messages that wait
  tamq cancel 0197d2a4-8c3e-7b1f-9a52-3e6f0c4d2b18`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return messageOp(cmd, a, (*client.Client).Cancel, args[0], "cancelled")
		},
	}
}
