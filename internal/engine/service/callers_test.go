package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/jsonl"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// inWindow runs a shell script in repo's window (a shell window: as an
// agent's tool call runs one) and returns what each of its lines printed,
// with its exit status.
func (l *loop) inWindow(t *testing.T, repo string, lines ...string) string {
	t.Helper()
	out := filepath.Join(l.Env.Root, repo+"-out.txt")
	script := filepath.Join(l.Env.Root, repo+"-script.sh")
	var b strings.Builder
	for _, line := range lines {
		fmt.Fprintf(&b, "echo '$ %s' >> %s\n%s >> %s 2>&1; echo \"exit $?\" >> %s\n", line, out, line, out, out)
	}
	fmt.Fprintf(&b, "echo END >> %s\n", out)
	if err := os.WriteFile(script, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return l.typeLines(t, repo, out, "sh "+script)
}

// atPrompt types each line at the prompt of the shell in repo's window, as
// a person does, and returns what each printed, with its exit status.
func (l *loop) atPrompt(t *testing.T, repo string, lines ...string) string {
	t.Helper()
	out := filepath.Join(l.Env.Root, repo+"-typed.txt")
	var typed []string
	for _, line := range lines {
		typed = append(typed, fmt.Sprintf("echo '$ %s' >> %s; %s >> %s 2>&1; echo \"exit $?\" >> %s", line, out, line, out, out))
	}
	return l.typeLines(t, repo, out, append(typed, "echo END >> "+out)...)
}

// typeLines types lines into repo's window and waits for out to end with
// END.
func (l *loop) typeLines(t *testing.T, repo, out string, lines ...string) string {
	t.Helper()
	os.Remove(out)
	pane := ""
	for _, row := range strings.Split(l.Tmux.Must(t, "list-panes", "-a", "-F", "#{pane_id} #{@tamq_repo}"), "\n") {
		if f := strings.Fields(row); len(f) == 2 && f[1] == repo {
			pane = f[0]
		}
	}
	if pane == "" {
		t.Fatalf("no window of %s", repo)
	}
	for _, line := range lines {
		l.Tmux.Must(t, "send-keys", "-t", pane, "-l", line)
		l.Tmux.Must(t, "send-keys", "-t", pane, "Enter")
	}
	var got string
	testutil.WaitFor(t, "the script in "+repo+"'s window", func() bool {
		b, _ := os.ReadFile(out)
		got = string(b)
		return strings.HasSuffix(got, "END\n")
	})
	return got
}

// exitOf is the exit status the script printed after the line that ran cmd.
func exitOf(out, cmd string) string {
	_, after, ok := strings.Cut(out, "$ "+cmd+"\n")
	if !ok {
		return "not run"
	}
	for _, line := range strings.Split(after, "\n") {
		if s, ok := strings.CutPrefix(line, "exit "); ok {
			return s
		}
	}
	return "no exit"
}

// An agent in alpha's window (here a shell where it runs commands) cannot
// act on beta's lease, wake anyone, read the engine's listings or stop it,
// nor register windows or stand in for the engine towards tamq; the same
// commands from outside every window are the operator's. Receipts say who
// acted.
func TestTheEngineKnowsWhoIsCalling(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "beta", "gamma")
	l.OpenAgent(t, "beta", "ackstall")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "alpha")
	l.WaitAttached(t, "beta", 1)
	w := l.Wake(t, "beta", "--task", "T-B")
	if w.Lease == nil {
		t.Fatalf("beta not woken: %+v", w)
	}
	beta := w.Lease.LeaseID
	testutil.WaitFor(t, "beta's agent to take its lease", func() bool {
		for _, r := range l.receipts(t, beta) {
			if r.Kind == "checkpoint.recorded" {
				return true
			}
		}
		return false
	})

	ce, tamq := filepath.Join(l.Env.Bin, "coordination-engine"), filepath.Join(l.Env.Bin, "tamq")
	refused := []string{
		ce + " lease ack " + beta,
		ce + " lease renew " + beta,
		ce + " checkpoint --lease " + beta + " --summary FORGED-BY-ALPHA --next obey",
		ce + " lease release " + beta + " --result completed",
		ce + " task set T-B --status done",
		ce + " wake gamma",
		ce + " leases",
		ce + " receipts",
		ce + " explain T-1",
		ce + " checkpoints",
		ce + " stop",
		ce + " purge",
		"env XDG_CONFIG_HOME=" + l.Env.Config + " " + tamq + " open --tmux-socket " + l.Tmux.Name + " gamma",
	}
	out := l.inWindow(t, "alpha", append(refused, ce+" status", ce+" lease ack no-such-lease")...)
	for _, cmd := range refused {
		if got := exitOf(out, cmd); got != "9" {
			t.Errorf("from alpha's window, %q exited %s, want 9 (permission_denied)", cmd, got)
		}
	}
	// Status is anyone's: not refused (9); unhealthy (8) only because no
	// State Hub runs here, so the engine's loop cannot work.
	if got := exitOf(out, ce+" status"); got != "8" {
		t.Errorf("status from a window exited %s, want 8 (no State Hub here)", got)
	}
	if got := exitOf(out, ce+" lease ack no-such-lease"); got != "12" {
		t.Errorf("an unknown lease from a window exited %s, want 12", got)
	}
	if !strings.Contains(out, "lease "+beta+" belongs to beta; the agent in alpha's window may act only on alpha's") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
	// beta's lease is as its agent left it, and no forged word reached the
	// engine's records.
	for _, r := range l.receipts(t, beta) {
		if r.Detail["by_repo"] == "alpha" {
			t.Errorf("a receipt of alpha's acting on beta's lease: %+v", r)
		}
	}
	b, _ := os.ReadFile(filepath.Join(l.Env.EngineState(), "coordination.sqlite3"))
	if strings.Contains(string(b), "FORGED-BY-ALPHA") {
		t.Error("alpha's checkpoint on beta's lease was stored")
	}
	// Receipts name who acted: beta's own agent, from its window.
	var acked bool
	for _, r := range l.receipts(t, beta) {
		if r.Kind == "lease.acknowledged" {
			acked = r.Detail["by"] == "agent" && r.Detail["by_repo"] == "beta" || r.Detail["by"] == "broker"
		}
	}
	if !acked {
		t.Errorf("the ack's receipt does not name beta's agent or broker: %+v", l.receipts(t, beta))
	}
	// With tamq stopped nobody can say which window a process runs in: one
	// under tamq's tmux server is refused an agent's command until tamq is
	// back (it is unavailable, not the operator's).
	l.Env.Tamq(t, "stop")
	release := ce + " lease release " + beta + " --result completed"
	if got := exitOf(l.inWindow(t, "alpha", release), release); got != "8" {
		t.Errorf("with tamq stopped, alpha's release of beta's lease exited %s, want 8", got)
	}
	// The operator, outside every window, may release it by hand.
	l.Env.Engine(t, "lease", "release", beta, "--result", "failed", "--reason", "released by the operator")
	for _, r := range l.receipts(t, beta) {
		if r.Kind == "lease.retry_wait" && r.Detail["by"] != "operator" {
			t.Errorf("the operator's release is recorded as %v", r.Detail["by"])
		}
	}
}

// A person at the shell of a manual window (whose own program is that
// shell) is the operator (issue 40): what they type at its prompt is
// theirs, a send labelled with the window (alpha/o). What runs under
// anything else there (a script, `sh -c`, a command carrying an agent's
// mark) is still the window's agent's, and is refused what is the
// operator's, with a hint that says where the operator's commands run.
func TestTheOperatorTypesAtAManualWindowsShell(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "beta")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "alpha", "beta")
	testutil.WaitFor(t, "alpha's endpoint", func() bool { return len(l.Status(t).Endpoints) > 0 })
	ce := filepath.Join(l.Env.Bin, "coordination-engine")
	tamq := "env XDG_CONFIG_HOME=" + l.Env.Config + " " + filepath.Join(l.Env.Bin, "tamq")
	// The engine's own program under an agent's name: what an agent
	// started at the prompt would be, calling the engine itself.
	claude := filepath.Join(l.Env.Root, "claude")
	if err := os.Symlink(ce, claude); err != nil {
		t.Fatal(err)
	}
	allowed := []string{ce + " leases", ce + " receipts", tamq + " send To:beta:typed-at-alphas-shell"}
	refused := []string{`sh -c "` + ce + ` leases"`, "env CLAUDECODE=1 " + ce + " leases", claude + " leases"}
	out := l.atPrompt(t, "alpha", append(allowed, refused...)...)
	for _, cmd := range allowed {
		if got := exitOf(out, cmd); got != "0" {
			t.Errorf("typed at alpha's shell, %q exited %s, want 0:\n%s", cmd, got, out)
		}
	}
	for _, cmd := range refused {
		if got := exitOf(out, cmd); got != "9" {
			t.Errorf("typed at alpha's shell, %q exited %s, want 9 (not the operator's):\n%s", cmd, got, out)
		}
	}
	if !strings.Contains(out, "shell prompt of a window whose own program is your shell") {
		t.Errorf("the refusal does not say where the operator's commands run:\n%s", out)
	}
	var hist []tamqapi.Message
	if err := json.Unmarshal([]byte(l.Env.Tamq(t, "history", "--json").Stdout), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Sender != "alpha" || hist[0].SenderKind != "operator" || hist[0].Provenance != "o" {
		t.Errorf("the send typed at alpha's shell is not the operator's at alpha: %+v", hist)
	}
	// The same script run there, as an agent's tool call runs one, is
	// still refused.
	if got := exitOf(l.inWindow(t, "alpha", ce+" leases"), ce+" leases"); got != "9" {
		t.Errorf("a script in alpha's window ran leases: exit %s, want 9", got)
	}
}

// A file replayed from a window speaks for that window's repo only: lines
// that claim the operator or another repo are refused, the window's own are
// replayed.
func TestAWindowReplaysOnlyItsOwnMessages(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "beta")
	l.OpenAgent(t, "beta", "stall", "--mode", "manual")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "alpha")
	var ep string
	testutil.WaitFor(t, "alpha's endpoint", func() bool {
		for _, e := range l.Status(t).Endpoints {
			ep = e.TamqEndpointID
		}
		return ep != ""
	})
	file := filepath.Join(l.Env.Root, "replay.jsonl")
	var lines []byte
	for i, m := range []struct{ sender, kind, body string }{
		{"operator", "operator", "OPERATOR-CLAIMED"},
		{"beta", "worker", "BETA-CLAIMED"},
		{"coordination-engine", "coordination", "ENGINE-CLAIMED"},
		{"alpha", "worker", "ALPHAS-OWN"},
	} {
		body := m.body
		b, err := jsonl.Encode(tamqapi.Message{ID: fmt.Sprintf("orig-%d", i), Sender: m.sender, SenderKind: m.kind, Target: "beta",
			Body: &body, AckMode: "injected", State: "acknowledged"})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(file, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	tamq := "env XDG_CONFIG_HOME=" + l.Env.Config + " " + filepath.Join(l.Env.Bin, "tamq")
	replay := tamq + " replay " + file + " --endpoint " + ep
	out := l.inWindow(t, "alpha", replay)
	history := l.Env.Tamq(t, "history", "--json", "--body").Stdout
	for _, refused := range []string{"OPERATOR-CLAIMED", "BETA-CLAIMED", "ENGINE-CLAIMED"} {
		if strings.Contains(history, refused) {
			t.Errorf("a line claiming another sender was replayed from alpha's window: %s\n%s", refused, out)
		}
	}
	if !strings.Contains(history, "ALPHAS-OWN") {
		t.Errorf("alpha's own line was not replayed:\n%s\n%s", out, history)
	}
}

// A manual wake goes through the named task's gates like an observed
// change: a task stopped at the human gate stays stopped, unless the
// operator names the gate to go through, which a receipt records with who
// did it. An agent can do neither.
func TestAManualWakeKeepsTheTasksGates(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\n"), "alpha", "beta")
	l.agents(t, "stall", "alpha")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "beta")
	a := enginetest.Todo("A", "alpha")
	a.NeedsHuman = true
	h.Put(enginetest.Workplan("W", "alpha", a))
	testutil.WaitFor(t, "A stopped at its gate", func() bool {
		x := l.Explain(t, "A")
		return len(x.Triggers) == 1 && x.Triggers[0].State == "stopped" && x.Triggers[0].GateReason == "human"
	})
	w := l.Wake(t, "alpha", "--task", "A")
	if w.Stopped != "human" || w.Lease != nil || !strings.Contains(w.Reason, "--override-gate human") {
		t.Fatalf("a manual wake of a gated task: %+v", w)
	}
	if r := l.Env.Run(t, "coordination-engine", "wake", "alpha", "--task", "A", "--override-gate", "secret"); r.Status != 15 {
		t.Errorf("overriding a gate that does not stop the task: %s", r)
	}
	ce := filepath.Join(l.Env.Bin, "coordination-engine")
	override := ce + " wake alpha --task A --override-gate human"
	if got := exitOf(l.inWindow(t, "beta", override), override); got != "9" {
		t.Errorf("an agent's override exited %s, want 9", got)
	}
	if n := l.wakes(); n != 0 {
		t.Fatalf("woken through the gate without the operator: %d wakes", n)
	}
	w = l.Wake(t, "alpha", "--task", "A", "--override-gate", "human")
	if w.Lease == nil {
		t.Fatalf("the operator's override: %+v", w)
	}
	testutil.WaitFor(t, "A woken", func() bool { return l.wakes() == 1 })
	// The next looks at State Hub still see A needing a human: the gate
	// the operator went through does not stop the lease again (it did, at
	// whichever look came first, before or after the wake was written).
	polls := l.Status(t).StateHub.Polls
	testutil.WaitFor(t, "two more looks at State Hub", func() bool { return l.Status(t).StateHub.Polls >= polls+2 })
	if got := l.lease(t, w.Lease.LeaseID); got.State != "offered" {
		t.Errorf("the overridden lease after two looks: %s, want offered (its agent has not taken it up)", got.State)
	}
	r := l.Env.Engine(t, "receipts", "--json", "--trigger", w.Trigger.ID)
	if !strings.Contains(r.Stdout, `"gate.overridden"`) || !strings.Contains(r.Stdout, `"by": "operator"`) {
		t.Errorf("no gate.overridden receipt naming the operator:\n%s", r.Stdout)
	}
}

// Issue 37: a window's background job is not the operator. From alpha's
// window a script starts jobs and exits at once, as `cmd &` in a build
// script does: a plain background job, one under setsid, and one in a new
// tmux window (which lands in tamq's session). Each waits for the script to
// be gone, then asks for what only the operator may do: a wake through a
// gate, registering windows (`tamq open`), and a send. The first two stay
// in alpha's window's process tree (its broker is their subreaper), so
// they are alpha's agent: the wake and the open are refused (exit 9), and
// their send goes out as alpha's. The third runs in no repo's agent pane:
// it is refused everything but what anyone may do.
func TestABackgroundJobOfAWindowIsNotTheOperator(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "beta", "gamma")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "alpha", "gamma")
	testutil.WaitFor(t, "alpha's window", func() bool { return len(l.Status(t).Endpoints) > 0 })
	ce := filepath.Join(l.Env.Bin, "coordination-engine")
	tamq := "env XDG_CONFIG_HOME=" + l.Env.Config + " " + filepath.Join(l.Env.Bin, "tamq")
	out := filepath.Join(l.Env.Root, "bg")
	job := filepath.Join(l.Env.Root, "job.sh")
	run := func(tag, cmd string) string {
		return fmt.Sprintf("echo \"$ %s\" >> %s.%s; %s >> %s.%s 2>&1; echo \"exit $?\" >> %s.%s\n", cmd, out, tag, cmd, out, tag, out, tag)
	}
	jobScript := "while kill -0 \"$2\" 2>/dev/null; do sleep 0.02; done\ntag=$1\n" +
		run("$tag", ce+" wake beta --task T-B --override-gate destructive") +
		run("$tag", tamq+" open --tmux-socket "+l.Tmux.Name+" beta") +
		run("$tag", tamq+" send 'To:gamma: from the background'") +
		"echo END >> " + out + ".$tag\n"
	main := filepath.Join(l.Env.Root, "main.sh")
	// A new tmux window has the server's environment, not the pane's: the
	// script hands it the sockets, as a person's command line would.
	mainScript := fmt.Sprintf("sh %[1]s amp $$ &\nsetsid sh %[1]s setsid $$ &\n"+
		"tmux new-window -d \"env TAMQ_SOCKET=$TAMQ_SOCKET COORDINATION_ENGINE_SOCKET=$COORDINATION_ENGINE_SOCKET sh %[1]s window $$\"\n", job)
	for f, s := range map[string]string{job: jobScript, main: mainScript} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.Tmux.Must(t, "send-keys", "-t", paneOfRepo(t, l, "alpha"), "-l", "sh "+main)
	l.Tmux.Must(t, "send-keys", "-t", paneOfRepo(t, l, "alpha"), "Enter")
	got := map[string]string{}
	for _, tag := range []string{"amp", "setsid", "window"} {
		testutil.WaitFor(t, "the "+tag+" job", func() bool {
			b, _ := os.ReadFile(out + "." + tag)
			got[tag] = string(b)
			return strings.HasSuffix(got[tag], "END\n")
		})
	}
	wake, open := ce+" wake beta --task T-B --override-gate destructive", tamq+" open --tmux-socket "+l.Tmux.Name+" beta"
	send := tamq + " send 'To:gamma: from the background'"
	for _, tag := range []string{"amp", "setsid", "window"} {
		for _, cmd := range []string{wake, open} {
			if code := exitOf(got[tag], cmd); code != "9" {
				t.Errorf("%s job: %q exited %s, want 9:\n%s", tag, cmd, code, got[tag])
			}
		}
		want := "0"
		if tag == "window" {
			want = "9"
		}
		if code := exitOf(got[tag], send); code != want {
			t.Errorf("%s job: the send exited %s, want %s:\n%s", tag, code, want, got[tag])
		}
	}
	if !strings.Contains(got["window"], "in a window of tamq's session that is no repo's") {
		t.Errorf("the refusal in a new window does not say why:\n%s", got["window"])
	}
	// The jobs' sends that went out went as alpha's, never the operator's.
	var hist []tamqapi.Message
	if err := json.Unmarshal([]byte(l.Env.Tamq(t, "history", "--json", "--repo", "gamma").Stdout), &hist); err != nil {
		t.Fatal(err)
	}
	senders := map[string]bool{}
	for _, m := range hist {
		senders[m.Sender] = true
	}
	if len(hist) != 2 || !senders["alpha"] || senders["operator"] {
		t.Errorf("messages to gamma from the background jobs: %+v", hist)
	}
	// Nothing registered beta's window, and no lease was taken for beta.
	for _, ep := range l.Status(t).Endpoints {
		for _, w := range ep.Windows {
			if w.Repo == "beta" {
				t.Errorf("a background job registered beta's window: %+v", ep)
			}
		}
	}
}

// Issue 37: a process whose environment says it came from a repo's window
// (a job that escaped it before the broker was its subreaper, or a window
// without a broker) or runs under an agent outside tamq's windows (Claude
// Code marks the commands it runs with CLAUDECODE=1) is not the operator,
// whether tamq can be asked or not. The environment is claimed, so it only
// ever refuses: it never makes anyone an agent of a repo.
func TestMarkedProcessesOutsideWindowsAreNotTheOperator(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "beta")
	l.Env.Tamq(t, "start", "--detach")
	cases := []struct{ env, why string }{
		{"TAMQ_REPO=alpha", "were started from alpha's window and left it"},
		{"CLAUDECODE=1", "run under Claude Code outside tamq's windows"},
		{"GEMINI_CLI=1", "run under Gemini CLI outside tamq's windows"},
	}
	check := func(when string) {
		for _, c := range cases {
			for _, args := range [][]string{{"wake", "beta"}, {"task", "set", "T-B", "--status", "done"}, {"leases"}} {
				cmd := l.Env.Command(context.Background(), "coordination-engine", args...)
				cmd.Env = append(cmd.Env, c.env)
				r := testutil.RunCmd(t, cmd)
				if r.Status != 9 || !strings.Contains(r.Stderr, c.why) {
					t.Errorf("%s, %s coordination-engine %s: %s", when, c.env, strings.Join(args, " "), r)
				}
			}
		}
		// Status is anyone's (it is not healthy while tamq is stopped).
		cmd := l.Env.Command(context.Background(), "coordination-engine", "status")
		cmd.Env = append(cmd.Env, "CLAUDECODE=1")
		if r := testutil.RunCmd(t, cmd); r.Status == 9 || !strings.Contains(r.Stdout, "service:   running") {
			t.Errorf("%s, status under an agent: %s", when, r)
		}
	}
	check("with tamq running")
	// An agent's own process above it says so too (tamq reads the process
	// tree; here a shell called claude).
	dir := t.TempDir()
	if err := os.Symlink("/bin/sh", filepath.Join(dir, "claude")); err != nil {
		t.Fatal(err)
	}
	under := exec.Command(filepath.Join(dir, "claude"), "-c", filepath.Join(l.Env.Bin, "coordination-engine")+" wake beta; exit $?")
	under.Env = append(append([]string{}, l.Env.Vars...), l.Env.ProgramVars["coordination-engine"]...)
	if r := testutil.RunCmd(t, under); r.Status != 9 || !strings.Contains(r.Stderr, "run under claude outside tamq's windows") {
		t.Errorf("coordination-engine wake under a program called claude: %s", r)
	}
	send := l.Env.Command(context.Background(), "tamq", "send", "To:beta: hello")
	send.Env = append(send.Env, "TAMQ_REPO=alpha")
	if r := testutil.RunCmd(t, send); r.Status != 9 || !strings.Contains(r.Stderr, "were started from alpha's window") {
		t.Errorf("tamq send with TAMQ_REPO=alpha: %s", r)
	}
	l.Env.Tamq(t, "stop")
	check("with tamq stopped")
}

func paneOfRepo(t *testing.T, l *loop, repo string) string {
	t.Helper()
	for _, row := range strings.Split(l.Tmux.Must(t, "list-panes", "-a", "-F", "#{pane_id} #{@tamq_repo}"), "\n") {
		if f := strings.Fields(row); len(f) == 2 && f[1] == repo {
			return f[0]
		}
	}
	t.Fatalf("no window of %s", repo)
	return ""
}

// Issue 37: tamq's own operations know their caller, as the engine's do.
// From alpha's window, `tamq ack` dropped an operator message queued for
// gamma, `tamq export` read every repo's messages (wake prompts included)
// and `tamq stop` stopped the service. A window's agent may send, ack its
// own messages and read its own history; what reaches another repo's
// messages or the service itself is the operator's (exit 9).
func TestTamqKnowsWhoIsCalling(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "alpha", "gamma")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--mode", "manual", "alpha", "gamma")
	// Both windows run a shell: messages to them wait for an agent.
	sendJSON := func(text string) tamqapi.Message {
		var m tamqapi.Message
		if err := json.Unmarshal([]byte(l.Env.Tamq(t, "send", "--json", text).Stdout), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	forGamma, forAlpha := sendJSON("To:gamma: GAMMAS-OWN"), sendJSON("To:alpha: ALPHAS-OWN")
	tamq := "env XDG_CONFIG_HOME=" + l.Env.Config + " XDG_STATE_HOME=" + l.Env.State + " " + filepath.Join(l.Env.Bin, "tamq")
	refused := []string{
		tamq + " ack " + forGamma.ID,
		tamq + " retry " + forGamma.ID,
		tamq + " history --repo gamma",
		tamq + " export --repo gamma",
		tamq + " purge --yes",
		tamq + " endpoints forget tmux-amq-1",
		tamq + " stop",
	}
	export, history := tamq+" export", tamq+" history --body"
	out := l.inWindow(t, "alpha", append(refused, export, history, tamq+" ack "+forAlpha.ID, tamq+" status")...)
	for _, cmd := range refused {
		if got := exitOf(out, cmd); got != "9" {
			t.Errorf("from alpha's window, %q exited %s, want 9 (permission_denied)", cmd, got)
		}
	}
	for _, cmd := range []string{export, history, tamq + " ack " + forAlpha.ID, tamq + " status"} {
		if got := exitOf(out, cmd); got != "0" {
			t.Errorf("from alpha's window, %q exited %s, want 0", cmd, got)
		}
	}
	if strings.Contains(out, "GAMMAS-OWN") || !strings.Contains(out, "ALPHAS-OWN") {
		t.Errorf("alpha's window reads other repos' messages, or not its own:\n%s", out)
	}
	// Gamma's message still waits for gamma, and the service runs.
	var hist []tamqapi.Message
	if err := json.Unmarshal([]byte(l.Env.Tamq(t, "history", "--json", "--id", forGamma.ID).Stdout), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].State == "acknowledged" {
		t.Errorf("gamma's message after alpha's ack: %+v", hist)
	}
	l.Env.Tamq(t, "ping")
}
