package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func newBrokerCmd(a *app.App) *cobra.Command {
	var repo, gitaDir string
	var exitWait time.Duration
	cmd := &cobra.Command{
		Use:   "broker --repo REPO -- COMMAND [ARGS...]",
		Short: "Run an agent under tamq's PTY broker (what tamq windows run)",
		Long: `Run COMMAND under a new pseudo-terminal and relay the terminal to it unchanged.
Lines the agent prints as 'To:<repo>: text' (a block, up to an empty line, a
quiet spell or a redrawn screen) are sent as the window's messages; a line the
operator types as 'To:<repo>: text' and Enter is sent as an operator message
and not passed to the agent. Only an agent gets deliveries, and only what an
agent prints is routed: the terminal's foreground program must be COMMAND
(unless it is a shell) or a known agent (claude, codex, gemini, or a name in
delivery.agent_programs), started by hand or not; while a shell or any other
program has the foreground, messages wait with "no agent running". When the service is down the terminal keeps
working and such lines are kept in a spool of this broker's own
(STATE_DIR/spool/<pid>.jsonl) and sent when it is back. When the agent exits,
the broker waits up to --exit-wait for the service to take what it still
holds. The exit status is the agent's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			// A config file being edited must not keep agents from starting:
			// the broker falls back to the defaults and says so.
			cfg, cfgErr := a.Config()
			if cfgErr != nil {
				cfg = config.Defaults(p)
			}
			if repo == "" {
				return app.UsageError("--repo is required")
			}
			env := append(os.Environ(), "TAMQ_REPO="+repo, "TAMQ_SOCKET="+p.Socket)
			relay := &broker.Relay{Argv: args, Env: env, In: os.Stdin, Out: os.Stdout, AnswerStatusProbe: true}
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
			spool := broker.SpoolFor(p.StateDir, os.Getpid())
			outbox := &broker.Outbox{Send: sendLine(p), Notice: relay.Notice, Spool: spool}
			outbox.Start()
			obs := &broker.Observer{
				Slugs:  slugs,
				Notice: relay.Notice,
				Quiet:  time.Duration(cfg.Delivery.BlockQuietMS) * time.Millisecond,
				Emit: func(b broker.Block) {
					outbox.Put(b.Target, api.SendArgs{Text: queue.FormatAddress(b.Target, b.Body)})
				},
			}
			filter := &broker.InputFilter{
				Slugs: slugs,
				Echo:  relay.EchoLocal,
				Route: func(target, body string) {
					outbox.Put(target, api.SendArgs{Text: queue.FormatAddress(target, body), Operator: true})
				},
			}
			// Deliveries and the agent's To: lines need an agent in the
			// foreground: the window's own command (unless it is a shell),
			// or a known agent started in it by hand.
			fg := &broker.Foreground{PID: relay.ChildPID, Argv: args, Command: program.ArgvCommand(args), Extra: cfg.Delivery.AgentPrograms}
			obs.Routing = func() bool { return fg.Look().Running }
			model := broker.NewModel(80, 24, obs)
			sess := newSession(relay, model, obs, filter.MidLine, fg)
			relay.FilterInput = filter.Filter
			// The agent's hooks (`tamq hook`) report to this broker alone.
			hooks, err := broker.ListenHooks(broker.HookSocketFor(p.StateDir, os.Getpid()), os.Getpid(), func(e broker.HookEvent) {
				sess.gate.Hooks.Apply(e, time.Now())
				sess.report()
			})
			if err == nil {
				defer hooks.Close()
				relay.Env = append(relay.Env, broker.HookSocketEnv+"="+hooks.Path())
			} else {
				relay.Notice(fmt.Sprintf("tamq: the agent's hooks cannot reach the broker: %v", err))
			}
			if cfgErr != nil {
				relay.Notice(fmt.Sprintf("tamq: %v; the broker uses the defaults", cfgErr))
			}
			sessionCtx, endSession := context.WithCancel(context.Background())
			// What the agent starts in the background stays in this
			// window's process tree, even once its parent exits or it
			// calls setsid: both daemons then place it in this window
			// (an agent of this repo) instead of taking it for the
			// operator, and the hook socket hears it.
			if err := proc.BecomeSubreaper(); err != nil {
				relay.Notice(fmt.Sprintf("tamq: background jobs of the agent may leave its window: %v", err))
			} else {
				go reapOrphans(sessionCtx, relay.ChildPID)
			}
			// The foreground changes without output too (an agent exits
			// to a silent shell, one is started and draws nothing yet): the
			// view is looked at again every second.
			go sess.watch(sessionCtx, time.Second)
			// The pane this broker runs in, as tmux told it; the service checks
			// it against the process tree before it believes it.
			if pane := a.Getenv("TMUX_PANE"); pane != "" && a.Getenv("TMUX") != "" {
				args := api.BrokerSessionArgs{Repo: repo, Socket: tmux.ChoosePath("", a.Getenv), Pane: pane}
				go sess.run(sessionCtx, client.New(p), args)
			}
			// tmux does not always learn how a pane's process ended
			// (tmux.ExitOption): the broker says it, for the start check,
			// status and what a restart reopens, also when a shutdown's
			// SIGTERM ends it.
			recordExit := func(int) {}
			if pane := a.Getenv("TMUX_PANE"); pane != "" && a.Getenv("TMUX") != "" {
				recordExit = func(code int) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					_ = tmux.ServerAt(tmux.ChoosePath("", a.Getenv), a.Getenv).SetPaneExit(ctx, pane, code)
				}
				stopTerm := recordTerm(recordExit)
				defer stopTerm()
			}
			code, err := relay.Run()
			endSession()
			if err == nil {
				recordExit(code)
			}
			model.Close() // the agent's last block goes into the outbox
			waiting := func(n int) {
				relay.Notice(fmt.Sprintf("tamq: the agent exited; waiting up to %s for the service to take %d %s", exitWait, n, plural(n, "line", "lines")))
			}
			if kept := outbox.Close(exitWait, waiting); kept > 0 {
				relay.Notice(fmt.Sprintf("tamq: service down; %d %s kept in %s, not sent", kept, plural(kept, "line", "lines"), spool.Path))
			}
			if err != nil {
				return err
			}
			return app.PassStatus(code)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the gita repo this window belongs to")
	cmd.Flags().StringVar(&gitaDir, "gita-dir", "", "the gita registry directory (default: gita's own)")
	cmd.Flags().DurationVar(&exitWait, "exit-wait", 10*time.Second, "how long to wait at exit for the service to take the lines not yet sent")
	cmd.RegisterFlagCompletionFunc("repo", app.CompleteRepos(a))
	return cmd
}

// sendLine hands one line to the service. A service that cannot be reached
// at all is down (the outbox keeps the line); one that answered refused it.
func sendLine(p paths.Paths) func(ctx context.Context, m api.SendArgs) error {
	c := client.New(p)
	return func(ctx context.Context, m api.SendArgs) error {
		_, err := c.Send(ctx, m)
		switch {
		case errs.Is(err, errs.ShuttingDown):
			return fmt.Errorf("%w: %v", broker.ErrServiceDown, err)
		case errs.Is(err, errs.Unavailable):
			// Unavailable is also the service's answer for a target without
			// a window; only a service that does not answer ping is down.
			if _, perr := daemon.Ping(ctx, p); perr != nil {
				return fmt.Errorf("%w: %v", broker.ErrServiceDown, err)
			}
		}
		return err
	}
}

// recordTerm makes a SIGTERM to the broker end it as before (killed by the
// signal, its agent hung up with the terminal), after record has noted the
// status a shell gives such an end, 143. The returned func stops it.
func recordTerm(record func(int)) (stop func()) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-term:
			record(128 + int(syscall.SIGTERM))
			signal.Reset(syscall.SIGTERM)
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		case <-done:
		}
	}()
	return func() { signal.Stop(term); close(done) }
}

// reapOrphans collects the exit status of the orphans the broker adopted
// as their subreaper, each time a child exits, until ctx ends; the agent
// itself is left to the relay's Wait.
func reapOrphans(ctx context.Context, agent func() int) {
	exited := make(chan os.Signal, 1)
	signal.Notify(exited, syscall.SIGCHLD)
	defer signal.Stop(exited)
	keep := func(pid int) bool { a := agent(); return a == 0 || pid == a }
	for {
		select {
		case <-ctx.Done():
			proc.ReapOrphans(keep)
			return
		case <-exited:
			proc.ReapOrphans(keep)
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// session keeps the broker attached to the service, so messages for this
// window are written through the broker (which knows when the agent is at
// its prompt, when it wants bracketed paste and when exactly the bytes went
// in), and tells the service whenever its view of the agent changes. When the
// service is down or restarts, it attaches again on its own; the terminal
// never waits.
type session struct {
	gate *broker.Gate
	obs  *broker.Observer
	// client reaches the service on connections of their own (a
	// delivery's confirmation), beside the session's.
	client *client.Client

	mu   sync.Mutex // one writer on the connection
	conn net.Conn
	sent *api.BrokerState // the view the service has, nil: none yet
	n    int

	// last is the last delivery with a claim and this broker's answer to
	// it, told to the service each time the session opens: a service
	// killed while the broker wrote never heard the answer, and its next
	// start must not write the same messages again. Only the session's
	// goroutine (run, serve) touches it.
	last *api.LastDelivery
}

// newSession wires the broker's delivery gate and its reports to the relay
// and the model; fg says whether an agent is the foreground program.
func newSession(relay *broker.Relay, model *broker.Model, obs *broker.Observer, busy func() bool, fg *broker.Foreground) *session {
	s := &session{gate: &broker.Gate{Relay: relay, Model: model, Hooks: &broker.HookState{},
		Foreground: fg, Busy: busy, Settle: 50 * time.Millisecond}, obs: obs}
	model.Changed, model.ChangedEvery = func() { s.report() }, 100*time.Millisecond
	relay.Observe, relay.Resized = model, model.Resize
	return s
}

// watch reports the view every interval until ctx ends (report sends only
// a change).
func (s *session) watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.report()
		}
	}
}

func (s *session) run(ctx context.Context, c *client.Client, args api.BrokerSessionArgs) {
	s.client = c
	delay := 100 * time.Millisecond
	args.Claims = true
	for ctx.Err() == nil {
		if args.Claims {
			args.LastDelivery = s.last
		}
		conn, fr, err := broker.OpenSession(ctx, c.Paths, args)
		if errs.Is(err, errs.BadRequest) && args.Claims {
			// A service that predates claims refuses arguments it does
			// not know: the session goes on without them.
			args.Claims, args.LastDelivery = false, nil
			continue
		}
		if err == nil {
			delay = 100 * time.Millisecond
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			s.attach(conn)
			s.serve(fr)
			s.attach(nil)
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

// attach sets the connection (nil: none) and, on a new one, tells the
// service the broker's view at once. Both happen under the lock, so a
// report racing it sends nothing twice.
func (s *session) attach(conn net.Conn) {
	var st api.BrokerState
	if conn != nil {
		st = s.gate.State()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.sent = conn, nil
	if conn != nil {
		s.sendState(st)
	}
}

// report sends a broker_state notification when the view changed.
func (s *session) report() {
	st := s.gate.State()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.sent != nil && *s.sent == st {
		return
	}
	s.sendState(st)
}

// sendState writes a broker_state notification (a request that gets no
// reply). Called with mu held.
func (s *session) sendState(st api.BrokerState) {
	s.n++
	args, _ := json.Marshal(st)
	frame, err := unixrpc.EncodeFrame(unixrpc.Request{Proto: unixrpc.Version, Op: api.OpBrokerState, ID: "state-" + strconv.Itoa(s.n), Args: args})
	if err != nil {
		return
	}
	if _, err := s.conn.Write(frame); err == nil {
		s.sent = &st
	}
}

func (s *session) write(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return net.ErrClosed
	}
	_, err := s.conn.Write(frame)
	return err
}

// serve writes each delivery the service sends and answers with what
// happened, until the connection ends.
func (s *session) serve(fr *unixrpc.FrameReader) {
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		req, err := unixrpc.DecodeRequest(frame)
		if err != nil || req.Op != api.OpDeliver {
			continue
		}
		var d api.DeliverArgs
		if err := unixrpc.DecodeArgs(req, &d); err != nil {
			continue
		}
		s.obs.Injected(d.Text) // never read back as an address
		bracketed := s.obs.BracketedPaste()
		delivery := broker.Delivery{Text: d.Text, Bracketed: bracketed,
			Pause: time.Duration(d.PauseMS) * time.Millisecond, Quiet: time.Duration(d.QuietMS) * time.Millisecond,
			MaxWait: time.Duration(d.MaxWaitMS) * time.Millisecond}
		if len(d.Confirm) > 0 {
			delivery.Current = s.confirm(d.Confirm)
		}
		out := s.gate.Deliver(delivery)
		res := api.DeliverResult{Written: out.Written, MaybeWritten: out.MaybeWritten, WrittenAt: time.Now().UTC(),
			Bracketed: bracketed, Quiet: out.Quiet, WaitedMS: out.Waited.Milliseconds(), NotReady: out.NotReady,
			Cancelled: out.Cancelled, Held: out.Held, Reason: out.Reason}
		switch {
		case out.Err != nil:
			res.Error = out.Err.Error()
		case out.Cancelled:
			res.Error = "not written: " + out.Reason
		case out.NotReady:
			res.Error = "the agent is not at its prompt: " + out.Reason
		case !out.Written:
			res.Error = "the text is in but the Enter was held back: " + out.Reason
		}
		if d.Claim != nil {
			s.last = &api.LastDelivery{Claim: *d.Claim, Result: res}
		}
		b, _ := json.Marshal(res)
		reply, err := unixrpc.EncodeFrame(unixrpc.Response{Proto: unixrpc.Version, ID: req.ID, OK: true, Result: b})
		if err != nil || s.write(reply) != nil {
			return
		}
		// The view goes out again after every answer, even when it did
		// not change: the service holds the window on a "not ready" answer
		// until a report frees it (the gate can find the agent not ready
		// while the view last reported says it is at its prompt: a screen
		// model behind, a hook event during the reads), and it reads what
		// the agent did with a written prompt (took it: busy) only from a
		// report after the answer.
		s.forgetSent()
		s.report()
	}
}

// confirm asks the service, right before a delivery's first byte, whether
// its messages are still being delivered: a wake the engine cancelled while
// the gate waited for the agent's prompt is not typed. A service that does
// not answer confirms nothing.
func (s *session) confirm(ids []string) func() (bool, string) {
	return func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		defer cancel()
		res, err := s.client.DeliveryCurrent(ctx, ids)
		switch {
		case err != nil:
			return false, "the service did not confirm the delivery: " + err.Error()
		case !res.Current:
			return false, res.Reason
		}
		return true, ""
	}
}

// confirmTimeout bounds the confirmation of a delivery (a local round trip).
const confirmTimeout = 2 * time.Second

// forgetSent makes the next report send the view whatever was sent before.
func (s *session) forgetSent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = nil
}
