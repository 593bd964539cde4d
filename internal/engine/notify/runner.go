package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Runner runs the operator's [notify] command for a notice: the argv
// without a shell, the notice in its environment (TAMQ_NOTIFY_*) and as one
// JSON object on its standard input, in a process group of its own that is
// killed when Timeout passes on Clock.
type Runner struct {
	Command []string
	Timeout time.Duration
	Clock   clock.Clock
	// Env is the environment the command inherits (nil: the engine's).
	Env []string
}

// Result is how a run ended: its exit status (-1 when it did not exit by
// itself), whether it was killed at the timeout, what failed to start it,
// and a short escaped excerpt of what it wrote, for the log.
type Result struct {
	Exit     int
	TimedOut bool
	Err      error
	Excerpt  string
}

// OK reports whether the command ran and exited 0.
func (r Result) OK() bool { return r.Err == nil && !r.TimedOut && r.Exit == 0 }

// excerptMax bounds what of the command's output the log keeps: enough to
// see what went wrong, never a page of it.
const excerptMax = 200

// Run runs the command for n and waits for it, or for the timeout or ctx
// (then the whole process group is killed).
func (r Runner) Run(ctx context.Context, n Notice) Result {
	in, err := json.Marshal(n)
	if err != nil {
		return Result{Exit: -1, Err: err}
	}
	cmd := exec.Command(r.Command[0], r.Command[1:]...)
	env := r.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env[:len(env):len(env)], "TAMQ_NOTIFY_EVENT="+string(n.Event), "TAMQ_NOTIFY_TASK="+n.Task,
		"TAMQ_NOTIFY_REPO="+n.Repo, "TAMQ_NOTIFY_REASON="+n.Reason, "TAMQ_NOTIFY_ACTION="+n.Action)
	cmd.Stdin = bytes.NewReader(append(in, '\n'))
	out := &headWriter{max: excerptMax}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so the timeout kills what it started too (a
	// shell script's curl), not the command alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps the output open after the group is killed (it left
	// the group) does not hold the runner.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return Result{Exit: -1, Err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var res Result
	select {
	case err = <-done:
	case <-r.Clock.After(r.Timeout):
		res.TimedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		res.Err = ctx.Err()
	}
	res.Exit = cmd.ProcessState.ExitCode()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) && res.Err == nil {
		res.Err = err
	}
	res.Excerpt = textsafe.Escape(out.String())
	return res
}

// String says a result for the log.
func (r Result) String() string {
	switch {
	case r.Err != nil:
		return r.Err.Error()
	case r.TimedOut:
		return "killed at the timeout"
	}
	return fmt.Sprintf("exit status %d", r.Exit)
}

// headWriter keeps the first max bytes written to it and drops the rest.
type headWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.ToValidUTF8(w.b, nil))
}
