// Package testutil builds and runs the real programs for integration tests:
// binaries built once per test process, private XDG directories per test,
// private tmux servers. Nothing here is a fake of the project's own parts.
package testutil

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"golang.org/x/sys/unix"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	prebuilt  bool // binDir is TAMQ_TEST_BIN: not ours to remove
)

// Binaries builds tamq, coordination-engine, tamq-demo, squatter (a hostile
// local user's stand-in) and scriptedagent (an agent for the wake loop) once
// per test process into a directory every user can read and execute (tests
// run children under other uids), and returns that directory. Under `make
// test` they are built once for all packages, in TAMQ_TEST_BIN.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		// `make test` builds them once for every package (TAMQ_TEST_BIN).
		if dir := os.Getenv("TAMQ_TEST_BIN"); dir != "" {
			binDir, prebuilt = dir, true
			return
		}
		dir, err := os.MkdirTemp("", "tamq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/tmux-amq/tamq/cmd/...", "github.com/tmux-amq/tamq/tools/tamq-demo",
			"github.com/tmux-amq/tamq/internal/testutil/squatter", "github.com/tmux-amq/tamq/internal/testutil/scriptedagent")
		// As the Makefile builds them: static, so no dynamic loader runs at start.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binDir = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// Env is a private set of XDG directories and the environment that points the
// programs at them.
type Env struct {
	Root    string // world-readable root of everything below
	Home    string
	Config  string // XDG_CONFIG_HOME
	State   string // XDG_STATE_HOME
	Runtime string // XDG_RUNTIME_DIR
	Bin     string
	Vars    []string
	// ProgramVars are added to Vars for one program's commands (its
	// service inherits them).
	ProgramVars map[string][]string
}

// NewEnv makes fresh directories for one test and removes them afterwards.
// The root is 0755 so that children running as another uid can reach the
// binaries and whatever the test opens up for them.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	bin := Binaries(t)
	root, err := os.MkdirTemp("", "tamq-it-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Mkdir(filepath.Join(root, "rec"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := &Env{
		Root: root, Bin: bin,
		Home:    filepath.Join(root, "home"),
		Config:  filepath.Join(root, "config"),
		State:   filepath.Join(root, "state"),
		Runtime: filepath.Join(root, "run"),
	}
	// Whatever a failing test left running is killed before its files go,
	// and what the daemons logged is shown first: it says why.
	t.Cleanup(func() { e.killService() })
	t.Cleanup(func() {
		if t.Failed() {
			e.logTails(t)
		}
	})
	e.Vars = []string{
		"HOME=" + e.Home, "XDG_CONFIG_HOME=" + e.Config, "XDG_STATE_HOME=" + e.State, "XDG_RUNTIME_DIR=" + e.Runtime,
		"PATH=" + os.Getenv("PATH"),
	}
	// Where tmux keeps its sockets: the test's tmux servers (NewTmux) are
	// started with the test's environment, and the programs find them by
	// name there. `make test` moves it out of the user's /tmp/tmux-UID
	// (internal/testutil/homeguard).
	if dir := os.Getenv("TMUX_TMPDIR"); dir != "" {
		e.Vars = append(e.Vars, "TMUX_TMPDIR="+dir)
	}
	// Until the test writes its own, both config files name a State Hub
	// of the test's (PrivateStateHub).
	e.WriteConfig(t, "")
	e.WriteEngineConfig(t, "")
	return e
}

// logTails logs the last lines of the daemons' logs, for a failed test.
func (e *Env) logTails(t testing.TB) {
	const lines = 80
	for _, f := range []string{filepath.Join(e.TamqState(), "tamq.log"), filepath.Join(e.EngineState(), "coordination-engine.log")} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("the last %d lines of %s:\n%s", min(lines, len(all)), filepath.Base(f), strings.Join(all[max(len(all)-lines, 0):], "\n"))
	}
}

// killService kills the tamq service and coordination-engine holding this
// environment's locks, if they still run (a lock file names its holder).
func (e *Env) killService() {
	for _, lock := range []string{filepath.Join(e.TamqState(), "tamq.lock"), filepath.Join(e.EngineState(), "coordination-engine.lock")} {
		b, err := os.ReadFile(lock)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.HasPrefix(exe, e.Bin+"/") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// EngineState is coordination-engine's state directory.
func (e *Env) EngineState() string { return filepath.Join(e.State, "coordination-engine") }

// TamqState is tamq's state directory.
func (e *Env) TamqState() string { return filepath.Join(e.State, "tamq") }

// Socket is tamq's socket path.
func (e *Env) Socket() string { return filepath.Join(e.Runtime, "tamq.sock") }

// Database is tamq's database path.
func (e *Env) Database() string { return filepath.Join(e.TamqState(), "tamq.sqlite3") }

// Result is a finished command.
type Result struct {
	Stdout, Stderr string
	Status         int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Status, r.Stdout, r.Stderr)
}

// Command prepares a program of the project with the test's environment.
func (e *Env) Command(ctx context.Context, program string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Bin, program), args...)
	cmd.Env = append(append([]string{}, e.Vars...), e.ProgramVars[program]...)
	cmd.Dir = e.Root
	return cmd
}

// Run runs a program to completion (bounded by a minute).
func (e *Env) Run(t testing.TB, program string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return RunCmd(t, e.Command(ctx, program, args...))
}

// RunCmd runs cmd and collects its output and exit status.
func RunCmd(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Status = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", cmd.Path, err)
	}
	return r
}

// Tamq runs tamq and fails the test unless it exits 0.
func (e *Env) Tamq(t testing.TB, args ...string) Result {
	t.Helper()
	r := e.Run(t, "tamq", args...)
	if r.Status != 0 {
		t.Fatalf("tamq %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// Engine runs coordination-engine and fails the test unless it exits 0.
func (e *Env) Engine(t testing.TB, args ...string) Result {
	t.Helper()
	r := e.Run(t, "coordination-engine", args...)
	if r.Status != 0 {
		t.Fatalf("coordination-engine %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// Paths are the paths a program resolves in the test's environment (its
// sockets, state directory, database), as the programs the test runs see
// them.
func (e *Env) Paths(t testing.TB, program paths.Program) paths.Paths {
	t.Helper()
	p, err := paths.Resolve(program, func(key string) string {
		for _, kv := range e.Vars {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				return v
			}
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitFor polls cond until it holds or the deadline passes; the deadline is a
// safety net for a broken test, not a timing assumption.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitUpTo(t, what, 30*time.Second, cond)
}

// WaitUpTo is WaitFor with a deadline of d: for the real agents, which take
// their time offline.
func WaitUpTo(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Within polls cond until it holds (true) or d has passed (false).
func Within(d time.Duration, cond func() bool) bool {
	return WithinEvery(d, 50*time.Millisecond, cond)
}

// WithinEvery is Within polling at least every step, for a benchmark that
// times when cond comes true and has no event to wait on: its figure is at
// most step late. It is the one place the tests sleep to poll.
func WithinEvery(d, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pace := backoff.Policy{Min: min(time.Millisecond, step), Max: step}
	delay := pace.Min
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
		delay = pace.Next(delay)
	}
	return true
}

// Settled polls read until its value has not changed for quiet, and says
// whether that happened within limit: "the agent stopped drawing" has no
// event to wait on, only an absence of change.
func Settled[T comparable](quiet, limit time.Duration, read func() T) bool {
	last, since := read(), time.Now()
	return Within(limit, func() bool {
		if v := read(); v != last {
			last, since = v, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

// Tmux is a private tmux server on its own socket, killed when the test ends.
type Tmux struct {
	Name string // the -L socket name
	// home is the server's HOME: an empty directory, so the shells it starts
	// read no one's rc files (a developer's can fork dozens of processes per
	// shell, a third of the suite's CPU on one machine), and the brokers in
	// its windows keep their files there, not in the user's own state
	// directory.
	home string
}

// NewTmux starts a private tmux server with one detached session.
func NewTmux(t testing.TB) *Tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is required (CI installs it): ", err)
	}
	// Short: a broker in the server's windows makes its hook socket under
	// HOME, and a socket path has at most 107 bytes.
	home, err := os.MkdirTemp("", "tamq-home-")
	if err != nil {
		t.Fatal(err)
	}
	// The runtime directory, as XDG wants it: the user's alone.
	if err := os.Mkdir(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	tm := &Tmux{Name: fmt.Sprintf("tamq-test-%d-%d", os.Getpid(), time.Now().UnixNano()), home: home}
	tm.Must(t, "new-session", "-d", "-s", "work", "-x", "200", "-y", "50")
	socket := tm.Must(t, "display", "-p", "#{socket_path}")
	t.Cleanup(func() {
		exec.Command("tmux", "-L", tm.Name, "kill-server").Run()
		os.Remove(socket) // tmux leaves its socket file behind
		os.RemoveAll(home)
	})
	return tm
}

// Cmd runs a tmux command against the private server.
func (tm *Tmux) Cmd(args ...string) ([]byte, error) {
	cmd := exec.Command("tmux", append([]string{"-L", tm.Name}, args...)...)
	if tm.home != "" {
		cmd.Env = tm.env()
	}
	return cmd.CombinedOutput()
}

// env is the environment of the server's commands, which the server (and so
// every window's shell, agent and broker) inherits from its first: the
// test's, with HOME and the XDG base directories in the server's home, so
// that a broker's hook sockets and spool go there even where the user's
// shell sets XDG_STATE_HOME (HOME alone was not enough).
func (tm *Tmux) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "XDG_") && k != "HOME" {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+tm.home, "XDG_RUNTIME_DIR="+filepath.Join(tm.home, "run"))
}

// Must runs a tmux command and fails the test on error.
func (tm *Tmux) Must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := tm.Cmd(args...)
	if err != nil {
		t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// RemoveBinaries deletes what Binaries built; call it from TestMain after m.Run.
func RemoveBinaries() {
	if binDir != "" && !prebuilt {
		os.RemoveAll(binDir)
	}
}

// Gita registers real git repositories (under Root/src) in a gita registry
// written as gita 0.16 writes it: CRLF line ends, fields quoted only when
// needed. It returns each name's path.
func (e *Env) Gita(t testing.TB, names ...string) map[string]string {
	t.Helper()
	dir := filepath.Join(e.Config, "gita")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "repos.csv"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	for _, name := range names {
		path := filepath.Join(e.Root, "src", name)
		if b, err := exec.Command("git", "init", "-q", path).CombinedOutput(); err != nil {
			t.Fatalf("git init %s: %v\n%s", path, err, b)
		}
		if _, err := io.WriteString(f, GitaRow(path, name)); err != nil {
			t.Fatal(err)
		}
		out[name] = path
	}
	return out
}

// GitaRow is one repos.csv row as gita 0.16 writes it: Python's csv writer,
// CRLF line end, fields quoted only when needed.
func GitaRow(path, name string) string {
	return pyCSV(path) + "," + pyCSV(name) + ",,\r\n"
}

// pyCSV quotes a field as Python's csv.QUOTE_MINIMAL does (unlike Go's
// encoding/csv, it does not quote a leading space).
func pyCSV(field string) string {
	if strings.ContainsAny(field, ",\"\r\n") {
		return `"` + strings.ReplaceAll(field, `"`, `""`) + `"`
	}
	return field
}

// WriteConfig writes tamq's config file.
func (e *Env) WriteConfig(t testing.TB, toml string) {
	t.Helper()
	dir := filepath.Join(e.Config, "tamq")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(e.PrivateStateHub(toml)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// StateHubSocket is the address the programs of a test look for State Hub
// at unless the test names another: a socket in its runtime directory,
// where nothing listens unless the test starts State Hub there.
func (e *Env) StateHubSocket() string { return "unix://" + filepath.Join(e.Runtime, "statehub.sock") }

// PrivateStateHub adds statehub.api_base = StateHubSocket to a config
// file's toml that names no State Hub address: the default address is the
// spec's loopback port, where the user's own State Hub may run, and a test
// must never publish to it nor read its tasks.
func (e *Env) PrivateStateHub(toml string) string { return WithStateHub(toml, e.StateHubSocket()) }

// StateHubInEnvironment readies e for programs run as another user than
// the test's: the config files NewEnv wrote are the test user's (another
// user may not read them, and refuses them if it could), so they go, and
// the test's State Hub address is given in the environment instead.
func (e *Env) StateHubInEnvironment(t testing.TB) {
	t.Helper()
	for _, program := range []string{"tamq", "coordination-engine"} {
		if err := os.RemoveAll(filepath.Join(e.Config, program)); err != nil {
			t.Fatal(err)
		}
	}
	// As before NewEnv wrote them: another user may look into the
	// directory (and finds no config file there).
	if err := os.Chmod(e.Config, 0o755); err != nil {
		t.Fatal(err)
	}
	e.Vars = append(e.Vars, "STATEHUB_API_BASE="+e.StateHubSocket())
}

// WithStateHub adds statehub.api_base = addr to a config file's toml that
// names no State Hub address (nor a tracker with an address of its own).
func WithStateHub(toml, addr string) string {
	switch {
	case strings.Contains(toml, "api_base"), strings.Contains(toml, `kind = "github"`), strings.Contains(toml, `kind = "beads"`):
		return toml
	case strings.Contains(toml, "[statehub]\n"):
		return strings.Replace(toml, "[statehub]\n", fmt.Sprintf("[statehub]\napi_base = %q\n", addr), 1)
	}
	return toml + fmt.Sprintf("\n[statehub]\napi_base = %q\n", addr)
}

// WriteEngineConfig writes coordination-engine's config file.
func (e *Env) WriteEngineConfig(t testing.TB, toml string) {
	t.Helper()
	dir := filepath.Join(e.Config, "coordination-engine")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(e.PrivateStateHub(toml)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// RecorderCommand is an agent for tests: it puts its terminal in raw mode and
// appends every byte it reads to Root/rec/<repo>, so a test sees exactly what
// reached the terminal. The file appears once the terminal is raw.
func (e *Env) RecorderCommand() string {
	return "sh -c 'stty raw -echo; exec cat > \"" + filepath.Join(e.Root, "rec") + "/$TAMQ_REPO\"'"
}

// Recording reads what the recorder of repo has received so far.
func (e *Env) Recording(repo string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(e.Root, "rec", repo))
	return string(b), err == nil
}

// Squatter is another local user's process listening on a socket path the
// user's programs may dial; Conns reports what each connection sent it.
type Squatter struct {
	mu    sync.Mutex
	conns []int
}

// Conns returns the byte counts of the connections that have ended so far.
func (s *Squatter) Conns() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int{}, s.conns...)
}

// SharedDir makes a directory under the test's root that anyone may
// create files in, with the sticky bit, as /tmp is: where another user can
// get to a path first.
func (e *Env) SharedDir(t testing.TB, name string) string {
	t.Helper()
	d := filepath.Join(e.Root, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// Squat runs the squatter as uid (with the same gid) on path until the test
// ends, and returns once it listens.
func (e *Env) Squat(t testing.TB, uid uint32, path string) *Squatter {
	t.Helper()
	s, _ := squat(t, uid, filepath.Join(e.Bin, "squatter"), path)
	return s
}

// SquatTCP runs the squatter as uid on a TCP address (as "127.0.0.1:0")
// until the test ends, and returns once it listens, with the address it
// got.
func SquatTCP(t testing.TB, uid uint32, addr string) (*Squatter, string) {
	t.Helper()
	return squat(t, uid, filepath.Join(Binaries(t), "squatter"), "tcp", addr)
}

func squat(t testing.TB, uid uint32, squatter string, args ...string) (*Squatter, string) {
	t.Helper()
	path := args[len(args)-1]
	cmd := exec.Command(squatter, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &Squatter{}
	ready := make(chan bool, 1)
	var addr string
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			var n int
			if a, ok := strings.CutPrefix(lines.Text(), "ready"); ok {
				addr = strings.TrimSpace(a)
				ready <- true
			} else if _, err := fmt.Sscanf(lines.Text(), "conn %d", &n); err == nil {
				s.mu.Lock()
				s.conns = append(s.conns, n)
				s.mu.Unlock()
			}
		}
		ready <- false
	}()
	if !<-ready {
		t.Fatalf("squatter on %s did not start: %s", path, errb.String())
	}
	return s, addr
}

// MoreParallel lets a package whose tests mostly wait (on tmux, on services,
// on delivery pauses) run n of them at once, unless -parallel was given:
// the default, GOMAXPROCS, leaves a 2-core machine idle half the time. Call
// it from TestMain before m.Run.
func MoreParallel(n int) {
	f := flag.Lookup("test.parallel")
	if f != nil && f.Value.String() == strconv.Itoa(runtime.GOMAXPROCS(0)) {
		f.Value.Set(strconv.Itoa(n))
	}
}

// HTTPServer serves h for one test and returns it with its stop, which the
// test's cleanup also runs. Stopping cuts open connections first:
// coordination-engine keeps State Hub's event stream open, and
// httptest.Server.Close alone would wait for that request forever.
func HTTPServer(t testing.TB, h http.Handler) (*httptest.Server, func()) {
	ts := httptest.NewServer(h)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ts.Config.Close()
			ts.Close()
		})
	}
	t.Cleanup(stop)
	return ts, stop
}

// StateHub serves a reference State Hub (in memory) for one test, requiring
// token when it is not empty; stop ends it early, as the cleanup does.
func StateHub(t testing.TB, token string) (url string, stop func()) {
	t.Helper()
	hub := &devhub.Server{Token: token}
	if err := hub.Open(); err != nil {
		t.Fatal(err)
	}
	ts, stop := HTTPServer(t, hub.Handler())
	return ts.URL, stop
}

// AwaitFile returns once path exists, or an error after timeout (a safety
// net for a broken test, not a timing assumption). It wakes on inotify's
// events in path's directory, which must exist, rather than on a polling
// interval: a background program's sign that it is ready is seen the moment
// it is made.
func AwaitFile(path string, timeout time.Duration) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// Watched before the first look, so that a file made between the two is
	// an event.
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		return fmt.Errorf("watching for %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 64<<10)
	for {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s did not appear in %v", path, timeout)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for { // drain: the file's existence is what counts, not which event
			if _, err := unix.Read(fd, buf); err != nil {
				break
			}
		}
	}
}
