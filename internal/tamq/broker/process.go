package broker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// Process is one window's broker as `tamq broker` runs it: the agent under
// a PTY, its screen modelled, the To: lines it prints and the operator types
// handed to the service through the outbox, and the session with the service
// over which the window's deliveries arrive. The command line only fills it
// in; Run is the whole life of the process.
type Process struct {
	// Argv is the agent's command; Repo the gita repo of the window.
	Argv []string
	Repo string
	// Paths places the service's socket, the spool and the hook socket.
	Paths paths.Paths
	// Delivery is the config's [delivery] (the quiet that ends a block, the
	// agent programs). ConfigErr, when set, is why the config could not be
	// read: Delivery then holds the defaults, and the operator is told, since
	// a config file being edited must not keep agents from starting.
	Delivery  config.Delivery
	ConfigErr error
	// Registry reads the gita registry: the targets a To: line may name.
	Registry func() (*gita.Registry, error)
	// Getenv reads the broker's environment (TMUX, TMUX_PANE).
	Getenv func(string) string
	// ExitWait bounds the wait, once the agent exited, for the service to
	// take the lines not yet sent.
	ExitWait time.Duration
	// In and Out are the operator's terminal.
	In  *os.File
	Out io.Writer
}

// Run runs the agent until it exits and returns its exit status; err is set
// when the agent could not be run at all.
func (p Process) Run() (code int, err error) {
	pid := os.Getpid()
	env := append(os.Environ(), "TAMQ_REPO="+p.Repo, "TAMQ_SOCKET="+p.Paths.Socket)
	relay := &Relay{Argv: p.Argv, Env: env, In: p.In, Out: p.Out, AnswerStatusProbe: true}
	spool := SpoolFor(p.Paths.StateDir, pid)
	outbox := &Outbox{Send: sendLine(p.Paths), Notice: relay.Notice, Spool: spool}
	outbox.Start()
	model, sess := p.compose(relay, outbox)
	// The agent's hooks (`tamq hook`) report to this broker alone.
	hooks, err := ListenHooks(HookSocketFor(p.Paths.StateDir, pid), pid, func(e HookEvent) {
		sess.gate.Hooks.Apply(e, time.Now())
		sess.report()
	})
	if err == nil {
		defer hooks.Close()
		relay.Env = append(relay.Env, HookSocketEnv+"="+hooks.Path())
	} else {
		relay.Notice(fmt.Sprintf("tamq: the agent's hooks cannot reach the broker: %v", err))
	}
	if p.ConfigErr != nil {
		relay.Notice(fmt.Sprintf("tamq: %v; the broker uses the defaults", p.ConfigErr))
	}

	sessionCtx, endSession := context.WithCancel(context.Background())
	adoptBackgroundJobs(sessionCtx, relay)
	// The foreground changes without output too (an agent exits to a silent
	// shell, one is started and draws nothing yet): the view is looked at
	// again every second.
	go sess.watch(sessionCtx, time.Second)
	recordExit := func(int) {}
	// The pane this broker runs in, as tmux told it; the service checks it
	// against the process tree before it believes it.
	if pane := p.Getenv("TMUX_PANE"); pane != "" && p.Getenv("TMUX") != "" {
		socket := tmux.ChoosePath("", p.Getenv)
		go sess.run(sessionCtx, client.New(p.Paths), api.BrokerSessionArgs{Repo: p.Repo, Socket: socket, Pane: pane})
		// tmux does not always learn how a pane's process ended
		// (tmux.ExitOption): the broker says it, for the start check, status
		// and what a restart reopens, also when a shutdown's SIGTERM ends it.
		recordExit = func(code int) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = tmux.ServerAt(socket, p.Getenv).SetPaneExit(ctx, pane, code)
		}
		stopTerm := recordTerm(recordExit)
		defer stopTerm()
	}

	code, err = relay.Run()
	endSession()
	if err == nil {
		recordExit(code)
	}
	model.Close() // the agent's last block goes into the outbox
	waiting := func(n int) {
		relay.Notice(fmt.Sprintf("tamq: the agent exited; waiting up to %s for the service to take %s", p.ExitWait, english.Plural(n, "line", "")))
	}
	if kept := outbox.Close(p.ExitWait, waiting); kept > 0 {
		relay.Notice(fmt.Sprintf("tamq: service down; %s kept in %s, not sent", english.Plural(kept, "line", ""), spool.Path))
	}
	return code, err
}

// compose wires what reads the agent's screen and the operator's keys: the
// To: blocks the agent prints and the addresses the operator types go into
// outbox; the session's delivery gate reads the same model.
func (p Process) compose(relay *Relay, outbox *Outbox) (*Model, *session) {
	slugs := func() []string {
		reg, err := p.Registry()
		if err != nil {
			return nil
		}
		return reg.Slugs()
	}
	obs := &Observer{
		Slugs:  slugs,
		Notice: relay.Notice,
		Quiet:  time.Duration(p.Delivery.BlockQuietMS) * time.Millisecond,
		Emit: func(b Block) {
			outbox.Put(b.Target, api.SendArgs{Text: queue.FormatAddress(b.Target, b.Body)})
		},
	}
	filter := &InputFilter{
		Slugs: slugs,
		Echo:  relay.EchoLocal,
		Route: func(target, body string) {
			outbox.Put(target, api.SendArgs{Text: queue.FormatAddress(target, body), Operator: true})
		},
	}
	// Deliveries and the agent's To: lines need an agent in the foreground:
	// the window's own command (unless it is a shell), or a known agent
	// started in it by hand.
	fg := &Foreground{PID: relay.ChildPID, Argv: p.Argv, Command: program.ArgvCommand(p.Argv), Extra: p.Delivery.AgentPrograms}
	obs.Routing = func() bool { return fg.Look().Running }
	model := NewModel(80, 24, obs)
	sess := newSession(relay, model, obs, filter.MidLine, fg)
	relay.FilterInput = filter.Filter
	return model, sess
}

// sendLine hands one line to the service. A service that cannot be reached
// at all is down (the outbox keeps the line); one that answered refused it.
func sendLine(p paths.Paths) func(ctx context.Context, m api.SendArgs) error {
	c := client.New(p)
	return func(ctx context.Context, m api.SendArgs) error {
		_, err := c.Send(ctx, m)
		switch {
		case errs.Is(err, errs.ShuttingDown):
			return fmt.Errorf("%w: %v", ErrServiceDown, err)
		case errs.Is(err, errs.Unavailable):
			// Unavailable is also the service's answer for a target without
			// a window; only a service that does not answer ping is down.
			if _, perr := daemon.Ping(ctx, p); perr != nil {
				return fmt.Errorf("%w: %v", ErrServiceDown, err)
			}
		}
		return err
	}
}

// adoptBackgroundJobs keeps what the agent starts in the background in this
// window's process tree, even once its parent exits or it calls setsid: both
// daemons then place it in this window (an agent of this repo) instead of
// taking it for the operator, and the hook socket hears it. The orphans are
// reaped until ctx ends.
func adoptBackgroundJobs(ctx context.Context, relay *Relay) {
	if err := proc.BecomeSubreaper(); err != nil {
		relay.Notice(fmt.Sprintf("tamq: background jobs of the agent may leave its window: %v", err))
		return
	}
	go reapOrphans(ctx, relay.ChildPID)
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
