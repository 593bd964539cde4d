package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/standin"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// emptyWorkspace writes the config, registers repos in gita and starts a
// private tmux server; the test opens the windows, and stops the service at
// its end.
func emptyWorkspace(t *testing.T, config string, repos ...string) (*testutil.Env, *testutil.Tmux) {
	t.Helper()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, config)
	e.Gita(t, repos...)
	// The test may act as coordination-engine towards tamq (send wakes), and
	// answer for it behind the relay (startEngine).
	standin.Mediate(t, e, nil)
	tm := testutil.NewTmux(t)
	t.Cleanup(func() { e.Run(t, "tamq", "stop") })
	return e, tm
}

// workspace starts a service with the given config, registers repos in gita
// and opens recorder windows for them on a private tmux server.
func workspace(t *testing.T, config string, repos ...string) (*testutil.Env, *testutil.Tmux) {
	t.Helper()
	e, tm := emptyWorkspace(t, config, repos...)
	args := append([]string{"open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand()}, repos...)
	e.Tamq(t, args...)
	for _, r := range repos {
		testutil.WaitFor(t, "the recorder of "+r, func() bool { _, ok := e.Recording(r); return ok })
	}
	return e, tm
}

// send sends as `tamq send` would, through the typed client in this process
// (no process per send); arguments it does not know go to the real command.
func send(t *testing.T, e *testutil.Env, args ...string) api.Message {
	t.Helper()
	var sa api.SendArgs
	simple := true
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--ack-mode" && i+1 < len(args):
			i++
			sa.AckMode = args[i]
		case args[i] == "--endpoint" && i+1 < len(args):
			i++
			sa.EndpointID = args[i]
		case strings.HasPrefix(args[i], "-") || sa.Text != "":
			simple = false
		default:
			sa.Text = args[i]
		}
	}
	if simple && sa.Text != "" {
		m, err := client.New(pathsOf(t, e)).Send(context.Background(), sa)
		if err != nil {
			t.Fatalf("send %q: %v", sa.Text, err)
		}
		return m
	}
	r := e.Tamq(t, append([]string{"send", "--json"}, args...)...)
	var m api.Message
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
		t.Fatalf("send --json: %v\n%s", err, r)
	}
	return m
}

// history is what `tamq history --json` shows, read from the database in
// this process for the arguments tests poll with (--state, --body); others
// go to the real command.
func history(t *testing.T, e *testutil.Env, args ...string) []api.Message {
	t.Helper()
	var page store.Page
	page.Limit = 1000
	withBody, simple := false, true
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--body":
			withBody = true
		case args[i] == "--state" && i+1 < len(args):
			i++
			page.Filter.State = args[i]
		default:
			simple = false
		}
	}
	if simple {
		ms, err := store.History(context.Background(), readerOf(t, e), page)
		if err != nil {
			t.Fatalf("reading history: %v", err)
		}
		out := make([]api.Message, len(ms))
		for i, m := range ms {
			out[i] = api.MessageOf(m, withBody)
		}
		return out
	}
	r := e.Tamq(t, append([]string{"history", "--json", "--limit", "1000"}, args...)...)
	var ms []api.Message
	if err := json.Unmarshal([]byte(r.Stdout), &ms); err != nil {
		t.Fatalf("history --json: %v\n%s", err, r)
	}
	return ms
}

// readers are read-only connections to the databases of the tests' services.
var readers sync.Map // *testutil.Env -> *sql.DB

// readerOf is a read-only connection to e's database: tests watch a message
// there (a query) rather than spawn `tamq history` (a process) each time.
func readerOf(t testing.TB, e *testutil.Env) *sql.DB {
	t.Helper()
	if db, ok := readers.Load(e); ok {
		return db.(*sql.DB)
	}
	db, err := sql.Open("sqlite", "file:"+e.Database()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if prev, loaded := readers.LoadOrStore(e, db); loaded {
		db.Close()
		return prev.(*sql.DB)
	}
	t.Cleanup(func() { readers.Delete(e); db.Close() })
	return db
}

// stateOf is message id as history shows it (without its body).
func stateOf(t *testing.T, e *testutil.Env, id string) api.Message {
	t.Helper()
	ms, err := store.History(context.Background(), readerOf(t, e), store.Page{Filter: store.Filter{ID: id}, Limit: 1})
	if err != nil {
		t.Fatalf("reading message %s: %v", id, err)
	}
	if len(ms) == 0 {
		t.Fatalf("message %s not in history", id)
	}
	return api.MessageOf(ms[0], false)
}

// waitRecorded waits until repo's recorder has taken in text ending with
// suffix and returns all it recorded: "injected" means written into the
// terminal, and the agent reads it when it gets to it.
func waitRecorded(t *testing.T, e *testutil.Env, repo, suffix string) string {
	t.Helper()
	var got string
	testutil.WaitFor(t, fmt.Sprintf("%s to record %q", repo, suffix), func() bool {
		got, _ = e.Recording(repo)
		return strings.HasSuffix(got, suffix)
	})
	return got
}

func waitState(t *testing.T, e *testutil.Env, id, state string) api.Message {
	t.Helper()
	var m api.Message
	defer func() {
		if t.Failed() {
			t.Logf("%s last seen %s (attempts %d): %s", id, m.State, m.Attempts, m.LastError)
		}
	}()
	testutil.WaitFor(t, id+" to be "+state, func() bool {
		m = stateOf(t, e, id)
		return m.State == state
	})
	return m
}

const fastConfig = "[delivery]\nenter_pause_ms = 20\n"

func TestBodiesArriveByteExact(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom", "with space,comma")
	long := strings.Repeat("0123456789abcdef", 512)[:8192-3] + "end"
	cases := []struct{ repo, text, want string }{
		{"net-kingdom", "To:net-kingdom: hello", "From:operator/o: hello\r"},
		{"net-kingdom", "To:net-kingdom: line one\nline two\n\tindented", "From:operator/o: line one\nline two\n\tindented\r"},
		{"net-kingdom", "To:net-kingdom: reply here\nTo:railiance: not an address", "From:operator/o: reply here\n> To:railiance: not an address\r"},
		{"with space,comma", "To:with space,comma: ünïcödé ✓ 日本語", "From:operator/o: ünïcödé ✓ 日本語\r"},
		{"with space,comma", "To:with space,comma: " + long, "From:operator/o: " + long + "\r"},
	}
	want := map[string]string{}
	for _, c := range cases {
		m := send(t, e, c.text)
		if m.Target != c.repo || m.Sender != "operator" || m.Provenance != "o" || m.State != "queued" ||
			!strings.HasPrefix(m.PolicyProfile, "default@") || m.ConfigVersion == "" {
			t.Errorf("send record %+v", m)
		}
		waitState(t, e, m.ID, "injected")
		want[c.repo] += c.want
	}
	for repo, w := range want {
		testutil.WaitFor(t, repo+" to record every message", func() bool {
			got, _ := e.Recording(repo)
			return len(got) >= len(w)
		})
		if got, _ := e.Recording(repo); got != w {
			t.Errorf("%s received\n%q\nwant\n%q", repo, got, w)
		}
	}
	// From standard input, multi-line.
	cmd := e.Command(context.Background(), "tamq", "send", "--json", "-")
	cmd.Stdin = strings.NewReader("To:net-kingdom: from stdin\nsecond\n")
	r := testutil.RunCmd(t, cmd)
	var m api.Message
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil || r.Status != 0 {
		t.Fatalf("send -: %s", r)
	}
	waitState(t, e, m.ID, "injected")
	// Written to the terminal is not yet read by the recorder: wait for it.
	testutil.WaitFor(t, "the stdin message to be recorded", func() bool {
		got, _ := e.Recording("net-kingdom")
		return strings.HasSuffix(got, "From:operator/o: from stdin\nsecond\r")
	})
}

func TestBadMessagesAreRejectedAndNothingStored(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	cases := []struct {
		name   string
		text   string
		status int
		stderr string
	}{
		{"unknown target", "To:net-kingdon: hi", 5, "unknown target 'net-kingdon'"},
		{"wildcard", "To:*: everyone", 5, "unknown target '*'"},
		{"oversized", "To:net-kingdom: " + strings.Repeat("x", 8193), 10, "limit is 8192"},
		{"binary", "To:net-kingdom: nul\x00byte", 11, "control byte 0x00"},
		{"escape", "To:net-kingdom: \x1b[201~", 11, "control byte 0x1b"},
		{"no address", "hello", 2, "must start with 'To:<repo>: '"},
	}
	for _, c := range cases {
		cmd := e.Command(context.Background(), "tamq", "send", "-")
		cmd.Stdin = strings.NewReader(c.text)
		r := testutil.RunCmd(t, cmd)
		if r.Status != c.status || !strings.Contains(r.Stderr, c.stderr) || r.Stdout != "" {
			t.Errorf("%s: %s", c.name, r)
		}
	}
	if ms := history(t, e); len(ms) != 0 {
		t.Errorf("rejected messages were stored: %+v", ms)
	}
	// Each refusal is recorded, without the text.
	rs := receipts(t, e, "message.rejected")
	if len(rs) != 5 {
		t.Errorf("%d rejection receipts, want 5: %v", len(rs), rs)
	}
	for _, r := range rs {
		if r["sender"] != "operator" || r["body"] != nil || r["text"] != nil {
			t.Errorf("rejection receipt %v", r)
		}
	}
	// A registered repo without a window is unavailable, not unknown.
	e.Gita(t, "no-window")
	r := e.Run(t, "tamq", "send", "To:no-window: hi")
	if r.Status != 8 || !strings.Contains(r.Stderr, "no connected endpoint has a window for \"no-window\"") {
		t.Errorf("repo without window: %s", r)
	}
}

func TestAcknowledgedModeRedeliversSameIDUntilAcked(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 1\nretry_backoff_seconds = [1]\nmax_attempts = 3\n"
	e, _ := workspace(t, cfg, "net-kingdom")
	m := send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: please ack")
	envelope := fmt.Sprintf("From:operator/o: please ack\n[tamq message %s: acknowledge with: tamq ack %s]\r", m.ID, m.ID)
	testutil.WaitFor(t, "a redelivery", func() bool {
		got, _ := e.Recording("net-kingdom")
		return strings.Count(got, envelope) >= 2
	})
	e.Tamq(t, "ack", m.ID)
	acked := stateOf(t, e, m.ID)
	if acked.State != "acknowledged" || acked.AckDeadlineAt != nil || acked.AckedAt == nil {
		t.Fatalf("after ack: %+v", acked)
	}
	// Nothing more of it arrives: a later message is the next thing the window sees.
	before, _ := e.Recording("net-kingdom")
	next := send(t, e, "To:net-kingdom: after")
	waitState(t, e, next.ID, "injected")
	got := waitRecorded(t, e, "net-kingdom", "From:operator/o: after\r")
	if rest := strings.TrimPrefix(got, before); !strings.HasPrefix(rest, "From:operator/o: after") && !strings.HasSuffix(before, envelope) {
		t.Errorf("after ack the window got %q", rest)
	}
	if again := stateOf(t, e, m.ID); again.State != "acknowledged" || again.Attempts != acked.Attempts {
		t.Errorf("acknowledged message changed: %+v", again)
	}
}

func TestLateAckWinsAndRetryRequeues(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 1\nretry_backoff_seconds = [1]\nmax_attempts = 0\ndelivery_ack_mode = \"acknowledged\"\n"
	e, _ := workspace(t, cfg, "net-kingdom")
	m := send(t, e, "To:net-kingdom: one chance")
	if m.AckMode != "acknowledged" {
		t.Fatalf("config's delivery_ack_mode not applied: %+v", m)
	}
	failed := waitState(t, e, m.ID, "failed")
	if failed.Attempts != 1 || !strings.Contains(failed.LastError, "gave up after 1 attempts") {
		t.Errorf("failed: %+v", failed)
	}
	r := e.Run(t, "tamq", "retry", "no-such-id")
	if r.Status != 12 {
		t.Errorf("retry of an unknown id: %s", r)
	}
	e.Tamq(t, "retry", m.ID)
	waitState(t, e, m.ID, "failed") // delivered once more, again not acked
	got, _ := e.Recording("net-kingdom")
	if strings.Count(got, "one chance") != 2 {
		t.Errorf("retry did not redeliver exactly once more: %q", got)
	}
	r = e.Run(t, "tamq", "retry", m.ID)
	if r.Status != 0 {
		t.Fatalf("second retry: %s", r)
	}
	r = e.Run(t, "tamq", "ack", m.ID)
	if r.Status != 0 || !strings.Contains(r.Stdout, "now acknowledged") {
		t.Fatalf("late ack: %s", r)
	}
	if r := e.Run(t, "tamq", "retry", m.ID); r.Status != 13 {
		t.Errorf("retry of an acknowledged message: %s", r)
	}
	e.Tamq(t, "ack", m.ID) // twice is fine
}

func TestOpenTwiceLeavesOneWindow(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom")
	r := e.Tamq(t, "open", "--tmux-socket", tm.Name, "net-kingdom")
	if !strings.Contains(r.Stdout, "reusing the window of net-kingdom") {
		t.Errorf("second open: %s", r)
	}
	// The spec's root form means the same.
	r = e.Tamq(t, "--tmux-socket", tm.Name, "--mode", "trigger", "net-kingdom")
	if !strings.Contains(r.Stdout, "reusing the window of net-kingdom") || !strings.Contains(r.Stdout, "trigger mode") {
		t.Errorf("root form: %s", r)
	}
	names := tm.Must(t, "list-windows", "-a", "-F", "#{window_name}")
	if strings.Count(names, "net-kingdom") != 1 {
		t.Errorf("windows: %q", names)
	}
	// The session tamq made holds the repo's window only: not the plain shell
	// tmux starts a new session with.
	if names := tm.Must(t, "list-windows", "-t", "=tamq:", "-F", "#{window_name}"); names != "net-kingdom" {
		t.Errorf("windows of the tamq session: %q", names)
	}
	// A duplicate made behind tamq's back is reconciled, not doubled.
	tm.Must(t, "new-window", "-d", "-t", "=tamq:", "-n", "net-kingdom")
	id := tm.Must(t, "list-windows", "-a", "-F", "#{window_id} #{window_name}")
	last := strings.Fields(id[strings.LastIndex(id, "\n")+1:])[0]
	tm.Must(t, "set-option", "-w", "-t", last, "@tamq_repo", "net-kingdom")
	r = e.Tamq(t, "open", "--tmux-socket", tm.Name, "net-kingdom")
	if !strings.Contains(r.Stderr, "no longer used for messages") {
		t.Errorf("duplicate not reconciled: %s", r)
	}
	var st api.StatusReport
	if err := json.Unmarshal([]byte(e.Run(t, "tamq", "status", "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Endpoints) != 1 || len(st.Endpoints[0].Windows) != 1 || !st.Endpoints[0].Windows[0].Alive ||
		st.Endpoints[0].Windows[0].Mode != "trigger" || st.Endpoints[0].State != "connected" {
		t.Errorf("status endpoints %+v", st.Endpoints)
	}
}

func TestStartRestoresTheWorkspace(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom")
	e.Tamq(t, "stop")
	// A reboot: the tmux server is gone. start brings back the server it is
	// told to (tmux's default one when not told).
	tm.Cmd("kill-server")
	e.Tamq(t, "start", "--detach", "--tmux-socket", tm.Name)
	var st api.StatusReport
	if err := json.Unmarshal([]byte(e.Run(t, "tamq", "status", "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	var live *api.Endpoint
	for i, ep := range st.Endpoints {
		if ep.State == "connected" {
			live = &st.Endpoints[i]
		}
	}
	if live == nil || len(live.Windows) != 1 || !live.Windows[0].Alive || live.Windows[0].Command != e.RecorderCommand() {
		t.Fatalf("restored endpoints %+v", st.Endpoints)
	}
	testutil.WaitFor(t, "the restored recorder", func() bool { _, ok := e.Recording("net-kingdom"); return ok })
	m := send(t, e, "To:net-kingdom: after reboot")
	waitState(t, e, m.ID, "injected")
}

func TestCrashMidDeliveryLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, "[delivery]\nenter_pause_ms = 0\n", "alpha", "beta")
	client := &unixrpc.Client{Socket: e.Socket()}
	const n = 500
	for i := range n {
		repo := []string{"alpha", "beta"}[i%2]
		if err := client.Call(context.Background(), api.OpSend, api.SendArgs{Text: fmt.Sprintf("To:%s: msg-%03d", repo, i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Kill the service while deliveries (batches) are in flight.
	testutil.WaitFor(t, "some deliveries", func() bool {
		a, _ := e.Recording("alpha")
		return strings.Count(a, "From:") >= 20
	})
	pid := pingPID(t, e)
	syscall.Kill(pid, syscall.SIGKILL)
	testutil.WaitFor(t, "the service to die", func() bool { return proc.Exited(pid) })
	e.Tamq(t, "start", "--detach")
	testutil.WaitFor(t, "every message to be injected", func() bool {
		return len(history(t, e, "--state", "injected")) == n
	})
	if ms := history(t, e); len(ms) != n {
		t.Fatalf("%d messages in history, want %d", len(ms), n)
	}
	for _, repo := range []string{"alpha", "beta"} {
		got, _ := e.Recording(repo)
		var doubled []int
		for i := range n {
			if []string{"alpha", "beta"}[i%2] != repo {
				continue
			}
			// The batch being written at the kill is finished by the
			// broker, which tells the next start: it arrives once too.
			c := strings.Count(got, fmt.Sprintf("From:operator/o: msg-%03d", i))
			if c == 0 {
				t.Errorf("%s never received msg-%03d", repo, i)
			}
			if c > 1 {
				doubled = append(doubled, i)
			}
		}
		if len(doubled) > 0 {
			t.Errorf("%s received messages twice: %v", repo, doubled)
		}
	}
}

// The sender is the window the sending process runs in, as the process tree
// shows it: neither the text nor $TMUX/$TMUX_PANE can make it another.
func TestSenderIsTheWindowTheProcessRunsIn(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom", "railiance")
	_, railiance := windowStatus(t, e, "railiance")
	railiancePane := railiance.PaneID
	// Outside tmux, with $TMUX and $TMUX_PANE set by hand to railiance's pane:
	// the operator.
	cmd := e.Command(context.Background(), "tamq", "send", "--json", "To:net-kingdom: spoofed")
	cmd.Env = append(cmd.Env, "TMUX="+tmuxSocketPath(t, tm)+",1,0", "TMUX_PANE="+railiancePane)
	r := testutil.RunCmd(t, cmd)
	var m api.Message
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
		t.Fatalf("send with a spoofed pane: %s", r)
	}
	if m.Sender != "operator" || m.SenderKind != "operator" || m.Provenance != "o" {
		t.Errorf("a spoofed $TMUX_PANE made the sender %+v", m)
	}
	waitState(t, e, m.ID, "injected")

	// An agent in a window of its own sends, claiming railiance's pane in its
	// environment and the operator in its text: it is its window's repo.
	e.Gita(t, "agent-repo")
	agent := `TMUX_PANE=` + railiancePane + ` "` + e.Bin + `/tamq" send 'To:net-kingdom: From:operator/o: pretending'; ` + e.RecorderCommand()
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "agent-repo")
	var got *api.Message
	testutil.WaitFor(t, "the agent's message", func() bool {
		for _, h := range history(t, e) {
			if h.Target == "net-kingdom" && h.ID != m.ID {
				got = &h
				return true
			}
		}
		return false
	})
	if got.Sender != "agent-repo" || got.SenderKind != "worker" || got.Provenance != "" {
		t.Errorf("sender from inside a window %+v", got)
	}
	waitState(t, e, got.ID, "injected")
	waitRecorded(t, e, "net-kingdom", "From:agent-repo: From:operator/o: pretending\r")
}

// tmuxSocketPath is the socket path of a private tmux server.
func tmuxSocketPath(t testing.TB, tm *testutil.Tmux) string {
	t.Helper()
	return tm.Must(t, "display", "-p", "#{socket_path}")
}
