package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// runner runs the programs of the demo, tamq, coordination-engine and tmux
// (on the demo's own server), in the workspace's environment, and reads
// what they answer.
type runner struct {
	workspace
	tamq   string // the tamq binary, absolute
	engine string // the coordination-engine binary, absolute
	tmux   string // the private tmux server's socket name (tmux -L)
}

func (r *runner) status(ctx context.Context) (statusReport, error) {
	var st statusReport
	// status exits non-zero when something is unhealthy; the document is what
	// counts here.
	out, err := r.call(ctx, "tamq", "status", "--json")
	if jerr := json.Unmarshal(out, &st); jerr != nil {
		return st, errors.Join(err, jerr)
	}
	return st, nil
}

// explain adds what the windows show to a failure.
func (r *runner) explain(err error) error {
	out, terr := exec.Command("tmux", "-L", r.tmux, "list-panes", "-a", "-F", "#{pane_id} #{window_name}").Output()
	if terr != nil {
		return err
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pane, name, _ := strings.Cut(line, " ")
		screen, _ := exec.Command("tmux", "-L", r.tmux, "capture-pane", "-p", "-t", pane).Output()
		fmt.Fprintf(&b, "\n--- window %s ---\n%s", name, strings.TrimRight(string(screen), "\n"))
	}
	return fmt.Errorf("%w\nwhat the windows show:%s", err, b.String())
}

// env is the environment of every tamq the demo runs: the demo's own
// directories, and nothing of the user's tamq, gita or tmux session. The tmux
// server tamq open starts inherits it, and so do the windows' brokers.
func (r *runner) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "TAMQ_"), strings.HasPrefix(name, "COORDINATION_ENGINE_"),
			slices.Contains([]string{"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "GITA_PROJECT_HOME",
				"STATEHUB_API_BASE", "TMUX", "TMUX_PANE"}, name):
			continue
		}
		env = append(env, kv)
	}
	return append(env, r.envVars()...)
}

// envVars point tamq (and gita, which reads $GITA_PROJECT_HOME/gita) at the
// demo's directories.
func (r *runner) envVars() []string {
	return []string{
		"XDG_CONFIG_HOME=" + r.configDir(),
		"XDG_STATE_HOME=" + r.stateDir(),
		"XDG_RUNTIME_DIR=" + r.runtimeDir(),
		"GITA_PROJECT_HOME=" + r.configDir(),
		// What the windows' agents need: the engine for the agent commands
		// (and to publish their work to State Hub, whose address and token
		// are the engine's).
		agentEngineVar + "=" + r.engine,
		agentHoldVar + "=" + r.holdDir(),
	}
}

// call runs tamq, coordination-engine or tmux (on the demo's server) and
// returns its output; a
// failure carries what it said on stderr.
func (r *runner) call(ctx context.Context, program string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	switch program {
	case "tamq":
		cmd = exec.CommandContext(ctx, r.tamq, args...)
	case "coordination-engine":
		cmd = exec.CommandContext(ctx, r.engine, args...)
	case "tmux":
		cmd = exec.CommandContext(ctx, "tmux", append([]string{"-L", r.tmux}, args...)...)
	default:
		panic("call: " + program)
	}
	cmd.Env = r.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The service tamq open starts must not hold our pipes open.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return stdout.Bytes(), ctx.Err()
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %v: %s", program, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

func (r *runner) explain1(ctx context.Context, task string) (explanation, error) {
	var x explanation
	out, err := r.call(ctx, "coordination-engine", "explain", task, "--json")
	if err != nil {
		return x, err
	}
	return x, json.Unmarshal(out, &x)
}
