package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// demoRun is one demo run as a test sees it.
type demoRun struct {
	tamq string // this test's own copy of tamq, so its processes are told apart
	cmd  *exec.Cmd
	out  bytes.Buffer // stdout and stderr
	mu   sync.Mutex
	seen chan string // stdout lines as they come
}

// startDemo starts the demo binary with args; its processes run this test's
// own copy of tamq. If the test fails before the demo cleaned up, whatever it
// left is removed.
func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the demo needs tmux (CI installs it): ", err)
	}
	bin := testutil.Binaries(t)
	r := &demoRun{tamq: filepath.Join(t.TempDir(), "tamq"), seen: make(chan string, 1000)}
	if err := copyFile(filepath.Join(bin, "tamq"), r.tamq, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r.cmd = exec.CommandContext(ctx, filepath.Join(bin, "tamq-demo"), append([]string{"--tamq", r.tamq}, args...)...)
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.out.Write(p)
	})
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			r.seen <- sc.Text()
		}
		close(r.seen)
	}()
	t.Cleanup(func() {
		if d := r.demo(); d != nil {
			if _, err := os.Stat(d.dir); err == nil {
				d.cleanup()
			}
		}
	})
	return r
}

// wait waits for the demo to exit and returns its exit status.
func (r *demoRun) wait(t *testing.T) int {
	t.Helper()
	for range r.seen { // all of stdout first, then Wait
	}
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (r *demoRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

var (
	workspaceRE = regexp.MustCompile(`(?m)^  workspace  (\S+)`)
	tmuxRE      = regexp.MustCompile("`tmux -L ([^`]+)`")
	timelineRE  = regexp.MustCompile(`(?m)^  \+(\d+\.\d{3})s  +(\S+) -> (\S+) +(\S+) +\+\d+\.\d{3}s +(.*)$`)
)

// demo is the run's temporary root and tmux server, as the demo printed them
// (nil before it has).
func (r *demoRun) demo() *demo {
	out := r.output()
	w, tm := workspaceRE.FindStringSubmatch(out), tmuxRE.FindStringSubmatch(out)
	if w == nil || tm == nil {
		return nil
	}
	return &demo{tamq: r.tamq, dir: w[1], tmux: tm[1], out: io.Discard}
}

// checkGone fails unless everything the demo started has gone: the tmux
// server, the service and every other process of its tamq, the agents, and
// the temporary directory.
func checkGone(t *testing.T, r *demoRun, d *demo) {
	t.Helper()
	if out, err := exec.Command("tmux", "-L", d.tmux, "list-sessions").CombinedOutput(); err == nil {
		t.Errorf("tmux server -L %s still runs:\n%s", d.tmux, out)
	}
	if _, err := os.Stat(d.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's directory %s is still there (%v)", d.dir, err)
	}
	if runtime.GOOS == "linux" {
		for _, exe := range []string{r.tamq, d.agentExe()} {
			if pids := processesOf(exe); len(pids) > 0 {
				t.Errorf("processes of %s still run: %v", exe, pids)
			}
		}
	}
}

// The relay, in order: who sends to whom.
var wantTimeline = [][2]string{
	{"operator/o", "alpha"},
	{"alpha", "beta"},
	{"beta", "gamma"},
	{"gamma", "alpha"},
	{"alpha", "gamma"},
}

func checkTimeline(t *testing.T, out string) {
	t.Helper()
	rows := timelineRE.FindAllStringSubmatch(out, -1)
	if len(rows) != len(wantTimeline) {
		t.Fatalf("timeline has %d messages, want %d:\n%s", len(rows), len(wantTimeline), out)
	}
	if rows[0][1] != "0.000" {
		t.Errorf("the first message is at +%ss, want +0.000s", rows[0][1])
	}
	last := 0.0
	for i, row := range rows {
		if row[2] != wantTimeline[i][0] || row[3] != wantTimeline[i][1] || row[4] != "injected" {
			t.Errorf("message %d: %s -> %s %s, want %s -> %s injected", i, row[2], row[3], row[4], wantTimeline[i][0], wantTimeline[i][1])
		}
		at, err := strconv.ParseFloat(row[1], 64)
		if err != nil || at < last {
			t.Errorf("message %d at +%ss is before the one above it", i, row[1])
		}
		last = at
	}
	if !strings.Contains(rows[0][5], "hops left: 3") || !strings.Contains(rows[4][5], "alpha > beta > gamma > alpha") {
		t.Errorf("unexpected bodies:\n%s", out)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := startDemo(t)
	if code := r.wait(t); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, r.output())
	}
	out := r.output()
	checkTimeline(t, out)
	d := r.demo()
	if d == nil || !strings.Contains(out, "cleaned up") {
		t.Fatalf("the demo did not say where it worked or that it cleaned up:\n%s", out)
	}
	checkGone(t, r, d)
}

func TestDemoKeep(t *testing.T) {
	t.Parallel()
	r := startDemo(t, "--keep")
	if code := r.wait(t); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, r.output())
	}
	out := r.output()
	checkTimeline(t, out)
	d := r.demo()
	if d == nil {
		t.Fatalf("the demo did not say where it worked:\n%s", out)
	}
	// The tmux server, its windows and the service are left for the user,
	// with the commands to use them.
	b, err := exec.Command("tmux", "-L", d.tmux, "list-windows", "-t", "tamq", "-F", "#{window_name}").CombinedOutput()
	if windows := strings.Fields(string(b)); err != nil || !slices.Equal(windows, []string{"alpha", "beta", "gamma"}) {
		t.Errorf("the tmux server is not left running with the windows: %v\n%s", err, b)
	}
	if _, err := d.call(context.Background(), "tamq", "ping"); err != nil {
		t.Errorf("the service is not left running: %v", err)
	}
	for _, want := range []string{"tmux -L " + d.tmux + " attach", "export XDG_CONFIG_HOME=", "kill-server"} {
		if !strings.Contains(out, want) {
			t.Errorf("the --keep instructions lack %q:\n%s", want, out)
		}
	}
	if err := d.cleanup(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, r, d)
}

func TestDemoCleansUpWhenInterrupted(t *testing.T) {
	t.Parallel()
	r := startDemo(t)
	// Interrupted once the windows are open: the service, tmux server and
	// agents all run.
	for line := range r.seen {
		if strings.Contains(line, "brokers") {
			break
		}
	}
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("interrupting the demo: %v\n%s", err, r.output())
	}
	if code := r.wait(t); code != 130 {
		t.Fatalf("demo exit %d, want 130:\n%s", code, r.output())
	}
	out := r.output()
	if !strings.Contains(out, "tamq-demo: interrupted") {
		t.Errorf("no message says the demo was interrupted:\n%s", out)
	}
	d := r.demo()
	if d == nil {
		t.Fatalf("the demo did not say where it worked:\n%s", out)
	}
	checkGone(t, r, d)
}

func TestAgentRelay(t *testing.T) {
	ring := []string{"alpha", "beta", "gamma"}
	cases := []struct {
		self, in string
		want     []string // the lines it prints after its greeting
	}{
		{"alpha", "From:operator/o: Hi alpha, please start a relay (hops left: 3)\n", []string{
			"alpha: got the baton from operator, passing it on to beta.",
			"To:beta: Relay baton from alpha, please pass it on (hops left: 2, route: alpha)",
			"",
		}},
		{"gamma", "\x1b[200~From:beta: Relay baton from beta, please pass it on (hops left: 1, route: alpha > beta)\x1b[201~\r\n", []string{
			"gamma: got the baton from beta, passing it on to alpha.",
			"To:alpha: Relay baton from gamma, please pass it on (hops left: 0, route: alpha > beta > gamma)",
			"",
		}},
		{"alpha", "From:gamma: Relay baton from gamma, please pass it on (hops left: 0, route: alpha > beta > gamma)\n", []string{
			"alpha: the relay is done, telling gamma.",
			"To:gamma: Thanks gamma, the baton is back with alpha after 3 hops (alpha > beta > gamma > alpha). Relay complete!",
			"",
		}},
		// The summary, typed lines and an operator's last hop get no To: block.
		{"gamma", "From:alpha: Thanks gamma, the baton is back with alpha after 3 hops (alpha > beta > gamma > alpha). Relay complete!\nls -l\n", []string{
			"gamma: noted, nothing to answer.",
			"",
		}},
		{"beta", "From:operator/o: last hop (hops left: 0)\n", []string{
			"beta: the baton is back with beta after 0 hops (beta). Relay complete!",
			"",
		}},
		{"gamma", "From:beta/o: typed in beta's window (hops left: 0, route: alpha > beta)\n", []string{
			"gamma: the baton ended with gamma after 2 hops (alpha > beta > gamma). Relay complete!",
			"",
		}},
	}
	for _, c := range cases {
		var out strings.Builder
		if err := runAgent(strings.NewReader(c.in), &out, c.self, ring); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out.String(), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], c.self+"'s demo agent") {
			t.Fatalf("no greeting: %q", out.String())
		}
		got := lines[2 : len(lines)-1]
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s given %q printed\n%s\nwant\n%s", c.self, c.in, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	if err := runAgent(strings.NewReader(""), io.Discard, "delta", ring); err == nil {
		t.Error("an agent outside the ring started")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
