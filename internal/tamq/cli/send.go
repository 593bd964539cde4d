package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func newSendCmd(a *app.App) *cobra.Command {
	var endpoint, mode string
	cmd := &cobra.Command{
		Use:   "send 'To:REPO: TEXT' | send -",
		Short: "Queue a message for the agent in a repo's window",
		Long: `Queue one message, written 'To:<repo>: text'. The text may span lines; with '-'
it is read from standard input. The repo must be registered in gita and have a
window on exactly one connected endpoint (else name one with --endpoint). The
sender is the process that runs the command: one started inside a tamq window (a
descendant of its pane's process) speaks for that window's repo; anything else
is the operator (marked /o). Environment variables do not change it. Bodies are
UTF-8 text of at most 8 KiB; newlines and tabs are the only control characters
allowed.

The message is one argument: quote it, tamq send 'To:webapp: hi there'. Unquoted
words are refused, not joined: the shell has already acted on them (a * turned
into file names, a $VAR into its value, a # into a comment), so the text joined
would not be what was typed.`,
		Example: `  tamq send 'To:webapp: the API is ready; run its tests'
  printf 'To:webapp: two\nlines\n' | tamq send -`,
		Args:              sendArgs,
		ValidArgsFunction: completeAddresses(a),
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
			if at := unixrpc.InvalidUTF8At([]byte(text)); at >= 0 {
				return errs.New(errs.BodyInvalid, "the message is not valid UTF-8 (invalid byte at offset %d); bodies are UTF-8 text", at)
			}
			p, err := a.Paths()
			if err != nil {
				return err
			}
			m, err := client.New(p).Send(cmd.Context(), api.SendArgs{Text: text, EndpointID: endpoint, AckMode: mode})
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(m) // last_error says why it waits
			}
			if !a.Quiet {
				a.Printf("queued %s for %s (%s mode)\n", textsafe.Escape(m.ID), textsafe.Escape(m.Target), textsafe.Escape(m.AckMode))
				if note := waitNote(m); note != "" {
					// Queued is not delivered: the sender learns now that the
					// window cannot take it, and why (a shell there, a dialog
					// open).
					io.WriteString(a.Err, textsafe.EscapeText(a.Name()+": queued; it waits: "+note+"\n"))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the endpoint (tmux-amq-<pid>) to deliver through, when the repo has windows on several")
	cmd.Flags().StringVar(&mode, "ack-mode", "", strings.Join(ackmode.Names(), " or ")+" (default: delivery_ack_mode from config)")
	cmd.RegisterFlagCompletionFunc("ack-mode", cobra.FixedCompletions(ackmode.Names(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// sendArgs wants the message as one argument. Several are a message typed
// unquoted: the error shows it quoted, not cobra's "accepts 1 arg(s)".
func sendArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return errs.New(errs.Usage, "tamq send needs the message: 'To:REPO: TEXT' as one argument, or - to read it from standard input")
	case len(args) > 1:
		return errs.New(errs.Usage, "tamq send takes the message as one argument, and got %d words: quote it, as in tamq send %s", len(args), shellQuote(strings.Join(args, " "))).
			WithHint("in single quotes the shell changes nothing; write a ' inside them as '\\''")
	}
	return nil
}

// shellQuote is s in single quotes for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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

// waitNote says why a message just queued waits for its window, or "" when
// it does not: "no agent running in beta's window".
func waitNote(m api.Message) string {
	if m.State != "queued" || m.LastError == "" {
		return ""
	}
	target := textsafe.Escape(m.Target)
	if m.LastError == program.NoAgentRunning {
		return program.NoAgentRunning + " in " + target + "'s window"
	}
	return target + "'s window: " + m.LastError
}
