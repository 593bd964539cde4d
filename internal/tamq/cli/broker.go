package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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
			// The pane this broker runs in, as tmux told it; the service checks
			// it against the process tree before it believes it.
			var session protocol.BrokerSessionArgs
			if pane := a.Getenv("TMUX_PANE"); pane != "" && a.Getenv("TMUX") != "" {
				session = protocol.BrokerSessionArgs{Repo: repo, Socket: tmux.Choose("", a.Getenv).Socket, Pane: pane}
			}
			out := make(chan protocol.SendArgs, 64)
			go routeMessages(daemon.Client(p, 10*time.Second), out, relay.Notice)
			obs := &broker.Observer{
				Slugs: slugs,
				Emit: func(b broker.Block) {
					out <- protocol.SendArgs{Text: "To:" + b.Target + ": " + b.Body}
				},
			}
			filter := &broker.InputFilter{
				Slugs: slugs,
				Echo:  relay.EchoLocal,
				Route: func(target, body string) {
					out <- protocol.SendArgs{Text: "To:" + target + ": " + body, Operator: true}
				},
			}
			relay.Observe, relay.FilterInput = obs, filter.Filter
			sessionCtx, endSession := context.WithCancel(context.Background())
			if session.Pane != "" {
				go deliverySession(sessionCtx, daemon.Client(p, 10*time.Second), session, relay, obs, filter)
			}
			code, err := relay.Run()
			endSession()
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
			// The service checked it as it checks `tamq send`, and recorded a refusal.
			target, _, _ := strings.Cut(strings.TrimPrefix(m.Text, "To:"), ":")
			if errs.Is(err, errs.UnknownTarget) {
				notice(fmt.Sprintf("tamq: not sent: unknown target '%s' (not in the gita registry)", target))
				continue
			}
			notice(fmt.Sprintf("tamq: not sent to %s: %v", target, err))
		}
		// Success is silent: a line on the screen would scar a full-screen agent.
	}
}

// deliverySession keeps the broker attached to the service, so messages for
// this window are written through the broker (which knows when the agent
// wants bracketed paste and when exactly the bytes went in). When the service
// is down or restarts, it attaches again on its own; the terminal never waits.
func deliverySession(ctx context.Context, c *protocol.Client, args protocol.BrokerSessionArgs, relay *broker.Relay, obs *broker.Observer, filter *broker.InputFilter) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, fr, err := c.OpenStream(ctx, protocol.OpBrokerSession, args)
		if err == nil {
			delay = 100 * time.Millisecond
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			serveDeliveries(conn, fr, relay, obs, filter)
			stop()
			conn.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// serveDeliveries writes each delivery the service sends and answers with
// what happened, until the connection ends.
func serveDeliveries(conn net.Conn, fr *protocol.FrameReader, relay *broker.Relay, obs *broker.Observer, filter *broker.InputFilter) {
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		req, err := protocol.DecodeRequest(frame)
		if err != nil || req.Op != protocol.OpDeliver {
			continue
		}
		var d protocol.DeliverArgs
		if err := protocol.DecodeArgs(req, &d); err != nil {
			continue
		}
		quiet, waited := relay.AwaitMoment(broker.Moment{
			Quiet: time.Duration(d.QuietMS) * time.Millisecond, MaxWait: time.Duration(d.MaxWaitMS) * time.Millisecond,
			Busy: filter.MidLine,
		})
		obs.Injected(d.Text) // never read back as an address
		bracketed := obs.BracketedPaste()
		maybe, werr := relay.Deliver(d.Text, bracketed, time.Duration(d.PauseMS)*time.Millisecond)
		res := protocol.DeliverResult{Written: werr == nil, MaybeWritten: maybe, WrittenAt: time.Now().UTC(), Bracketed: bracketed,
			Quiet: quiet, WaitedMS: waited.Milliseconds()}
		if werr != nil {
			res.Error = werr.Error()
		}
		b, _ := json.Marshal(res)
		reply, err := protocol.EncodeFrame(protocol.Response{Proto: protocol.Version, ID: req.ID, OK: true, Result: b})
		if err != nil {
			return
		}
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}
