package broker

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// outer is the terminal the broker runs in: a real PTY whose master plays the
// user (typing, reading the screen, resizing).
type outer struct {
	master, tty *os.File
	mu          sync.Mutex
	screen      bytes.Buffer
}

func newOuter(t *testing.T, rows, cols uint16) *outer {
	t.Helper()
	m, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); tty.Close() })
	if err := pty.Setsize(m, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	o := &outer{master: m, tty: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			o.mu.Lock()
			o.screen.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return o
}

func (o *outer) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.WaitFor(t, "the screen to show "+strconv.Quote(want), func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return strings.Contains(o.screen.String(), want)
	})
}

func TestRelayIsTransparent(t *testing.T) {
	o := newOuter(t, 33, 101)
	before, err := term.GetState(int(o.tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	script := `stty size; printf 'ready\n'; read line; printf 'got:%s\n' "$line"; ` +
		`printf 'resize\n'; read line2; stty size; exit 7`
	r := &Relay{Argv: []string{"sh", "-c", script}, In: o.tty, Out: o.tty, Env: []string{"PATH=" + os.Getenv("PATH")}}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := r.Run()
		done <- result{code, err}
	}()
	o.waitFor(t, "33 101")
	o.waitFor(t, "ready")
	// Raw mode on the outer terminal: the child's own terminal does the echo.
	if st, _ := term.GetState(int(o.tty.Fd())); st == nil || *st == *before {
		t.Error("outer terminal not in raw mode while the child runs")
	}
	o.master.Write([]byte("hello ünï\r"))
	o.waitFor(t, "got:hello ünï")
	o.waitFor(t, "resize")
	// A resize of the outer terminal reaches the child.
	if err := pty.Setsize(o.master, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGWINCH) // what the terminal driver sends the foreground group
	testutil.WaitFor(t, "the resize to reach the child's terminal", func() bool {
		ws, err := r.childSize()
		return err == nil && ws.Rows == 40 && ws.Cols == 120
	})
	o.master.Write([]byte("\r"))
	o.waitFor(t, "40 120")
	res := <-done
	if res.err != nil || res.code != 7 {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	if after, _ := term.GetState(int(o.tty.Fd())); after == nil || *after != *before {
		t.Error("outer terminal mode not restored after the child exited")
	}
}

func TestExitStatusOfASignal(t *testing.T) {
	o := newOuter(t, 24, 80)
	r := &Relay{Argv: []string{"sh", "-c", "kill -TERM $$"}, In: o.tty, Out: o.tty}
	code, err := r.Run()
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Fatalf("Run = %d, %v", code, err)
	}
}

func TestCtrlCReachesTheChildNotTheBroker(t *testing.T) {
	o := newOuter(t, 24, 80)
	r := &Relay{Argv: []string{"sh", "-c", "trap 'echo caught; exit 3' INT; echo armed; while :; do sleep 0.05; done"}, In: o.tty, Out: o.tty}
	done := make(chan int, 1)
	go func() {
		code, _ := r.Run()
		done <- code
	}()
	o.waitFor(t, "armed")
	o.master.Write([]byte{0x03}) // ^C, as the keyboard sends it
	o.waitFor(t, "caught")
	if code := <-done; code != 3 {
		t.Fatalf("exit %d", code)
	}
}

// A process the agent leaves behind holding the terminal (Codex leaves a
// daemon) does not keep the broker from exiting with the agent.
func TestRunEndsWithTheChildNotWhatItLeftBehind(t *testing.T) {
	var out bytes.Buffer
	r := &Relay{Argv: []string{"sh", "-c", "sleep 60 & echo left-behind; exit 4"}, Out: &out}
	t.Cleanup(func() { r.Signal(syscall.SIGKILL) }) // what it left behind
	done := make(chan int, 1)
	go func() { code, _ := r.Run(); done <- code }()
	select {
	case code := <-done:
		if code != 4 || !strings.Contains(out.String(), "left-behind") {
			t.Fatalf("Run = %d, %q", code, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run waited for the process the child left behind")
	}
}

func TestWithoutATerminal(t *testing.T) {
	var out bytes.Buffer
	in, w, _ := os.Pipe()
	w.Close()
	r := &Relay{Argv: []string{"printf", "plain\\n"}, In: in, Out: &out}
	code, err := r.Run()
	if err != nil || code != 0 || !strings.Contains(out.String(), "plain") {
		t.Fatalf("Run = %d, %v, %q", code, err, out.String())
	}
}

// BenchmarkRelayThroughput compares 64 MB of child output through the relay
// with the same child under a bare PTY read directly. Target: at least 0.8.
func BenchmarkRelayThroughput(b *testing.B) {
	const size = 64 << 20
	argv := []string{"head", "-c", "67108864", "/dev/zero"}
	var direct, relayed time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cmd := execCommand(argv)
		ptmx, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, ptmx)
		cmd.Wait()
		ptmx.Close()
		direct += time.Since(t0)

		t0 = time.Now()
		r := &Relay{Argv: argv, Out: io.Discard}
		if _, err := r.Run(); err != nil {
			b.Fatal(err)
		}
		relayed += time.Since(t0)
	}
	b.ReportMetric(float64(size)*float64(b.N)/direct.Seconds()/1e6, "direct-MB/s")
	b.ReportMetric(float64(size)*float64(b.N)/relayed.Seconds()/1e6, "relayed-MB/s")
	b.ReportMetric(direct.Seconds()/relayed.Seconds(), "ratio")
}

func TestAwaitMoment(t *testing.T) {
	start := func(script string) *Relay {
		r := &Relay{Argv: []string{"sh", "-c", script}, Out: io.Discard}
		done := make(chan struct{})
		go func() { r.Run(); close(done) }()
		t.Cleanup(func() { r.Signal(syscall.SIGKILL); <-done })
		testutil.WaitFor(t, "the child to run", func() bool { return r.Signal(0) == nil })
		return r
	}
	chatty := start("while :; do echo busy; sleep 0.005; done")
	testutil.WaitFor(t, "the child's first output", func() bool { return chatty.lastOutput.Load() != 0 })
	if quiet, waited := chatty.AwaitMoment(Moment{Quiet: 200 * time.Millisecond, MaxWait: 100 * time.Millisecond}); quiet || waited < 100*time.Millisecond {
		t.Errorf("a chatty agent gave a quiet moment (%v after %v)", quiet, waited)
	}
	silent := start("exec sleep 60")
	if quiet, _ := silent.AwaitMoment(Moment{Quiet: 20 * time.Millisecond, MaxWait: 5 * time.Second}); !quiet {
		t.Error("a silent agent gave no quiet moment")
	}
	busy := func() bool { return true }
	if quiet, waited := silent.AwaitMoment(Moment{Quiet: 0, MaxWait: 50 * time.Millisecond, Busy: busy}); quiet || waited < 50*time.Millisecond {
		t.Errorf("an operator mid-line did not hold the delivery back (%v after %v)", quiet, waited)
	}
}
