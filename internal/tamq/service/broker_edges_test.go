package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// brokerOnTerminal runs `tamq broker` on a PTY of its own, as a window
// would, with the test as the operator.
type brokerOnTerminal struct {
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startBroker(t *testing.T, e *testutil.Env, args ...string) *brokerOnTerminal {
	t.Helper()
	b := &brokerOnTerminal{cmd: e.Command(context.Background(), "tamq", append([]string{"broker"}, args...)...), done: make(chan struct{})}
	tty, err := pty.StartWithSize(b.cmd, &pty.Winsize{Rows: 24, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	b.tty = tty
	go func() {
		defer close(b.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			b.mu.Lock()
			b.out.Write(buf[:n])
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		b.cmd.Wait()
		tty.Close()
	})
	return b
}

func (b *brokerOnTerminal) screen() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

func (b *brokerOnTerminal) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.WaitFor(t, "the broker's terminal to show "+want, func() bool { return strings.Contains(b.screen(), want) })
}

// exit waits for the broker to exit and returns its status.
func (b *brokerOnTerminal) exit(t *testing.T) int {
	t.Helper()
	err := b.cmd.Wait()
	<-b.done
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// bodiesTo lists the bodies of the messages to target, oldest first.
func bodiesTo(t *testing.T, e *testutil.Env, target string) ([]string, []api.Message) {
	t.Helper()
	var ms []api.Message
	for _, m := range history(t, e, "--body", "--repo", target) {
		if m.Target == target && m.Body != nil {
			ms = append(ms, m)
		}
	}
	slices.Reverse(ms)
	var bodies []string
	for _, m := range ms {
		bodies = append(bodies, *m.Body)
	}
	return bodies, ms
}

// Issue 10 A1: an agent that prints its block and exits at once loses
// nothing; 40 of them at the same time all arrive.
func TestBrokerSendsTheLastBlockBeforeItExits(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "railiance")
	e.Gita(t, "net-kingdom")
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := fmt.Sprintf(`printf 'To:railiance: last words %02d\n'`, i)
			r := testutil.RunCmd(t, e.Command(context.Background(), "tamq", "broker", "--repo", "net-kingdom", "--", "sh", "-c", agent))
			if r.Status != 0 {
				t.Errorf("broker %d: %s", i, r)
			}
		}()
	}
	wg.Wait()
	// Every broker has exited: what it sent is in the queue already.
	got, _ := bodiesTo(t, e, "railiance")
	slices.Sort(got)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("last words %02d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d of %d blocks arrived: %q", len(got), n, got)
	}
}

// Issue 10 A4: a service that takes connections but never answers must not
// freeze the agent's screen; what cannot wait is dropped with a notice.
func TestBrokerOutputFlowsWhileTheServiceHangs(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "railiance")
	e.Gita(t, "net-kingdom")
	pid := pingPID(t, e)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	agent := `i=0; while [ $i -lt 600 ]; do printf 'To:railiance: flood %d\n\n' $i; i=$((i+1)); done; echo ALL-PRINTED; exec sleep 60`
	b := startBroker(t, e, "--repo", "net-kingdom", "--", "sh", "-c", agent)
	b.waitFor(t, "ALL-PRINTED")
	b.waitFor(t, "lines already wait for the service; dropping lines until they go")
}

// Issue 10 A4 and A5: a broker whose service is down waits a bounded time at
// exit, leaves what it kept in its spool and says where; keys typed after
// the agent exited neither panic the broker nor reach anyone silently.
func TestBrokerLeavesItsSpoolWhenTheServiceStaysDown(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, fastConfig)
	e.Gita(t, "railiance", "net-kingdom")
	b := startBroker(t, e, "--repo", "net-kingdom", "--exit-wait", "3s", "--", "sh", "-c", `printf 'To:railiance: last words\n'; exit 3`)
	b.waitFor(t, "tamq: service down; kept 1 line for railiance, will send when it is back")
	b.waitFor(t, "tamq: the agent exited; waiting up to 3s for the service to take 1 line")
	if _, err := b.tty.Write([]byte("To:railiance: typed late\r")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "tamq: not sent to railiance: the agent has exited and the broker is closing")
	if code := b.exit(t); code != 3 {
		t.Fatalf("exit status %d, want the agent's 3\n%s", code, b.screen())
	}
	spool := filepath.Join(e.TamqState(), "spool", fmt.Sprintf("%d.jsonl", b.cmd.Process.Pid))
	if s := b.screen(); !strings.Contains(s, "tamq: service down; 1 line kept in "+spool+", not sent") || strings.Contains(s, "panic") {
		t.Fatalf("screen:\n%s", s)
	}
	st, err := os.Stat(spool)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("spool %s: %v %v", spool, st, err)
	}
	if dir, _ := os.Stat(filepath.Dir(spool)); dir.Mode().Perm() != 0o700 {
		t.Errorf("spool directory %v", dir.Mode())
	}
	raw, _ := os.ReadFile(spool)
	var kept api.SendArgs
	if err := json.Unmarshal(bytes.TrimSpace(raw), &kept); err != nil || kept.Text != "To:railiance: last words" || kept.ObservedAt == nil {
		t.Errorf("spool holds %q (%v)", raw, err)
	}
}

// Issue 10 A5: lines printed and typed while the service is stopped arrive
// after `tamq start`, in order, with the time they were seen.
func TestBrokerSendsItsSpoolWhenTheServiceIsBack(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "railiance")
	e.Gita(t, "net-kingdom")
	// Windows take tmux's global environment: the broker's spool goes to the
	// test's state directory.
	tm.Must(t, "set-environment", "-g", "XDG_STATE_HOME", e.State)
	agent := `read go; printf 'To:railiance: first\n\nTo:railiance: second\n\n'; stty raw -echo; exec cat > "` + e.Root + `/rec/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	pane := paneOf(t, tm, "net-kingdom")
	e.Tamq(t, "stop")
	seenBefore := time.Now()
	tm.Must(t, "send-keys", "-t", pane, "go", "Enter")
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", pane); return string(out) }
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", screen())
		}
	}()
	testutil.WaitFor(t, "the notices of the kept lines", func() bool { return keptLines(screen()) == 2 })
	testutil.WaitFor(t, "the recorder", func() bool { _, ok := e.Recording("net-kingdom"); return ok })
	tm.Must(t, "send-keys", "-t", pane, "-l", "To:railiance: typed while down")
	tm.Must(t, "send-keys", "-t", pane, "Enter")
	testutil.WaitFor(t, "the typed line to be kept", func() bool { return keptLines(screen()) == 3 })
	spools, _ := filepath.Glob(filepath.Join(e.TamqState(), "spool", "*.jsonl"))
	if len(spools) != 1 {
		t.Fatalf("spool files %q", spools)
	}
	seenAfter := time.Now()
	e.Tamq(t, "start", "--detach")
	want := []string{"first", "second", "typed while down"}
	var ms []api.Message
	testutil.WaitFor(t, "the kept lines to arrive", func() bool {
		var got []string
		got, ms = bodiesTo(t, e, "railiance")
		return slices.Equal(got, want)
	})
	for _, m := range ms {
		if m.CreatedAt.Before(seenBefore.Add(-time.Second)) || m.CreatedAt.After(seenAfter) {
			t.Errorf("%q recorded at %v, not when it was seen (between %v and %v)", *m.Body, m.CreatedAt, seenBefore, seenAfter)
		}
	}
	testutil.WaitFor(t, "the spool to be removed", func() bool { _, err := os.Stat(spools[0]); return os.IsNotExist(err) })
}

// keptLines adds up the notices "tamq: service down; kept N line(s) for
// railiance, will send when it is back" on a screen.
func keptLines(screen string) int {
	n := 0
	for _, m := range keptNotice.FindAllStringSubmatch(screen, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

var keptNotice = regexp.MustCompile(`tamq: service down; kept (\d+) lines? for railiance, will send when it is back`)

// paneOf is the pane id of repo's window.
func paneOf(t testing.TB, tm *testutil.Tmux, repo string) string {
	t.Helper()
	for _, line := range strings.Split(tm.Must(t, "list-windows", "-a", "-F", "#{window_name} #{pane_id}"), "\n") {
		if name, id, ok := strings.Cut(line, " "); ok && name == repo {
			return id
		}
	}
	t.Fatalf("no window for %s", repo)
	return ""
}

// bracketedAgent is an agent that turns bracketed paste on, as readline and
// agent TUIs do, and records what it receives. waitBracketed returns once the
// broker has relayed that switch to the screen, so it has seen it: a delivery
// made before might still go in unbracketed.
func bracketedAgent(e *testutil.Env) string {
	return `printf '\033[?2004hbracketed'; stty raw -echo; exec cat > "` + e.Root + `/rec/$TAMQ_REPO"`
}

func waitBracketed(t *testing.T, e *testutil.Env, tm *testutil.Tmux, repo string) {
	t.Helper()
	pane := paneOf(t, tm, repo)
	testutil.WaitFor(t, "the agent to turn bracketed paste on", func() bool {
		out, _ := tm.Cmd("capture-pane", "-p", "-t", pane)
		_, recording := e.Recording(repo)
		return recording && strings.Contains(string(out), "bracketed")
	})
}
