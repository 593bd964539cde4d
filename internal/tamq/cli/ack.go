package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newAckCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "ack ID",
		Short: "Acknowledge a message (stops its redelivery)",
		Long: `Acknowledge message ID. Accepted in every state, after failure too: a late
acknowledgement wins. Acknowledging twice is not an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return messageOp(cmd, a, (*client.Client).Ack, args[0], "acknowledged")
		},
	}
}

// messageOp runs an operation on one message id and prints the result.
func messageOp(cmd *cobra.Command, a *app.App, op func(*client.Client, context.Context, string) (api.Message, error), id, verb string) error {
	p, err := a.Paths()
	if err != nil {
		return err
	}
	m, err := op(client.New(p), cmd.Context(), id)
	if err != nil {
		return err
	}
	if a.JSON {
		return a.PrintJSON(m)
	}
	if !a.Quiet {
		a.Printf("%s %s (now %s)\n", verb, textsafe.Escape(m.ID), textsafe.Escape(m.State))
	}
	return nil
}
