package app

import (
	"context"
	"io"
	"os"
	"time"

	"log/slog"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// ServeFlags are the flags of both programs' serve and start that shape
// their daemon.
type ServeFlags struct {
	Orwell bool
	// NotifyFD is set by `start --detach` for the child it spawns: the
	// readiness handshake.
	NotifyFD int
}

// Register adds --orwell to serve or start.
func (f *ServeFlags) Register(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVar(&f.Orwell, "orwell", false,
		"UNSAFE diagnostics: also log "+what+" and other omitted fields to a private local file (needs a policy profile that allows orwell_diagnostics)")
}

// RegisterNotify adds serve's hidden --notify-fd.
func (f *ServeFlags) RegisterNotify(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.NotifyFD, "notify-fd", 0, "report readiness on this descriptor")
	cmd.Flags().MarkHidden("notify-fd")
}

// Daemon is what a program's daemon starts from: its paths and config, the
// --orwell sink when asked for, a context that ends on SIGTERM or SIGINT,
// and whether it runs detached.
type Daemon struct {
	Ctx      context.Context
	Paths    paths.Paths
	Config   *config.Loaded
	Orwell   io.Writer // nil without --orwell
	Detached bool
}

// Runner is a started daemon.
type Runner interface {
	Run(ctx context.Context) error
}

// Serve runs a daemon the way both programs' serve does: it resolves paths
// and config, opens the --orwell sink, handles signals, starts the program's
// daemon with start and reports readiness (or why not) to a detaching
// parent, then runs it until a signal or a stop request.
func (a *App) Serve(ctx context.Context, f ServeFlags, start func(Daemon) (Runner, error)) (err error) {
	d := Daemon{Detached: f.NotifyFD > 0}
	notified := false
	// A detached start waits for exactly one report: ready, or why not.
	notify := func(startErr error) {
		if d.Detached && !notified {
			notified = true
			daemon.NotifyReady(f.NotifyFD, startErr)
		}
	}
	defer func() { notify(err) }()
	if d.Paths, err = a.Paths(); err != nil {
		return err
	}
	if d.Config, err = a.Config(); err != nil {
		return err
	}
	closeLog, err := a.openDaemonLog(d)
	if err != nil {
		return err
	}
	defer closeLog()
	if f.Orwell {
		w, err := daemon.OpenOrwell(d.Paths, d.Config.Policy.Profile, d.Config.ActiveProfile(), d.Config.ProfileRef(), a.Err)
		if err != nil {
			return err
		}
		defer w.Close()
		d.Orwell = w
	}
	var stopSignals func()
	d.Ctx, stopSignals = daemon.SignalContext(ctx)
	defer stopSignals()
	r, err := start(d)
	if err != nil {
		return err
	}
	notify(nil)
	return r.Run(d.Ctx)
}

// openDaemonLog makes the daemon's logger, which Logger returns while it
// runs: warnings that repeat are written once per window with a count
// ([log] repeat_window_seconds), and a detached daemon writes to its log
// file, rotated by size ([log] max_size_mb, max_files), as do its notes to
// a.Err. The returned func writes the counts still held back and closes
// the file.
func (a *App) openDaemonLog(d Daemon) (func(), error) {
	prevErr := a.Err
	var lf *daemon.LogFile
	if d.Detached {
		var err error
		if lf, err = daemon.OpenLog(d.Paths.LogFile, d.Config.LogMaxBytes(), d.Config.Log.MaxFiles, daemon.FollowStdio); err != nil {
			return nil, err
		}
		a.Err = lf
	}
	repeats := daemon.NewRepeats(clock.System, d.Config.RepeatWindow())
	a.daemonLog.Store(slog.New(repeats.Handler(NewLogger(a.Err, a.JSON, a.Quiet, a.Verbose).Handler())))
	return func() {
		repeats.Close()
		a.daemonLog.Store(nil)
		if lf != nil {
			// What is written after (the error a failed start or run
			// ends with) goes to stderr, which follows the file.
			a.Err = prevErr
			lf.Close()
		}
	}, nil
}

// StartDetached is the detached half of both programs' start: it refuses
// --orwell where the operator sees it, then starts `serve ARGS...` in the
// background unless a daemon answers, and reports which.
func (a *App) StartDetached(ctx context.Context, f ServeFlags, args []string, timeout time.Duration) error {
	p, err := a.Paths()
	if err != nil {
		return err
	}
	cfg, err := a.Config()
	if err != nil {
		return err
	}
	if f.Orwell {
		// Opened here for the policy's word and the warning only: the
		// service opens its own sink, so this one is closed at once rather
		// than left open in the process that asked for the start.
		sink, err := daemon.OpenOrwell(p, cfg.Policy.Profile, cfg.ActiveProfile(), cfg.ProfileRef(), a.Err)
		if err != nil {
			return err
		}
		sink.Close()
		args = append(args, "--orwell")
	}
	exe, err := os.Executable()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot find the %s executable", a.Name())
	}
	if a.Verbose {
		args = append(args, "--verbose")
	}
	if a.JSON {
		args = append(args, "--json")
	}
	res, err := daemon.EnsureRunning(ctx, daemon.Options{Paths: p, Exe: exe, Args: append([]string{"serve"}, args...), Timeout: timeout})
	if err != nil {
		return err
	}
	return a.ReportStart(res.Ping, res.AlreadyRunning)
}

type startRecord struct {
	Running        bool   `json:"running"`
	AlreadyRunning bool   `json:"already_running"`
	PID            int    `json:"pid"`
	Socket         string `json:"socket"`
	LogFile        string `json:"log_file,omitempty"`
}

// ReportStart says that the daemon runs: started now, or already.
func (a *App) ReportStart(res daemon.PingResult, already bool) error {
	p, err := a.Paths()
	if err != nil {
		return err
	}
	logFile := p.LogFile
	if already {
		logFile = ""
	}
	if a.JSON {
		return a.PrintJSON(startRecord{Running: true, AlreadyRunning: already, PID: res.PID, Socket: p.Socket, LogFile: logFile})
	}
	if already {
		a.Printf("%s is already running (pid %d, socket %s)\n", a.Name(), res.PID, p.Socket)
		return nil
	}
	a.Printf("%s started (pid %d, socket %s, log %s)\n", a.Name(), res.PID, p.Socket, logFile)
	return nil
}
