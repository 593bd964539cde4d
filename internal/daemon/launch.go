package daemon

// The launcher: it starts a program's service in the background when it is
// not running: lock-protected, so any number of concurrent starts leave
// exactly one service, and with a readiness handshake, so a failed start is
// reported by the command that asked for it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// NotifyFD is the descriptor on which a detached child reports readiness.
const NotifyFD = 3

// Options say how to start the service.
type Options struct {
	Paths paths.Paths
	// Exe and Args run the service in the foreground (Args start with "serve");
	// "--notify-fd 3" is added.
	Exe  string
	Args []string
	// Env is the child's environment (nil: ours).
	Env []string
	// Timeout bounds the whole start; zero means 30 s.
	Timeout time.Duration
}

// Result says which service answered.
type Result struct {
	Ping           PingResult
	AlreadyRunning bool
}

// EnsureRunning starts the service detached unless it already answers. Starts
// are serialized by a lock in the state dir; the service itself holds another
// lock for its lifetime, so even a start racing a foreground `serve`
// leaves one service.
func EnsureRunning(ctx context.Context, o Options) (Result, error) {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if res, err := Ping(ctx, o.Paths); err == nil {
		return Result{Ping: res, AlreadyRunning: true}, nil
	} else if refusedSocket(err) {
		return Result{}, err
	}
	if err := paths.EnsurePrivateDir(o.Paths.StateDir); err != nil {
		return Result{}, err
	}
	lock, err := lockfile.Acquire(ctx, o.Paths.StartLockFile)
	if err != nil {
		return Result{}, err
	}
	defer lock.Release()
	// Another start may have finished while we waited for the lock.
	if res, err := Ping(ctx, o.Paths); err == nil {
		return Result{Ping: res, AlreadyRunning: true}, nil
	}
	err = spawn(ctx, o)
	var e *errs.Error
	if errors.As(err, &e) && e.Code == errs.AlreadyRunning {
		// Lost to a service started another way (a foreground serve): wait for it.
		res, perr := waitAlive(ctx, o.Paths)
		if perr != nil {
			return Result{}, err
		}
		return Result{Ping: res, AlreadyRunning: true}, nil
	}
	if err != nil {
		return Result{}, err
	}
	res, err := Ping(ctx, o.Paths)
	if err != nil {
		return Result{}, errs.Wrap(errs.Unavailable, err, "the service started but does not answer")
	}
	return Result{Ping: res}, nil
}

// spawn runs the service in a new session with its output in the log file and
// waits for it to say it is ready, or why it is not.
func spawn(ctx context.Context, o Options) error {
	logf, err := os.OpenFile(o.Paths.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return errs.Wrap(errs.Storage, err, "cannot open log file")
	}
	defer logf.Close()
	if err := logf.Chmod(0o600); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot set mode of log file %s", o.Paths.LogFile)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "open %s", os.DevNull)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "readiness pipe")
	}
	defer r.Close()
	args := append(append([]string{}, o.Args...), "--notify-fd", fmt.Sprint(NotifyFD))
	cmd := exec.Command(o.Exe, args...)
	cmd.Env = o.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.ExtraFiles = []*os.File{w} // becomes descriptor 3
	// A new session: no controlling terminal, and the terminal's hangup or ^C
	// never reaches the service.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return errs.Wrap(errs.Internal, err, "cannot start %s", o.Exe)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	select {
	case <-ctx.Done():
		cmd.Process.Kill()
		return errs.New(errs.Timeout, "the service did not become ready in time").WithHint("see %s", o.Paths.LogFile)
	case msg := <-line:
		return readiness(msg, exited, o.Paths.LogFile)
	}
}

// readiness interprets the child's one line: "ready", or "error {json}".
func readiness(msg string, exited <-chan error, logFile string) error {
	msg = strings.TrimSpace(msg)
	switch {
	case msg == "ready":
		return nil
	case strings.HasPrefix(msg, "error "):
		var we unixrpc.Error
		if err := json.Unmarshal([]byte(strings.TrimPrefix(msg, "error ")), &we); err == nil && we.Code != "" {
			return we.AsError()
		}
	}
	// No report: the child died before it could say why.
	err := <-exited
	return errs.New(errs.Internal, "the service exited during startup (%v)", err).WithHint("see %s", logFile)
}

// NotifyReady is the child's side of the handshake: it writes the outcome of
// its start to descriptor fd and closes it.
func NotifyReady(fd int, startErr error) {
	f := os.NewFile(uintptr(fd), "notify")
	if f == nil {
		return
	}
	defer f.Close()
	if startErr == nil {
		fmt.Fprintln(f, "ready")
		return
	}
	var e *errs.Error
	if !errors.As(startErr, &e) {
		e = errs.New(errs.Internal, "%v", startErr)
	}
	b, _ := json.Marshal(unixrpc.Error{Code: e.Code, Message: e.Message, Hint: e.Hint})
	fmt.Fprintf(f, "error %s\n", b)
}

// waitAlive polls until the service answers or ctx ends.
// pollPace is how often waitAlive and WaitGone ask again: soon at first, as
// a service starts or stops within milliseconds, then less often.
var pollPace = backoff.Policy{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}

func waitAlive(ctx context.Context, p paths.Paths) (PingResult, error) {
	delay := pollPace.Min
	for {
		res, err := Ping(ctx, p)
		if err == nil || refusedSocket(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(delay):
		}
		delay = pollPace.Next(delay)
	}
}

// refusedSocket tells a socket the client will not talk to (another user's,
// or not a socket) from one where nothing listens yet: waiting or starting a
// service cannot change the first.
func refusedSocket(err error) bool {
	return errs.Is(err, errs.PermissionDeny) || errs.Is(err, errs.Conflict)
}

// WaitGone polls until the process pid has exited and the socket no longer
// answers, or ctx ends.
func WaitGone(ctx context.Context, p paths.Paths, pid int) error {
	delay := pollPace.Min
	for {
		procGone := proc.Exited(pid)
		if _, err := Ping(ctx, p); err != nil && procGone {
			return nil
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Timeout, "%s (pid %d) did not stop in time", p.Program, pid)
		case <-time.After(delay):
		}
		delay = pollPace.Next(delay)
	}
}
