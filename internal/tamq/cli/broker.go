package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	sharedcli "github.com/tmux-amq/tamq/internal/cli"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/daemon"
	"github.com/tmux-amq/tamq/internal/tmux"
)

func newBrokerCmd(a *sharedcli.App) *cobra.Command {
	var repo, gitaDir string
	cmd := &cobra.Command{
		Use:   "broker --repo REPO -- COMMAND [ARGS...]",
		Short: "Run an agent under tamq's PTY broker (what tamq windows run)",
		Long: `Run COMMAND under a new pseudo-terminal and relay the terminal to it unchanged.
Lines the agent prints as 'To:<repo>: text' (a block, up to an empty line) are
sent as the window's messages; a line the operator types as 'To:<repo>: text'
and Enter is sent as an operator message and not passed to the agent. When the
service is down the terminal keeps working and a one-line notice says what was
not sent. The exit status is the agent's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			if repo == "" {
				return sharedcli.UsageError("--repo is required")
			}
			env := append(os.Environ(), "TAMQ_REPO="+repo, "TAMQ_SOCKET="+p.Socket)
			relay := &broker.Relay{Argv: args, Env: env, In: os.Stdin, Out: os.Stdout}
			registry := a.Registry
			if gitaDir != "" {
				registry = gita.NewReader(gitaDir).Load
			}
			slugs := func() []string {
				reg, err := registry()
				if err != nil {
					return nil
				}
				return reg.Slugs()
			}
			from := protocol.SendArgs{}
			if pane := a.Getenv("TMUX_PANE"); pane != "" && a.Getenv("TMUX") != "" {
				from.FromPane, from.FromSocket = pane, tmux.Choose("", a.Getenv).Socket
			}
			out := make(chan protocol.SendArgs, 64)
			go routeMessages(daemon.Client(p, 10*time.Second), out, relay.Notice)
			obs := &broker.Observer{
				Slugs: slugs,
				Emit: func(b broker.Block) {
					m := from
					m.Text = "To:" + b.Target + ": " + b.Body
					out <- m
				},
				Unknown: func(slug string) {
					relay.Notice(fmt.Sprintf("tamq: not sent: unknown target '%s' (not in the gita registry)", slug))
				},
			}
			filter := &broker.InputFilter{
				Slugs: slugs,
				Echo:  relay.EchoLocal,
				Route: func(target, body string) {
					m := from
					m.Text, m.Operator = "To:"+target+": "+body, true
					out <- m
				},
			}
			relay.Observe, relay.FilterInput = obs, filter.Filter
			code, err := relay.Run()
			obs.Close()
			close(out)
			if err != nil {
				return err
			}
			return sharedcli.PassStatus(code)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the gita repo this window belongs to")
	cmd.Flags().StringVar(&gitaDir, "gita-dir", "", "the gita registry directory (default: gita's own)")
	cmd.RegisterFlagCompletionFunc("repo", sharedcli.CompleteRepos(a))
	return cmd
}

// routeMessages sends what the broker saw, in order, one at a time, so the
// terminal never waits on the service; what cannot be sent is said on the
// operator's screen, never typed into the agent.
func routeMessages(c *protocol.Client, in <-chan protocol.SendArgs, notice func(string)) {
	for m := range in {
		var rec protocol.Message
		if err := c.Call(context.Background(), protocol.OpSend, m, &rec); err != nil {
			target, _, _ := strings.Cut(strings.TrimPrefix(m.Text, "To:"), ":")
			notice(fmt.Sprintf("tamq: not sent to %s: %s", target, errs.CodeOf(err)))
		}
		// Success is silent: a line on the screen would scar a full-screen agent.
	}
}
