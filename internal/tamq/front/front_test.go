package front_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/tamq/front"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// run runs program with args and stdin in e.
func run(t *testing.T, e *testutil.Env, stdin, program string, args ...string) testutil.Result {
	t.Helper()
	cmd := e.Command(t.Context(), program, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return testutil.RunCmd(t, cmd)
}

// Every send and ping command line gives, through the front, what tamq-full
// gives: the same output, the same errors, the same exit statuses.
func TestFrontAndFullAgree(t *testing.T) {
	e := testutil.NewEnv(t)
	e.WriteConfig(t, "[delivery]\nenter_pause_ms = 0\n")
	e.Gita(t, "net-kingdom", "railiance", "shell-repo")

	// The service not running yet.
	for _, args := range [][]string{{"ping"}, {"--json", "ping"}, {"send", "To:net-kingdom: hi"}} {
		front, full := run(t, e, "", "tamq", args...), run(t, e, "", "tamq-full", args...)
		if front.Status != 8 || front != full {
			t.Fatalf("tamq %q with no service:\nfront: %s\nfull: %s", args, front, full)
		}
	}

	tm := testutil.NewTmux(t)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
	t.Cleanup(func() { e.Run(t, "tamq", "stop") })

	same := []struct {
		stdin string
		args  []string
	}{
		{"", []string{"send", "To:nowhere: hi"}},                            // not registered
		{"", []string{"send", "To:railiance: hi"}},                          // no window
		{"", []string{"send", "no address"}},                                // malformed
		{"", []string{"send", "--ack-mode", "never", "To:net-kingdom: hi"}}, // bad mode
		{"\xff\xfe", []string{"send", "-"}},                                 // not UTF-8
		{strings.Repeat("x", 20000), []string{"send", "-"}},                 // too long
		{"", []string{"--json", "send", "To:nowhere: hi"}},
		{"", []string{"--quiet", "--verbose", "ping"}},
		{"", []string{"send", "--bogus", "To:net-kingdom: hi"}},
		{"", []string{"send", "--help"}},
		{"", []string{"ping", "extra"}},
		{"", []string{"-q", "send", "To:net-kingdom: quiet"}},
	}
	for _, c := range same {
		front, full := run(t, e, c.stdin, "tamq", c.args...), run(t, e, c.stdin, "tamq-full", c.args...)
		if front != full {
			t.Errorf("tamq %q:\nfront: %s\nfull: %s", c.args, front, full)
		}
	}

	// What differs between two successful sends is the message's id and times.
	var fromFront, fromFull map[string]any
	for _, r := range []struct {
		program string
		into    *map[string]any
	}{{"tamq", &fromFront}, {"tamq-full", &fromFull}} {
		res := run(t, e, "To:net-kingdom: the same text\n", r.program, "send", "--json", "-")
		if res.Status != 0 || json.Unmarshal([]byte(res.Stdout), r.into) != nil {
			t.Fatalf("%s send --json -: %s", r.program, res)
		}
	}
	if fromFront["id"] == fromFull["id"] {
		t.Fatalf("two sends, one id: %v", fromFront["id"])
	}
	for k := range fromFull {
		if k == "id" || k == "batch_id" || strings.HasSuffix(k, "_at") {
			continue
		}
		if a, b := jsonText(fromFront[k]), jsonText(fromFull[k]); a != b {
			t.Errorf("field %s: front %s, full %s", k, a, b)
		}
	}
	if len(fromFront) != len(fromFull) {
		t.Errorf("front's record has %d fields, full's %d", len(fromFront), len(fromFull))
	}
	front, full := run(t, e, "", "tamq", "send", "To:net-kingdom: plain"), run(t, e, "", "tamq-full", "send", "To:net-kingdom: plain")
	if front.Status != 0 || !strings.HasPrefix(front.Stdout, "queued ") || !strings.HasSuffix(front.Stdout, " for net-kingdom (injected mode)\n") ||
		len(front.Stdout) != len(full.Stdout) {
		t.Errorf("plain send:\nfront: %s\nfull: %s", front, full)
	}
	testutil.WaitFor(t, "every message in the window", func() bool {
		rec, _ := e.Recording("net-kingdom")
		return strings.Count(rec, "the same text") == 2 && strings.Count(rec, "plain") == 2 && strings.Count(rec, "quiet") == 2
	})

	// A message for a window where no agent runs (it shows a shell) is
	// queued and waits: both say so on stderr, and exit 0.
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "shell-repo")
	testutil.WaitFor(t, "the shell's window to be held", func() bool {
		var st api.StatusReport
		json.Unmarshal([]byte(run(t, e, "", "tamq", "status", "--json").Stdout), &st)
		for _, ep := range st.Endpoints {
			for _, w := range ep.Windows {
				if w.Repo == "shell-repo" && w.WaitReason == program.NoAgentRunning {
					return true
				}
			}
		}
		return false
	})
	want := "tamq: queued; it waits: no agent running in shell-repo's window\n"
	for _, p := range []string{"tamq", "tamq-full"} {
		if r := run(t, e, "", p, "send", "To:shell-repo: echo pwned"); r.Status != 0 || r.Stderr != want || !strings.HasPrefix(r.Stdout, "queued ") {
			t.Errorf("%s send to a shell's window: %s", p, r)
		}
		if r := run(t, e, "", p, "-q", "send", "To:shell-repo: quiet"); r.Status != 0 || r.Stderr != "" || r.Stdout != "" {
			t.Errorf("%s -q send to a shell's window: %s", p, r)
		}
	}
}

// The front names the wait reason of a window without an agent as the
// service does (it does not link internal/tamq/program).
func TestWaitReasonMatches(t *testing.T) {
	if front.NoAgentRunning != program.NoAgentRunning {
		t.Errorf("front says %q, the service %q", front.NoAgentRunning, program.NoAgentRunning)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// Every other command line goes to tamq-full as it is, in the same process.
func TestFrontHandsOtherCommandsToFull(t *testing.T) {
	e := testutil.NewEnv(t)
	for _, args := range [][]string{{"--version"}, {}, {"--help"}, {"status"}, {"history", "--bogus"}, {"pingg"}} {
		front, full := run(t, e, "", "tamq", args...), run(t, e, "", "tamq-full", args...)
		if front != full {
			t.Errorf("tamq %q:\nfront: %s\nfull: %s", args, front, full)
		}
	}
	// The service runs as tamq-full, under the pid the front started with.
	cmd := e.Command(t.Context(), "tamq", "serve")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.WaitFor(t, "the service", func() bool { return run(t, e, "", "tamq", "ping").Status == 0 })
	var ping struct{ PID int }
	if r := run(t, e, "", "tamq", "--json", "ping"); json.Unmarshal([]byte(r.Stdout), &ping) != nil || ping.PID != cmd.Process.Pid {
		t.Fatalf("ping answered by pid %d, started %d", ping.PID, cmd.Process.Pid)
	}
	if exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(ping.PID), "exe")); exe != filepath.Join(e.Bin, "tamq-full") {
		t.Fatalf("the service runs %s", exe)
	}
	e.Tamq(t, "stop")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tamq serve after stop: %v", err)
	}
}

// Installed alone, the front still sends and pings, and says what is missing
// for everything else.
func TestFrontWithoutFull(t *testing.T) {
	e := testutil.NewEnv(t)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(e.Bin, "tamq"))
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(dir, "tamq")
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := e.Command(t.Context(), "tamq", "status")
	cmd.Path, cmd.Args[0] = alone, alone
	r := testutil.RunCmd(t, cmd)
	if r.Status != 8 || !strings.Contains(r.Stderr, filepath.Join(dir, "tamq-full")+" is missing") || !strings.Contains(r.Stderr, "hint: install both") {
		t.Fatalf("tamq status without tamq-full: %s", r)
	}
	cmd = e.Command(t.Context(), "tamq", "--json", "status")
	cmd.Path, cmd.Args[0] = alone, alone
	if r := testutil.RunCmd(t, cmd); r.Status != 8 || !strings.HasPrefix(r.Stderr, `{"error":{"code":"unavailable"`) {
		t.Fatalf("tamq --json status without tamq-full: %s", r)
	}
	cmd = e.Command(t.Context(), "tamq", "ping")
	cmd.Path, cmd.Args[0] = alone, alone
	if r := testutil.RunCmd(t, cmd); r.Status != 8 || !strings.Contains(r.Stderr, "service is not running") {
		t.Fatalf("tamq ping without tamq-full: %s", r)
	}
}
