package top_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/top"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.MoreParallel(4)
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// sources are the test environment's services, for gathering in this
// process (tests poll it; a process per poll would cost more than what is
// tested).
func sources(t testing.TB, e *testutil.Env) top.Sources {
	t.Helper()
	getenv := func(key string) string {
		for _, kv := range e.Vars {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				return v
			}
		}
		return ""
	}
	s := top.Sources{Timeout: 5 * time.Second}
	var err error
	if s.Tamq, err = paths.Resolve(paths.Tamq, getenv); err != nil {
		t.Fatal(err)
	}
	if s.Engine, err = paths.Resolve(paths.Engine, getenv); err != nil {
		t.Fatal(err)
	}
	return s
}

// tamq with two windows and two messages in different states, then the
// engine: one frame shows the windows, the queue by state, the link and the
// engine's leases and receipts, as the services report them.
func TestOnceShowsTamqAndTheEngine(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, "[delivery]\nenter_pause_ms = 20\n")
	// No State Hub: a closed port, never another test's hub.
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	e.Gita(t, "alpha", "beta")
	tm := testutil.NewTmux(t)
	t.Cleanup(func() {
		e.Run(t, "tamq", "stop")
		e.Run(t, "coordination-engine", "stop")
	})
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "alpha", "beta")
	for _, r := range []string{"alpha", "beta"} {
		testutil.WaitFor(t, "the recorder of "+r, func() bool { _, ok := e.Recording(r); return ok })
	}
	e.Tamq(t, "send", "To:alpha: one")
	e.Tamq(t, "send", "--ack-mode", "acknowledged", "To:beta: two")

	e.Engine(t, "start", "--detach")
	src := sources(t, e)
	var snap top.Snapshot
	testutil.WaitFor(t, "both messages delivered and tamq attached", func() bool {
		snap = top.Gather(context.Background(), src)
		st := snap.Tamq.Status
		return st != nil && st.Queue.Counts["injected"] == 1 && st.Queue.Counts["awaiting_ack"] == 1 &&
			st.Coordination.Attached && snap.Engine.Running
	})

	r := e.Tamq(t, "top", "--once")
	for _, want := range []string{
		"tamq: running",
		"queue: queued 0, delivering 0, injected 1, awaiting_ack 1, acknowledged 0, failed 0",
		", 2 windows",
		"REPO   MODE",
		"coordination: attached: ",
		"coordination-engine: running",
		"leases: offered 0, acknowledged 0, running 0",
		"tamq: reachable, 1 endpoint attached",
		"statehub: http://127.0.0.1:9 NOT reachable",
		"receipts: latest ",
		"service.start",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.Stdout)
		}
	}
	for _, repo := range []string{"alpha", "beta"} {
		if !strings.Contains(r.Stdout, "\n    "+repo+" ") || !strings.Contains(r.Stdout, "alive") {
			t.Errorf("no live row for %s in:\n%s", repo, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "\x1b") {
		t.Errorf("--once wrote an escape sequence:\n%q", r.Stdout)
	}

	r = e.Tamq(t, "top", "--once", "--json")
	var got top.Snapshot
	if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
		t.Fatalf("top --once --json: %v\n%s", err, r)
	}
	if !got.Tamq.Running || len(got.Tamq.Status.Endpoints) != 1 || len(got.Tamq.Status.Endpoints[0].Windows) != 2 ||
		!got.Engine.Running || got.Engine.Status.Leases.Counts == nil || len(got.Engine.Receipts) == 0 {
		t.Errorf("snapshot: %s", r.Stdout)
	}
	for _, rc := range got.Engine.Receipts {
		if rc.Kind == "" || rc.At.IsZero() {
			t.Errorf("receipt without kind or time: %+v", rc)
		}
	}
}

// With nothing running a frame says so, and it is not an error.
func TestOnceWithNothingRunning(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	r := e.Tamq(t, "top", "--once")
	for _, want := range []string{"tamq: not running\n", "coordination-engine: not running\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r)
		}
	}
	r = e.Tamq(t, "top", "--once", "--json")
	var got top.Snapshot
	if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil || got.Tamq.Running || got.Engine.Running ||
		got.Tamq.Error != top.NotRunning || got.Engine.Error != top.NotRunning {
		t.Errorf("snapshot (%v): %s", err, r.Stdout)
	}
	if _, err := os.Stat(e.TamqState()); !os.IsNotExist(err) {
		t.Errorf("top created tamq's state directory: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	for _, args := range [][]string{
		{"top", "--interval", "100ms"},
		{"top", "--json"},
		{"top"}, // no terminal
	} {
		if r := e.Run(t, "tamq", args...); r.Status != 2 {
			t.Errorf("tamq %s: %s, want exit 2", strings.Join(args, " "), r)
		}
	}
}

// altScreenOff is what leaves the alternate screen (mode 1049); showCursor
// shows the cursor again.
const (
	altScreenOff = "\x1b[?1049l"
	showCursor   = "\x1b[?25h"
)

// onTerminal is `tamq top` running on a real PTY of 100x30.
type onTerminal struct {
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

// startTop starts `tamq top` on a PTY and waits for its first frame.
func startTop(t *testing.T, e *testutil.Env, args ...string) *onTerminal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if len(args) == 0 {
		args = []string{"--interval", "200ms"}
	}
	o := &onTerminal{cmd: e.Command(ctx, "tamq", append([]string{"top"}, args...)...), done: make(chan struct{})}
	var err error
	if o.ptmx, err = pty.StartWithSize(o.cmd, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.ptmx.Close() })
	go func() {
		defer close(o.done)
		b := make([]byte, 4096)
		for {
			n, err := o.ptmx.Read(b)
			o.mu.Lock()
			o.buf.Write(b[:n])
			o.mu.Unlock()
			if err != nil {
				return // EIO once the child has exited and closed the terminal
			}
		}
	}()
	o.waitFor(t, "coordination-engine: not running")
	return o
}

func (o *onTerminal) out() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *onTerminal) waitFor(t *testing.T, text string) {
	t.Helper()
	testutil.WaitFor(t, text+" on the terminal", func() bool { return strings.Contains(o.out(), text) })
}

// wait waits for the program to exit 0 and returns all it wrote.
func (o *onTerminal) wait(t *testing.T) string {
	t.Helper()
	werr := o.cmd.Wait()
	o.ptmx.Close()
	<-o.done
	if werr != nil {
		t.Fatalf("tamq top on a terminal: %v\n%q", werr, o.out())
	}
	return o.out()
}

// The interactive view starts on the alternate screen, refreshes, and 'q'
// quits with the terminal given back: the output ends by leaving the
// alternate screen with the cursor shown.
func TestInteractiveQuitsOnQ(t *testing.T) {
	t.Parallel()
	o := startTop(t, testutil.NewEnv(t))
	if !strings.Contains(o.out(), "\x1b[?1049h") {
		t.Errorf("the view did not use the alternate screen: %q", o.out())
	}
	o.ptmx.WriteString("q")
	checkRestored(t, o.wait(t))
}

// Ctrl-C quits as q does; so does SIGTERM. (Esc does not: see
// TestTheLoopPaneKeys.)
func TestInteractiveQuitsOnCtrlCAndSIGTERM(t *testing.T) {
	t.Parallel()
	for name, quit := range map[string]func(*onTerminal){
		"ctrl-c":  func(o *onTerminal) { o.ptmx.WriteString("\x03") },
		"sigterm": func(o *onTerminal) { o.cmd.Process.Signal(syscall.SIGTERM) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := startTop(t, testutil.NewEnv(t))
			quit(o)
			checkRestored(t, o.wait(t))
		})
	}
}

// A resized terminal gets a frame cut to its new width: at 100 columns the
// title is whole, at 12 it is cut.
func TestInteractiveRedrawsOnResize(t *testing.T) {
	t.Parallel()
	o := startTop(t, testutil.NewEnv(t))
	if !strings.Contains(o.out(), "q quits") {
		t.Fatalf("the title is cut at 100 columns: %q", o.out())
	}
	if err := pty.Setsize(o.ptmx, &pty.Winsize{Rows: 30, Cols: 12}); err != nil {
		t.Fatal(err)
	}
	o.waitFor(t, "tamq top  2…")
	o.ptmx.WriteString("q")
	checkRestored(t, o.wait(t))
}

// checkRestored checks that the output ends by leaving the alternate screen
// and showing the cursor: nothing but mode resets follow, no text.
func checkRestored(t *testing.T, out string) {
	t.Helper()
	i := strings.LastIndex(out, altScreenOff)
	if i < 0 {
		t.Fatalf("the alternate screen was not left: %q", out)
	}
	rest := out[i+len(altScreenOff):]
	if !strings.Contains(rest, showCursor) {
		t.Errorf("the cursor was not shown again after leaving the alternate screen: %q", rest)
	}
	if text := csi.ReplaceAllString(rest, ""); text != "" {
		t.Errorf("more than mode resets after leaving the alternate screen: %q", rest)
	}
}

// csi matches one control sequence.
var csi = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]`)

// A change refreshes the view at once: with a minute between refreshes when
// nothing changes, a message sent shows in the queue's counts within the
// test's wait, not a minute later. The view runs in a tmux pane, read with
// capture-pane: a terminal UI redraws only what changed.
func TestInteractiveRefreshesOnChange(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, "[delivery]\nenter_pause_ms = 0\n")
	e.Gita(t, "alpha")
	tm := testutil.NewTmux(t)
	t.Cleanup(func() { e.Run(t, "tamq", "stop") })
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "alpha")
	testutil.WaitFor(t, "the recorder of alpha", func() bool { _, ok := e.Recording("alpha"); return ok })
	argv := append([]string{"new-session", "-d", "-s", "watch", "-x", "150", "-y", "40", "env"}, e.Vars...)
	tm.Must(t, append(argv, filepath.Join(e.Bin, "tamq"), "top", "--interval", "1m")...)
	screen := func(want string) {
		t.Helper()
		testutil.WaitFor(t, want+" in tamq top", func() bool {
			return strings.Contains(tm.Must(t, "capture-pane", "-p", "-t", "watch"), want)
		})
	}
	screen("at least every 1m0s")
	screen("queued 0, delivering 0, injected 0")
	e.Tamq(t, "send", "To:alpha: one")
	screen("injected 1")
	tm.Must(t, "send-keys", "-t", "watch", "q")
}
