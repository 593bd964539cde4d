package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The demo's repos: alpha owns task A; beta owns task B, which depends on
// A; gamma owns a task that needs a human, one whose proposed action is
// destructive, and gets a message from beta that asks for action.
var repos = []string{"alpha", "beta", "gamma"}

// The demo's State Hub content.
const (
	taskA, taskB, taskHuman, taskDestructive = "A", "B", "H", "D"
	messageID                                = "m-1"
)

type options struct {
	tamq, engine string
	keep         bool
	timeout      time.Duration
}

// demo is one run: where its files are and which tmux server and State Hub
// are its own.
type demo struct {
	runner
	hubConn
	// tmuxSocket is the tmux server's socket file, once tamq open said where.
	tmuxSocket string
	out        io.Writer
	// keep: the demo leaves its loop running, as a person finds it (keep.go).
	keep bool
}

// run is the demo from start to end; the cleanup runs on every way out.
func run(ctx context.Context, o options, out, errw io.Writer) (err error) {
	d := &demo{out: out, keep: o.keep}
	for _, b := range []struct {
		path *string
		name string
		flag string
	}{{&d.tamq, o.tamq, "--tamq"}, {&d.engine, o.engine, "--engine"}} {
		if *b.path, err = filepath.Abs(b.name); err != nil {
			return err
		}
		if _, err := os.Stat(*b.path); err != nil {
			return fmt.Errorf("no binary at %s (run `make build` or pass %s PATH)", b.name, b.flag)
		}
	}
	for _, tool := range []string{"tmux", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the demo needs %s: %v", tool, err)
		}
	}
	if d.dir, err = os.MkdirTemp("", "tamq-demo-"); err != nil { // 0700: the demo's state is private
		return err
	}
	// The tmux server is named after the directory, which is new, so no other
	// server answers to the name.
	d.tmux = filepath.Base(d.dir)
	defer func() {
		if o.keep {
			d.printKeep()
			return
		}
		if cerr := d.cleanup(); cerr != nil {
			fmt.Fprintln(errw, "tamq-demo: cleanup:", cerr)
			if err == nil {
				err = cerr
			}
			return
		}
		d.say("cleaned up: the tmux server, both services, State Hub and %s are gone", d.dir)
	}()

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	// fail says what the windows show, which usually tells why.
	fail := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the demo gives up after --timeout %s)", err, o.timeout)
		}
		return d.explain(err)
	}
	fmt.Fprintf(out, "tamq demo: State Hub changes wake scripted agents in three repos through coordination-engine and tamq\n")
	d.say("tamq       %s", o.tamq)
	d.say("engine     %s", o.engine)
	d.say("workspace  %s  (gita registry, config, state and runtime dirs, all private to the demo)", d.dir)
	if err := d.setup(); err != nil {
		return err
	}
	steps := []func(context.Context) error{d.startHub, d.open, d.waitBrokers, d.startEngine, d.seed, d.waitLoop, d.report}
	if o.keep {
		steps = append(steps, d.leaveLoop)
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return fail(err)
		}
	}
	return nil
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "  "+format+"\n", args...)
}

// setup writes what a user would have before running tamq: git repositories
// registered with gita. It also puts a copy of this program where the
// windows can run it as their agent for as long as the demo's files exist
// (`go run` deletes its binary when it exits, which matters with --keep).
func (d *demo) setup() error {
	for _, sub := range []string{d.configDir(), d.gitaDir(), d.stateDir(), d.runtimeDir(), filepath.Dir(d.agentExe()), d.holdDir()} {
		// 0700 throughout; XDG_RUNTIME_DIR must be, and tamq checks.
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the demo's own executable for the agents: %v", err)
	}
	if err := copyFile(self, d.agentExe(), 0o700); err != nil {
		return err
	}
	registered := repos
	if d.keep {
		registered = append(slices.Clone(repos), keptRepos...)
	}
	var csv strings.Builder
	for _, r := range registered {
		if out, err := exec.Command("git", "init", "-q", d.repoDir(r)).CombinedOutput(); err != nil {
			return fmt.Errorf("git init %s: %v: %s", d.repoDir(r), err, bytes.TrimSpace(out))
		}
		csv.WriteString(gitaRow(d.repoDir(r), r))
	}
	reposCSV := filepath.Join(d.gitaDir(), "repos.csv")
	if err := os.WriteFile(reposCSV, []byte(csv.String()), 0o600); err != nil {
		return err
	}
	d.say("gita       registered %s in %s", strings.Join(registered, ", "), reposCSV)
	return nil
}

// writeTamqConfig points tamq at the demo's State Hub too: its receipts go
// through the engine while attached, and straight there otherwise.
func (d *demo) writeTamqConfig() error {
	dir := filepath.Join(d.configDir(), "tamq")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(fmt.Sprintf("[statehub]\napi_base = %q\n", d.hubURL)), 0o600)
}

// writeEngineConfig points the engine at the demo's State Hub, with lease
// times short enough that the stalled agent's lease runs out within seconds
// (a real deployment keeps the defaults: docs/configuration.md).
func (d *demo) writeEngineConfig() error {
	dir := filepath.Join(d.configDir(), "coordination-engine")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`[statehub]
api_base = %q

[coordination]
statehub_poll_interval_seconds = 2
max_attempts = 2
wake_ack_timeout_seconds = 10
lease_renew_interval_seconds = 1
lease_missed_renewals = 2
retry_backoff_seconds = [1, 2, 4]
`, d.hubURL)
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
}

// gitaRow is one repos.csv row as gita 0.16 writes it (Python's csv writer:
// CRLF line end, a field quoted only when it needs to be; the empty type and
// flags columns last).
func gitaRow(path, name string) string {
	quote := func(f string) string {
		if strings.ContainsAny(f, ",\"\r\n") {
			return `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
		}
		return f
	}
	return quote(path) + "," + quote(name) + ",,\r\n"
}

// open opens the repo windows on a private tmux server; tamq open starts the
// service (detached) and the tmux server as needed.
func (d *demo) open(ctx context.Context) error {
	endpoint, err := d.openWindows(ctx, repos)
	if err != nil {
		return err
	}
	d.say("tmux       private server `tmux -L %s`, session tamq, endpoint %s", d.tmux, endpoint)
	d.say("windows    %s: each runs a scripted agent under tamq's PTY broker (beta's stalls on its first wake)", strings.Join(repos, ", "))
	if st, err := d.status(ctx); err == nil {
		d.say("service    started by tamq open, pid %d, log %s", st.Service.PID, st.Service.LogFile)
	}
	return nil
}

// openWindows opens windows for repos, each running the demo's agent, and
// returns tamq's endpoint id of them.
func (d *demo) openWindows(ctx context.Context, repos []string) (string, error) {
	agent := shellQuote(d.agentExe()) + " agent"
	// exec: the agent itself is the process in the broker's terminal, so it
	// gets the hangup when the window closes. Trigger mode: the engine may
	// wake these agents.
	args := append([]string{"open", "--json", "--mode", "trigger", "--tmux-socket", d.tmux, "--command", "exec " + agent}, repos...)
	out, err := d.call(ctx, "tamq", args...)
	if err != nil {
		return "", err
	}
	var rec struct {
		EndpointID string `json:"endpoint_id"`
		TmuxSocket string `json:"tmux_socket"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		return "", fmt.Errorf("tamq open --json: %v", err)
	}
	d.tmuxSocket = rec.TmuxSocket
	return rec.EndpointID, nil
}

// statusReport is the part of `tamq status --json` the demo reads.
type statusReport struct {
	Service struct {
		PID     int    `json:"pid"`
		LogFile string `json:"log_file"`
	} `json:"service"`
	Endpoints []struct {
		State   string `json:"state"`
		Windows []struct {
			Repo   string `json:"repo"`
			Alive  bool   `json:"alive"`
			Broker bool   `json:"broker"`
		} `json:"windows"`
	} `json:"endpoints"`
}

// waitBrokers waits until every window's broker has attached to the service,
// so the first message goes in through the broker, as it will for a user.
func (d *demo) waitBrokers(ctx context.Context) error {
	if err := d.waitBrokersOf(ctx, repos); err != nil {
		return err
	}
	d.say("brokers    all %d attached to the service", len(repos))
	return nil
}

// waitBrokersOf waits until the brokers of the windows of repos have
// attached to the service.
func (d *demo) waitBrokersOf(ctx context.Context, repos []string) error {
	for {
		st, err := d.status(ctx)
		if err == nil {
			attached := 0
			for _, ep := range st.Endpoints {
				for _, w := range ep.Windows {
					if !slices.Contains(repos, w.Repo) {
						continue
					}
					if !w.Alive {
						return fmt.Errorf("the agent in window %s exited", w.Repo)
					}
					if w.Broker && ep.State == "connected" {
						attached++
					}
				}
			}
			if attached == len(repos) {
				return nil
			}
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for the windows' brokers to attach: %w", err)
		}
	}
}

// cleanup removes everything the demo started: the tmux server (its windows'
// brokers and agents end with it), the service, and the demo's files. It is
// safe at any stage, and it does not use the demo's context, which may be the
// one an interrupt cancelled.
func (d *demo) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error

	// The tmux server: remember its socket file and pane processes first.
	if sock, err := d.call(ctx, "tmux", "display-message", "-p", "#{socket_path}"); err == nil {
		panes, _ := d.call(ctx, "tmux", "list-panes", "-a", "-F", "#{pane_pid}")
		d.call(ctx, "tmux", "kill-server")
		// kill-server returns before the server is gone.
		if err := waitUntil(ctx, func() bool { _, err := d.call(ctx, "tmux", "list-sessions"); return err != nil }); err != nil {
			errs = append(errs, fmt.Errorf("the tmux server -L %s is still running", d.tmux))
		}
		// The windows' brokers get the hangup from tmux, and their agents from
		// the brokers' terminals; neither is instant.
		for _, f := range strings.Fields(string(panes)) {
			pid, _ := strconv.Atoi(f)
			if pid > 0 && waitUntil(ctx, func() bool { return !alive(pid) }) != nil {
				errs = append(errs, fmt.Errorf("window process %d is still running", pid))
			}
		}
		os.Remove(strings.TrimSpace(string(sock))) // tmux leaves its socket file behind
	}
	if waitUntil(ctx, func() bool { return len(processesOf(d.agentExe())) == 0 }) != nil {
		errs = append(errs, fmt.Errorf("demo agents still running: pids %v", processesOf(d.agentExe())))
	}

	// The services: asked to stop; killed if they will not. The engine
	// first: it is tamq's client.
	for _, svc := range []struct{ program, exe, lock string }{
		{"coordination-engine", d.engine, filepath.Join(d.stateDir(), "coordination-engine", "coordination-engine.lock")},
		{"tamq", d.tamq, filepath.Join(d.stateDir(), "tamq", "tamq.lock")},
	} {
		if _, err := d.call(ctx, svc.program, "stop"); err != nil {
			errs = append(errs, err)
		}
		if pid := servicePID(svc.lock, svc.exe); pid > 0 && alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			if waitUntil(ctx, func() bool { return !alive(pid) }) != nil {
				errs = append(errs, fmt.Errorf("%s (pid %d) is still running", svc.program, pid))
			}
		}
	}
	if err := d.stopHub(ctx); err != nil {
		errs = append(errs, err)
	}

	if len(errs) > 0 {
		// Keep the files: the log says what went wrong.
		return fmt.Errorf("%w (left %s for a look)", errors.Join(errs...), d.dir)
	}
	return os.RemoveAll(d.dir)
}

// servicePID is the pid in a service's lock file when that process runs
// exe, else 0 (a stale file or a reused pid).
func servicePID(lock, exe string) int {
	b, err := os.ReadFile(lock)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || strings.TrimSuffix(p, " (deleted)") != exe {
		return 0
	}
	return pid
}

// printKeep says how to look at what --keep left running, and how to remove it.
func (d *demo) printKeep() {
	var exports []string
	for _, kv := range d.envVars() {
		name, value, _ := strings.Cut(kv, "=")
		exports = append(exports, name+"="+shellQuote(value))
	}
	tamq, engine := shellQuote(d.tamq), shellQuote(d.engine)
	rm := shellQuote(d.dir)
	if d.tmuxSocket != "" {
		rm += " " + shellQuote(d.tmuxSocket) // tmux leaves its socket file behind
	}
	w := d.out
	fmt.Fprintf(w, "The demo is still running (--keep).\n")
	fmt.Fprintf(w, "  Watch it:  tmux -L %s attach -t tamq:alpha\n", d.tmux)
	fmt.Fprintf(w, "             (a window per repo: C-b n and C-b p switch, C-b d detaches)\n")
	fmt.Fprintf(w, "  Use it:    in a shell of its own, first\n")
	fmt.Fprintf(w, "               export %s\n", strings.Join(exports, " "))
	fmt.Fprintf(w, "             then, for example:\n")
	fmt.Fprintf(w, "               %s explain B; %s receipts; %s status\n", engine, engine, tamq)
	curl := "curl -s --unix-socket " + shellQuote(strings.TrimPrefix(d.hubURL, "unix://")) + " http://localhost"
	fmt.Fprintf(w, "               %s/v1/workplans\n", curl)
	fmt.Fprintf(w, "               %s/v1/tasks/%s -X PATCH -H 'Content-Type: application/json' -d '{\"needs_human\": false}'   # H's human says go\n", curl, taskHuman)
	fmt.Fprintf(w, "  Your turn: %s tasks (--needs-you, --tree); %s top (arrows pick a task, Enter goes to its window)\n", engine, tamq)
	fmt.Fprintf(w, "             theta's agent finishes W when you run: rm %s   (rm %s closes eta's dialog)\n",
		shellQuote(d.holdFile("theta")), shellQuote(d.holdFile("eta")))
	fmt.Fprintf(w, "  Clean up:  with those exports:\n")
	fmt.Fprintf(w, "               %s stop; %s stop; kill $(cat %s); tmux -L %s kill-server; rm -rf %s\n",
		engine, tamq, shellQuote(d.hubPIDFile()), d.tmux, rm)
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// processesOf lists the live processes whose executable is exe. It reads
// /proc; without one (not Linux) it knows of none.
func processesOf(exe string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A running program whose file was removed reads as "path (deleted)".
		if p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(p, " (deleted)") == exe && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive says whether pid is a running process. A zombie is not: where init
// does not reap (some containers), the dead keep their pids.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: kill(0) is all we know
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// pause sleeps for d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
