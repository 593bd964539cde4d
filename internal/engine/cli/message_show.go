package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newMessageShowCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "show MESSAGE",
		Short: "Print a State Hub message and its body",
		Long: `Print a State Hub message: who sent it to which repo, its subject, whether it
asks for action and is read, then its body as written (control characters
escaped). The body is at most 64 KiB.

The engine scans the subject and the body for secret material (keys, tokens,
private keys) before it answers. When the scan finds some, the body is
withheld: nothing of it is printed, on stdout or stderr, and the command
names the rule that matched, says the secret gate applies, and exits 14
(policy_refused). A person reads such a message in State Hub.

--json prints {"message": {…}, "body": "…", "body_bytes": N}, with
"withheld": {"field", "rule", "offset", "gate"} and no body when withheld.`,
		Example: `  coordination-engine message show m-1
  coordination-engine message show m-1 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stateHubID("message id", args[0]); err != nil {
				return err
			}
			c, err := agentClient(a)
			if err != nil {
				return err
			}
			res, err := c.MessageShow(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printShown(a, res, messageText, res.Withheld, "message "+res.Message.ID, "State Hub")
		},
	}
}

// printShown prints what an agent read through the engine (--json: res as
// it came; else text(res)) and, when the secret scan withheld it, returns
// the error that says so (exit 14): what it was, the rule, the gate, and
// where a person reads it instead.
func printShown[R any](a *app.App, res R, text func(R) string, w *api.Withheld, what, where string) error {
	switch {
	case a.JSON:
		if err := a.PrintJSON(res); err != nil {
			return err
		}
	case !a.Quiet:
		a.Printf("%s", text(res))
	}
	if w != nil {
		return errs.New(errs.PolicyRefused, "the %s of %s is withheld: it holds secret material (%s at byte %d); the %s gate applies",
			w.Field, what, w.Rule, w.Offset, w.Gate).
			WithHint("a person reads it in %s; nothing of it was printed, kept or logged", where)
	}
	return nil
}

// messageText is a message for people: a header line, the subject, then
// the body as written, with nothing in it able to act in the terminal.
func messageText(r api.MessageShowResult) string {
	m := r.Message
	var b strings.Builder
	esc := textsafe.Escape
	fmt.Fprintf(&b, "message %s from %s to %s", esc(m.ID), esc(m.From), esc(m.ToRepo))
	if m.ToAgent != "" {
		fmt.Fprintf(&b, " (agent %s)", esc(m.ToAgent))
	}
	var facts []string
	if m.RequestsAction {
		facts = append(facts, "requests action")
	}
	facts = append(facts, map[bool]string{true: "read", false: "unread"}[m.Read])
	if !m.CreatedAt.IsZero() {
		facts = append(facts, m.CreatedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, ", %s, revision %s\n", strings.Join(facts, ", "), esc(m.Revision))
	switch {
	case r.Withheld != nil && r.Withheld.Field == "subject":
		b.WriteString("subject: withheld\n")
	default:
		fmt.Fprintf(&b, "subject: %s\n", esc(m.Subject))
	}
	if r.Withheld != nil {
		fmt.Fprintf(&b, "body: withheld (%d bytes)\n", r.BodyBytes)
		return b.String()
	}
	b.WriteString("\n")
	if body := textsafe.EscapeText(r.Body); body != "" {
		b.WriteString(strings.TrimSuffix(body, "\n") + "\n")
	}
	return b.String()
}
