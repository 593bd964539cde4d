package service_test

import (
	"encoding/json"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestBrokerRoutesAgentAndOperatorLines(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom", "railiance")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "railiance")
	// An agent that prints a coloured block and an address to an unknown repo,
	// then records everything it is given.
	agent := `printf '\033[1;32mTo:railiance:\033[0m build is green\nsecond line\n\nTo:nowhere: lost\n\n'; ` +
		`stty raw -echo; exec cat > "` + e.Root + `/rec/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	testutil.WaitFor(t, "the agent's recorder", func() bool { _, ok := e.Recording("net-kingdom"); return ok })

	find := func(pred func(api.Message) bool) *api.Message {
		for _, m := range history(t, e, "--body") {
			if pred(m) {
				return &m
			}
		}
		return nil
	}
	var worker *api.Message
	testutil.WaitFor(t, "the agent's block to be routed", func() bool {
		worker = find(func(m api.Message) bool { return m.Sender == "net-kingdom" && m.SenderKind == "worker" })
		return worker != nil
	})
	if worker.Target != "railiance" || worker.Body == nil || *worker.Body != "build is green\nsecond line" {
		t.Errorf("worker message %+v", worker)
	}
	testutil.WaitFor(t, "railiance to receive it", func() bool {
		got, _ := e.Recording("railiance")
		return strings.Contains(got, "From:net-kingdom: build is green\nsecond line\r")
	})

	// The operator types an address line into net-kingdom's window.
	var st api.StatusReport
	if err := json.Unmarshal([]byte(e.Run(t, "tamq", "status", "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	var pane string
	for _, w := range st.Endpoints[0].Windows {
		if w.Repo == "net-kingdom" {
			pane = w.PaneID
		}
	}
	tm.Must(t, "send-keys", "-t", pane, "-l", "To:railiance: typed by hand")
	tm.Must(t, "send-keys", "-t", pane, "Enter")
	var op *api.Message
	testutil.WaitFor(t, "the operator's line to be routed", func() bool {
		op = find(func(m api.Message) bool { return m.Provenance == "o" })
		return op != nil
	})
	if op.Sender != "net-kingdom" || op.Target != "railiance" || *op.Body != "typed by hand" {
		t.Errorf("operator message %+v", op)
	}
	// Other keys pass through; the address line never reached the agent.
	tm.Must(t, "send-keys", "-t", pane, "-l", "plain keys")
	testutil.WaitFor(t, "plain keys to reach the agent", func() bool {
		got, _ := e.Recording("net-kingdom")
		return strings.Contains(got, "plain keys")
	})
	if got, _ := e.Recording("net-kingdom"); strings.Contains(got, "typed by hand") {
		t.Errorf("the operator's address line reached the agent: %q", got)
	}
	// The unknown address got a notice on the screen, not a message.
	screen, _ := tm.Cmd("capture-pane", "-p", "-t", pane)
	if !strings.Contains(string(screen), "tamq: not sent: unknown target 'nowhere'") {
		t.Errorf("no notice for the unknown target:\n%s", screen)
	}
	if find(func(m api.Message) bool { return m.Target == "nowhere" }) != nil {
		t.Error("a message to an unknown repo was stored")
	}
}

func TestDeliveryThroughTheBrokerSurvivesServiceRestarts(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", bracketedAgent(e), "net-kingdom")
	waitBracketed(t, e, tm, "net-kingdom")
	brokerAttached := func() bool { return brokersAttached(t, e) == 1 }
	testutil.WaitFor(t, "the broker to attach", brokerAttached)
	m := send(t, e, "To:net-kingdom: through the broker")
	waitState(t, e, m.ID, "injected")
	want := "\x1b[200~From:operator/o: through the broker\x1b[201~\r"
	if got, _ := e.Recording("net-kingdom"); got != want {
		t.Fatalf("received %q, want %q", got, want)
	}
	// The receipt says how it went in: through the broker, at a quiet moment
	// (the agent prints nothing and nobody types).
	if d := injectedDetail(t, e, m.ID); d["path"] != "broker" || d["moment"] != "quiet" {
		t.Errorf("injected receipt detail %v", d)
	}

	// The service goes away: the terminal keeps working.
	e.Tamq(t, "stop")
	var pane string
	for _, line := range strings.Split(tm.Must(t, "list-windows", "-a", "-F", "#{window_name} #{pane_id}"), "\n") {
		if name, id, ok := strings.Cut(line, " "); ok && name == "net-kingdom" {
			pane = id
		}
	}
	tm.Must(t, "send-keys", "-t", pane, "-l", "still typing")
	testutil.WaitFor(t, "keys to reach the agent without the service", func() bool {
		got, _ := e.Recording("net-kingdom")
		return strings.HasSuffix(got, "still typing")
	})
	// It comes back, and the broker attaches again on its own.
	e.Tamq(t, "start", "--detach")
	testutil.WaitFor(t, "the broker to reattach", brokerAttached)
	m = send(t, e, "To:net-kingdom: after the restart")
	waitState(t, e, m.ID, "injected")
	waitRecorded(t, e, "net-kingdom", "\x1b[200~From:operator/o: after the restart\x1b[201~\r")
}

// A window opened without the service has no broker; opened again with it, the
// window is reused and deliveries take the tmux path.
func TestDeliveryWithoutABrokerGoesThroughTmux(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	e.Tamq(t, "open", "--no-service", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
	testutil.WaitFor(t, "the recorder", func() bool { _, ok := e.Recording("net-kingdom"); return ok })
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "net-kingdom")
	if n := brokersAttached(t, e); n != 0 {
		t.Fatalf("%d brokers attached to a window opened without one", n)
	}
	m := send(t, e, "To:net-kingdom: through tmux")
	waitState(t, e, m.ID, "injected")
	if got := waitRecorded(t, e, "net-kingdom", "\r"); got != "From:operator/o: through tmux\r" {
		t.Errorf("received %q", got)
	}
	if d := injectedDetail(t, e, m.ID); d["path"] != "tmux" || d["moment"] != nil {
		t.Errorf("injected receipt detail %v", d)
	}
}

// A REPL that is its window's command is the window's agent: it gets its
// deliveries (its own line editor reads them). A shell never does, even as
// the window's command: it would run every line of a message as a command;
// the message waits, saying why.
func TestDeliveryIntoAREPLButNeverAShell(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "bash-agent", "python-agent")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "env -i PATH=/usr/bin:/bin TERM=xterm PS1='bash$ ' bash --norc -i", "bash-agent")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "env -i PATH=/usr/bin:/bin TERM=xterm python3 -i -q", "python-agent")
	screen := func(repo string) string {
		out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", "=tamq:"+repo)
		return string(out)
	}
	testutil.WaitFor(t, "the bash prompt", func() bool { return strings.Contains(screen("bash-agent"), "bash$") })
	testutil.WaitFor(t, "the python prompt", func() bool { return strings.Contains(screen("python-agent"), ">>>") })
	testutil.WaitFor(t, "the brokers to attach", func() bool { return brokersAttached(t, e) == 2 })
	defer func() {
		if t.Failed() {
			t.Logf("bash screen:\n%s", screen("bash-agent"))
		}
	}()
	m := send(t, e, "To:bash-agent: two\nlines")
	testutil.WaitFor(t, "the message for bash to wait", func() bool { return stateOf(t, e, m.ID).LastError == "no agent running" })
	p := send(t, e, "To:python-agent: 6*7")
	waitState(t, e, p.ID, "injected")
	testutil.WaitFor(t, "python to read the delivery", func() bool {
		return strings.Contains(screen("python-agent"), "SyntaxError")
	})
	if st := stateOf(t, e, m.ID); st.State != "queued" || strings.Contains(screen("bash-agent"), "command not found") {
		t.Errorf("bash got its message: %+v", st)
	}
}

// injectedDetail reads the detail of a message's receipt for its move to injected.
func injectedDetail(t *testing.T, e *testutil.Env, id string) map[string]any {
	t.Helper()
	for _, r := range receipts(t, e, "message.transition") {
		if r["subject_id"] == id && r["status"] == "injected" {
			return r
		}
	}
	t.Fatalf("no injected receipt for %s", id)
	return nil
}

// brokersAttached counts the windows of connected endpoints whose broker is
// attached, as status reports them.
func brokersAttached(t testing.TB, e *testutil.Env) int {
	t.Helper()
	st := liveStatus(t, e)
	n := 0
	for _, ep := range st.Endpoints {
		for _, w := range ep.Windows {
			if w.Broker && ep.State == "connected" {
				n++
			}
		}
	}
	return n
}
