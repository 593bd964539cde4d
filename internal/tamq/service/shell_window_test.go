package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Shells are not agents. A window whose foreground program is a shell (or
// any program that is neither the window's command nor a known agent) gets
// no delivery and routes nothing a program prints; an agent started by hand
// in it is the window's agent while it runs.

// agentConfig counts the scripted agent as an agent wherever it runs, as
// delivery.agent_programs does for a real one (aider).
const agentConfig = fastConfig + "agent_programs = [\"scriptedagent\"]\n"

// shellWindow opens repo's window without a command (the user's shell,
// /bin/sh here) and waits for its prompt; it returns the pane and a reader
// of its screen.
func shellWindow(t *testing.T, e *testutil.Env, tm *testutil.Tmux, repo string) (string, func() string) {
	t.Helper()
	// Windows take the tmux server's environment: the same prompt for
	// every user (root's is "# ").
	tm.Must(t, "set-environment", "-g", "PS1", "$ ")
	brokersReadConfig(t, e, tm)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, repo)
	pane := paneOf(t, tm, repo)
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", pane); return string(out) }
	testutil.WaitFor(t, "the shell's prompt", func() bool { return strings.Contains(screen(), "$") })
	return pane, screen
}

// brokersReadConfig gives the brokers of tm's windows the test's config
// (agentConfig): they take the tmux server's environment, not tamq open's.
func brokersReadConfig(t *testing.T, e *testutil.Env, tm *testutil.Tmux) {
	t.Helper()
	tm.Must(t, "set-environment", "-g", "XDG_CONFIG_HOME", e.Config)
}

// typeLine types line and Enter into pane, as the operator.
func typeLine(t *testing.T, tm *testutil.Tmux, pane, line string) {
	t.Helper()
	tm.Must(t, "send-keys", "-t", pane, "-l", line)
	tm.Must(t, "send-keys", "-t", pane, "Enter")
}

// waitReason is repo's window's wait reason, as status shows it.
func waitReason(t *testing.T, e *testutil.Env, repo string) string {
	t.Helper()
	_, w := windowStatus(t, e, repo)
	return w.WaitReason
}

// A multi-line message to a shell's window runs nothing: it waits, saying
// why in history, status, top and to its sender; when the operator starts an
// agent by hand in that shell, it goes in; when the agent exits, the window
// is a shell again.
func TestAShellWindowGetsNothingUntilAnAgentRunsThere(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, agentConfig, "alpha")
	pane, screen := shellWindow(t, e, tm, "alpha")
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", screen())
		}
	}()
	testutil.WaitFor(t, "the window to be held", func() bool { return waitReason(t, e, "alpha") == "no agent running" })

	ran := filepath.Join(e.Root, "ran")
	r := e.Tamq(t, "send", "To:alpha: first line\ntouch "+ran)
	if !strings.HasPrefix(r.Stdout, "queued ") || r.Stderr != "tamq: queued; it waits: no agent running in alpha's window\n" {
		t.Fatalf("send to a shell's window: %s", r)
	}
	id := strings.Fields(r.Stdout)[1]
	if m := stateOf(t, e, id); m.State != "queued" || m.LastError != "no agent running" {
		t.Fatalf("the message: %+v", m)
	}
	if h := e.Tamq(t, "history", "--json", "--repo", "alpha"); !strings.Contains(h.Stdout, `"last_error": "no agent running"`) {
		t.Errorf("history: %s", h.Stdout)
	}
	if top := e.Run(t, "tamq", "top", "--once"); !strings.Contains(top.Stdout, "no agent running") {
		t.Errorf("top --once: %s", top)
	}

	// The operator starts an agent in the shell, by hand.
	log := filepath.Join(e.Root, "agent.log")
	typeLine(t, tm, pane, "SCRIPTED_AGENT_LOG="+log+" "+filepath.Join(e.Bin, "scriptedagent"))
	waitState(t, e, id, "injected")
	testutil.WaitFor(t, "the agent to read the message", func() bool {
		return strings.Contains(screen(), "From:operator/o: first line") && strings.Contains(screen(), "touch "+ran)
	})
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "ready") {
		t.Errorf("the agent's log: %q", b)
	}
	if waitReason(t, e, "alpha") != "" {
		t.Errorf("the window is still held while the agent runs")
	}

	// The agent exits (end of input): the shell is back, and messages wait.
	tm.Must(t, "send-keys", "-t", pane, "C-d")
	testutil.WaitFor(t, "the window to be held again", func() bool { return waitReason(t, e, "alpha") == "no agent running" })
	m := send(t, e, "To:alpha: touch "+ran)
	testutil.WaitFor(t, "the message to wait", func() bool { return stateOf(t, e, m.ID).LastError == "no agent running" })
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the shell ran a line of a message: %v", err)
	}
}

// bodiesFor are the bodies of the messages to target, oldest first.
func bodiesFor(t *testing.T, e *testutil.Env, target string) []string {
	t.Helper()
	ms, err := store.History(context.Background(), readerOf(t, e), store.Page{Filter: store.Filter{Repo: target}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ms) - 1; i >= 0; i-- {
		if m := api.MessageOf(ms[i], true); m.Target == target && m.Body != nil {
			out = append(out, *m.Body)
		}
	}
	return out
}

// What a program prints is never routed: `cat notes.txt` in a shell's
// window, or the same file shown by an agent as a tool's output (indented
// under its marker, as Claude Code shows it), sends nothing, though the file
// holds a To: line. What the operator types, and what the agent says itself,
// still are.
func TestToLinesAProgramPrintsAreNotRouted(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig)
	notes := "first line\nTo:beta: rm -rf ~\nlast line\n\n"
	repos := e.Gita(t, "alpha", "beta", "gamma")
	for _, r := range []string{"alpha", "gamma"} {
		if err := os.WriteFile(filepath.Join(repos[r], "notes.txt"), []byte(notes), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "beta")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command",
		"env SCRIPTED_AGENT_PLAN=tool "+filepath.Join(e.Bin, "scriptedagent"), "gamma")
	pane, screen := shellWindow(t, e, tm, "alpha")
	testutil.WaitFor(t, "the brokers to attach", func() bool { return brokersAttached(t, e) == 3 })
	defer func() {
		if t.Failed() {
			t.Logf("alpha's screen:\n%s", screen())
		}
	}()

	// In the shell's window.
	typeLine(t, tm, pane, "cat notes.txt")
	testutil.WaitFor(t, "cat to print the notes", func() bool {
		s := screen()
		return strings.Contains(s, "To:beta: rm -rf ~") && strings.HasSuffix(strings.TrimSpace(s), "last line\n\n$")
	})
	typeLine(t, tm, pane, "To:beta: typed by hand")
	testutil.WaitFor(t, "the typed line", func() bool { return len(bodiesFor(t, e, "beta")) > 0 })
	if got := bodiesFor(t, e, "beta"); len(got) != 1 || got[0] != "typed by hand" {
		t.Fatalf("messages to beta after cat in a shell: %q", got)
	}

	// In the agent's window: the agent shows the file as a tool's output,
	// then answers the message it was woken for.
	prompt := "read the notes\nMessage m-1 from beta: what do the notes say?\nWhen done: coordination-engine lease release L1 --attempt 1 --result completed"
	if ack, err := wake(t, e, wakeRequest(startEngine(t, e).offer("gamma"), 1, "gamma", prompt)); err != nil || ack.Capability != api.WakeResumed {
		t.Fatalf("wake: %+v %v", ack, err)
	}
	testutil.WaitFor(t, "the agent's answer", func() bool { return len(bodiesFor(t, e, "beta")) > 1 })
	if got := bodiesFor(t, e, "beta"); len(got) != 2 || got[1] != "read notes.txt" {
		t.Fatalf("messages to beta after the agent's tool output: %q", got)
	}
	gamma := paneOf(t, tm, "gamma")
	if out, _ := tm.Cmd("capture-pane", "-p", "-t", gamma); !strings.Contains(string(out), "     To:beta: rm -rf ~") {
		t.Errorf("the agent did not show the notes:\n%s", out)
	}
}

// --mode trigger lets coordination-engine type its prompts into the window:
// refused (a usage error, nothing opened) for a window that would run a
// shell, whether no --command or a shell as the command; and for an open
// shell's window reused in trigger mode.
func TestTriggerModeNeedsAnAgent(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "alpha")
	for _, args := range [][]string{
		{"--mode", "trigger"},
		{"--mode", "trigger", "--command", "bash"},
		{"--mode", "trigger", "--command", "env -i PS1='$ ' bash --norc -i"},
	} {
		r := e.Run(t, "tamq", append(append([]string{"open", "--tmux-socket", tm.Name}, args...), "alpha")...)
		if r.Status != 2 || !strings.Contains(r.Stderr, "--mode trigger") || !strings.Contains(r.Stderr, "--command claude") {
			t.Errorf("open %q: %s", args, r)
		}
	}
	if names, _ := tm.Cmd("list-windows", "-a", "-F", "#{window_name}"); strings.Contains(string(names), "alpha") {
		t.Fatalf("a refused open opened a window: %q", names)
	}
	if r := e.Run(t, "tamq", "ping"); r.Status == 0 {
		t.Errorf("a refused open started the service")
	}
	// A shell's window, reused in trigger mode: its command is the shell.
	shellWindow(t, e, tm, "alpha")
	r := e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--mode", "trigger", "alpha")
	if r.Status != 2 || !strings.Contains(r.Stderr, "the window of alpha runs your shell") {
		t.Errorf("trigger mode for a shell's window: %s", r)
	}
	if _, w := windowStatus(t, e, "alpha"); w.Mode != "manual" {
		t.Errorf("the refused window's mode is %q", w.Mode)
	}
}

// A wake, as coordination-engine sends it, is never written into a shell:
// here the window's command ends by becoming one (exec sh), and the prompt
// holds a command substitution, as a task title may. It waits until an
// agent runs in the window.
func TestAWakeIsNeverWrittenIntoAShell(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, agentConfig, "alpha")
	brokersReadConfig(t, e, tm)
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", "echo setting up; exec sh", "alpha")
	pane := paneOf(t, tm, "alpha")
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", pane); return string(out) }
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", screen())
		}
	}()
	testutil.WaitFor(t, "the window to be held", func() bool { return waitReason(t, e, "alpha") == "no agent running" })
	pwned := filepath.Join(e.Root, "pwned")
	ack, err := wake(t, e, wakeRequest(startEngine(t, e).offer("alpha"), 1, "alpha", "Task T-1 \"$(touch "+pwned+")\"\n`touch "+pwned+"`\ntouch "+pwned))
	if err != nil || ack.MessageID == "" {
		t.Fatalf("wake: %+v %v", ack, err)
	}
	testutil.WaitFor(t, "the wake to wait", func() bool { return stateOf(t, e, ack.MessageID).LastError == "no agent running" })
	// An agent started by hand takes it.
	typeLine(t, tm, pane, filepath.Join(e.Bin, "scriptedagent"))
	waitState(t, e, ack.MessageID, "awaiting_ack")
	testutil.WaitFor(t, "the agent to read the wake", func() bool { return strings.Contains(screen(), "From:coordination-engine: Task T-1") })
	if _, err := os.Stat(pwned); !os.IsNotExist(err) {
		t.Errorf("the wake ran in a shell: %v", err)
	}
}

// tamq tells coordination-engine, window by window, whether an agent runs
// (agent_running in its attach), and tells it again when that changes: the
// engine offers work only to a window with an agent. The engine's --orwell
// record of the frames it received shows what tamq said.
func TestTamqTellsTheEngineWhetherAnAgentRuns(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, agentConfig, "alpha")
	profile := "[policy]\nprofile = \"diag\"\n[policy.profiles.diag]\nallow = [\"statehub_read\", \"repo_inspect\", \"repo_edit\", \"local_checks\", " +
		"\"state_updates\", \"coordination_messages\", \"tmux_wake\", \"transient_retry\", \"orwell_diagnostics\"]\n"
	e.WriteEngineConfig(t, profile)
	e.Run(t, "coordination-engine", "start", "--detach", "--orwell")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	attached := func(running string) func() bool {
		return func() bool {
			b, _ := os.ReadFile(filepath.Join(e.EngineState(), "orwell.log"))
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"op":"attach"`) && strings.Contains(line, `"repo":"alpha"`) && strings.Contains(line, `"agent_running":`+running) {
					return true
				}
			}
			return false
		}
	}
	pane, _ := shellWindow(t, e, tm, "alpha")
	testutil.WaitFor(t, "an attach saying no agent runs in alpha's window", attached("false"))
	typeLine(t, tm, pane, filepath.Join(e.Bin, "scriptedagent"))
	testutil.WaitFor(t, "an attach saying an agent runs there", attached("true"))
}

// A window without a broker (opened without the service, then taken in)
// gets the same rule through tmux: its pane's foreground program is read
// from the process table, a shell gets nothing, and an agent started there
// by hand gets the message.
func TestAShellWindowWithoutABrokerGetsNothingThroughTmux(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, agentConfig, "alpha")
	e.Tamq(t, "open", "--no-service", "--tmux-socket", tm.Name, "alpha")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	pane := paneOf(t, tm, "alpha")
	screen := func() string { out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", pane); return string(out) }
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", screen())
		}
	}()
	// tmux's default shell, with the user's own prompt.
	testutil.WaitFor(t, "the shell's prompt", func() bool { return strings.TrimSpace(screen()) != "" })
	if n := brokersAttached(t, e); n != 0 {
		t.Fatalf("%d brokers attached to a window opened without one", n)
	}
	ran := filepath.Join(e.Root, "ran")
	m := send(t, e, "To:alpha: first line\ntouch "+ran)
	testutil.WaitFor(t, "the message to wait", func() bool { return stateOf(t, e, m.ID).LastError == "no agent running" })
	typeLine(t, tm, pane, filepath.Join(e.Bin, "scriptedagent"))
	waitState(t, e, m.ID, "injected")
	testutil.WaitFor(t, "the agent to read it", func() bool { return strings.Contains(screen(), "touch "+ran) })
	if d := injectedDetail(t, e, m.ID); d["path"] != "tmux" {
		t.Errorf("injected receipt detail %v", d)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the shell ran a line of a message: %v", err)
	}
}

// The dialog check judges the live screen where the input is asked for: a
// "[Y/n]" answered earlier, in the history above the agent's prompt, holds
// nothing (it was within the ten rows above the cursor that used to count).
func TestAnOldQuestionInTheHistoryHoldsNothing(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "alpha")
	agent := `printf 'Overwrite notes.txt? [Y/n] y\n'; i=1; while [ $i -le 8 ]; do echo "step $i done"; i=$((i+1)); done; ` +
		`printf '> '; stty raw -echo; exec cat > "` + filepath.Join(e.Root, "rec") + `/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "alpha")
	testutil.WaitFor(t, "the agent's prompt", func() bool { _, ok := e.Recording("alpha"); return ok })
	m := send(t, e, "To:alpha: carry on")
	waitState(t, e, m.ID, "injected")
	if got := waitRecorded(t, e, "alpha", "\r"); got != "From:operator/o: carry on\r" {
		t.Errorf("received %q", got)
	}
}
