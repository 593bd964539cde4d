package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/api"
	"github.com/tmux-amq/tamq/internal/tamq/client"
	"github.com/tmux-amq/tamq/internal/tamq/queue"
	"github.com/tmux-amq/tamq/internal/textsafe"
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
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[0]
			if text == "-" {
				b, err := io.ReadAll(io.LimitReader(a.In, queue.MaxBody*2))
				if err != nil {
					return errs.Wrap(errs.BodyInvalid, err, "cannot read standard input")
				}
				// The line end a shell or editor adds is not part of the message.
				var ended bool
				if text, ended = strings.CutSuffix(string(b), "\n"); ended {
					text = strings.TrimSuffix(text, "\r")
				}
			}
			// Checked here, on the raw bytes: encoding the request as JSON
			// would silently turn invalid bytes into U+FFFD.
			if err := checkUTF8(text); err != nil {
				return err
			}
			p, err := a.Paths()
			if err != nil {
				return err
			}
			req := api.SendArgs{Text: text, EndpointID: endpoint, AckMode: mode}
			m, err := client.New(p).Send(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(m)
			}
			if !a.Quiet {
				a.Printf("queued %s for %s (%s mode)\n", textsafe.Escape(m.ID), textsafe.Escape(m.Target), textsafe.Escape(m.AckMode))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the endpoint (tmux-amq-<pid>) to deliver through, when the repo has windows on several")
	cmd.Flags().StringVar(&mode, "ack-mode", "", strings.Join(ackmode.Names(), " or ")+" (default: delivery_ack_mode from config)")
	cmd.RegisterFlagCompletionFunc("ack-mode", cobra.FixedCompletions(ackmode.Names(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkUTF8 refuses text that is not valid UTF-8, naming the offset of the
// first bad byte, never the text.
func checkUTF8(text string) error {
	if at := protocol.InvalidUTF8At([]byte(text)); at >= 0 {
		return errs.New(errs.BodyInvalid, "the message is not valid UTF-8 (invalid byte at offset %d); bodies are UTF-8 text", at)
	}
	return nil
}
