//go:build agents

// The real loop with the real agents: built only with the agents tag, which
// `make test-agents` sets (it installs Claude Code and Codex from npm and
// sets TAMQ_TEST_AGENTS to the folder holding their node_modules).

package service_test

import (
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
	"github.com/tmux-amq/tamq/internal/testutil/modelserver"
)

// realTamqConfig is what a machine with a few agents on two cores needs:
// a pause before the Enter an agent under load does not take for part of
// the paste.
const realTamqConfig = "[delivery]\nenter_pause_ms = 300\n"

// agentVersion is what `AGENT --version` prints, for the log.
func agentVersion(t *testing.T, e *testutil.Env, name string) string {
	cmd := exec.Command(testutil.AgentBin(t, name), "--version")
	cmd.Env = append(os.Environ(), "PATH="+testutil.AgentPath(t, e.Bin))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// What a wake prompt names, as the scripted model reads it.
var (
	wakeLease = regexp.MustCompile(`lease release (\S+) --attempt (\d+) `)
	wakeTask  = regexp.MustCompile(`task set (\S+) --status`)
)

// theLoopsPart is the model's part on a wake, as the prompt asks it: a
// checkpoint, the task's state, the release; each a tool call.
func theLoopsPart(prompt string) []modelserver.Step {
	l := wakeLease.FindStringSubmatch(prompt)
	task := wakeTask.FindStringSubmatch(prompt)
	if l == nil || task == nil {
		return []modelserver.Step{modelserver.Say("That wake names no lease or task.")}
	}
	lease, attempt := l[1], l[2]
	return []modelserver.Step{
		modelserver.Run(fmt.Sprintf("coordination-engine checkpoint --lease %s --attempt %s --summary 'did the work' --next 'nothing left'", lease, attempt)),
		modelserver.Run(fmt.Sprintf("coordination-engine task set %s --status done", task[1])),
		modelserver.Run(fmt.Sprintf("coordination-engine lease release %s --attempt %s --result completed", lease, attempt)),
		modelserver.Say("Done: " + task[1] + " is complete."),
	}
}

// afterTheBrokersAck makes the model answer a wake only once tamq's broker
// has acknowledged its lease, as a real model's first answer comes seconds
// after the prompt (the broker acks some 70 ms after it): a scripted model
// answering at once would have the agent's first command take the attempt
// up before the broker saw it (lease.TakesUp), and the broker's own ack,
// which these tests watch, would not be the one recorded. It waits on the
// engine's receipts, not a fixed time, and at most 30 s (then the test's
// own step says the broker did not ack). It runs in the model server's
// goroutine: no t.Fatal here.
func (r *realLoop) afterTheBrokersAck(steps func(string) []modelserver.Step) func(string) []modelserver.Step {
	return func(prompt string) []modelserver.Step {
		if l := wakeLease.FindStringSubmatch(prompt); l != nil {
			testutil.Within(30*time.Second, func() bool {
				res, err := r.engine.Receipts(context.Background(), api.ReceiptsArgs{LeaseID: l[1]})
				return err == nil && slices.ContainsFunc(res.Receipts, func(rc api.Receipt) bool {
					return rc.Kind == "lease.acknowledged" && rc.Attempt == atoi(l[2]) && rc.Detail["by"] == "broker"
				})
			})
		}
		return steps(prompt)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// realLoop is one test's world with real agents: the loop's (tmux, gita,
// tamq, the engine, the reference State Hub), the scripted model server,
// and the agents' home, set up with `tamq agent setup` as docs/agents.md
// says.
type realLoop struct {
	*loop
	hub   *enginetest.Hub
	model *modelserver.Server
	// engine is the engine's client, for what the model's goroutine asks.
	engine *client.Client
	home   string
	// screens are the windows' screens, saved when the test fails.
	panes map[string]string
}

func newRealLoop(t *testing.T, rules []modelserver.Rule, coordination string, repos ...string) *realLoop {
	t.Helper()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, coordination), repos...)
	l.Env.WriteConfig(t, realTamqConfig)
	r := &realLoop{loop: l, hub: h, model: modelserver.Start(t, rules...), engine: client.New(l.PathsOf(t, paths.Engine)),
		home: filepath.Join(l.Env.Root, "agent-home"), panes: map[string]string{}}
	if err := os.MkdirAll(r.home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			r.saveScreens(t)
		}
	})
	return r
}

// repoPath is the directory gita has for repo (as testutil's Gita made it).
func (r *realLoop) repoPath(t *testing.T, repo string) string {
	t.Helper()
	return filepath.Join(r.Env.Root, "src", repo)
}

// setup runs `tamq agent setup AGENT REPO` with the agents' HOME.
func (r *realLoop) setup(t *testing.T, agent, repo string) {
	t.Helper()
	cmd := r.Env.Command(context.Background(), "tamq", "agent", "setup", agent, repo)
	cmd.Env = append(cmd.Env, "HOME="+r.home)
	if res := testutil.RunCmd(t, cmd); res.Status != 0 {
		t.Fatalf("tamq agent setup %s %s: %s", agent, repo, res)
	}
}

// openClaude opens repo's window running Claude Code in trigger mode.
func (r *realLoop) openClaude(t *testing.T, repo string) {
	t.Helper()
	path := r.repoPath(t, repo)
	env := r.model.ClaudeCodeEnv(t, modelserver.ClaudeCodeSetup{Home: r.home, Repo: path})
	r.setup(t, "claude", repo)
	r.open(t, repo, env, testutil.AgentBin(t, "claude"))
}

// openCodex opens repo's window running Codex in trigger mode.
func (r *realLoop) openCodex(t *testing.T, repo string) {
	t.Helper()
	path := r.repoPath(t, repo)
	bin := testutil.AgentBin(t, "codex")
	env, args := r.model.CodexEnv(t, modelserver.CodexSetup{Home: r.home, Repo: path})
	r.setup(t, "codex", repo)
	r.open(t, repo, env, bin+" "+strings.Join(args, " "))
}

func (r *realLoop) open(t *testing.T, repo string, env []string, command string) {
	t.Helper()
	env = append(env, "PATH="+testutil.AgentPath(t, r.Env.Bin), "TERM=xterm-256color")
	r.Env.Tamq(t, "open", "--tmux-socket", r.Tmux.Name, "--mode", "trigger", "--command", "env "+strings.Join(env, " ")+" "+command, repo)
	r.panes[repo] = strings.TrimSpace(r.Tmux.Must(t, "display", "-p", "-t", "tamq:"+repo, "#{pane_id}"))
	r.WaitAttached(t, repo, 1)
}

// screen is the window's screen now.
func (r *realLoop) screen(repo string) string {
	out, _ := r.Tmux.Cmd("capture-pane", "-p", "-J", "-t", r.panes[repo])
	return string(out)
}

// saveScreens writes every window's screen into .agents-screens/ of the
// checkout (CI keeps it), and logs them.
func (r *realLoop) saveScreens(t *testing.T) {
	dir := filepath.Join(moduleRoot(), ".agents-screens", strings.ReplaceAll(t.Name(), "/", "_"))
	os.MkdirAll(dir, 0o755)
	for repo := range r.panes {
		s := r.screen(repo)
		os.WriteFile(filepath.Join(dir, repo+".txt"), []byte(s), 0o644)
		t.Logf("screen of %s:\n%s", repo, s)
	}
	t.Logf("screens saved in %s", dir)
}

func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return os.TempDir()
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// step waits up to d for what the test names, so a failure names the step.
func step(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testutil.WaitUpTo(t, "step "+strconv.Quote(what), d, cond)
}

// leaseOfTask is the newest lease of the task's trigger, or nil.
func (r *realLoop) leaseOfTask(t *testing.T, task string) *api.Lease {
	t.Helper()
	x := r.Explain(t, task)
	for i := len(x.Triggers) - 1; i >= 0; i-- {
		if ls := x.Triggers[i].Leases; len(ls) > 0 {
			l := r.lease(t, ls[len(ls)-1].LeaseID)
			return &l
		}
	}
	return nil
}

// ackedBy is who acknowledged the lease, as its receipt says.
func (r *realLoop) ackedBy(t *testing.T, id string) any {
	for _, rc := range r.receipts(t, id) {
		if rc.Kind == "lease.acknowledged" {
			return rc.Detail["by"]
		}
	}
	return nil
}

// TestRealLoop: task A in one agent's window, task B in the other's,
// depending on A; each agent is woken, acknowledged by the broker, runs its
// checkpoint, task set and release as tool calls with no dialog on the
// way, and B wakes only once A is done. Then the same with the agents
// swapped.
func TestRealLoop(t *testing.T) {
	t.Logf("agents: Claude Code %s, Codex %s", agentVersion(t, testutil.NewEnv(t), "claude"), agentVersion(t, testutil.NewEnv(t), "codex"))
	// The rule is made before the loop it waits on: it finds it here.
	var loopOf atomic.Pointer[realLoop]
	steps := func(prompt string) []modelserver.Step { return loopOf.Load().afterTheBrokersAck(theLoopsPart)(prompt) }
	r := newRealLoop(t, []modelserver.Rule{{Contains: "coordination-engine wakes", Steps: steps}}, "wake_ack_timeout_seconds = 120\n", "alpha", "beta")
	loopOf.Store(r)
	r.openClaude(t, "alpha")
	r.openCodex(t, "beta")
	// Both idle at their prompts, so the timings are an idle agent's.
	for _, repo := range []string{"alpha", "beta"} {
		step(t, repo+"'s agent at its prompt", 2*time.Minute, func() bool { return strings.Contains(r.screen(repo), "? for shortcuts") })
	}
	for _, round := range []struct{ first, second, firstRepo, secondRepo string }{
		{"A", "B", "alpha", "beta"},
		{"C", "D", "beta", "alpha"},
	} {
		created := time.Now()
		r.hub.Put(contract.Workplan{ID: "W-" + round.first, Repo: round.firstRepo, Status: "active", Tasks: []contract.Task{
			enginetest.Todo(round.first, round.firstRepo),
			enginetest.Todo(round.second, round.secondRepo, round.first),
		}})
		var first *api.Lease
		step(t, round.first+" woken in "+round.firstRepo, 3*time.Minute, func() bool { first = r.leaseOfTask(t, round.first); return first != nil })
		step(t, round.first+" acknowledged by the broker", 2*time.Minute, func() bool { return r.ackedBy(t, first.LeaseID) == "broker" })
		step(t, round.first+" done and released", 3*time.Minute, func() bool {
			return r.hub.Task(round.first).Status == "done" && r.lease(t, first.LeaseID).State == "completed"
		})
		doneAt := time.Now()
		var second *api.Lease
		step(t, round.second+" woken in "+round.secondRepo, 2*time.Minute, func() bool { second = r.leaseOfTask(t, round.second); return second != nil })
		// The second was offered only after the model told the first's agent
		// to set its task done (the agent ran it after that answer).
		var told time.Time
		for _, q := range r.model.Requests() {
			if strings.Contains(q.Reply, "task set "+round.first+" --status done") {
				told = q.Time
			}
		}
		if told.IsZero() || second.AcquiredAt.Before(told) {
			t.Errorf("%s was offered at %v; %s's agent was told to set it done at %v", round.second, second.AcquiredAt, round.first, told)
		}
		step(t, round.second+" acknowledged by the broker", 2*time.Minute, func() bool { return r.ackedBy(t, second.LeaseID) == "broker" })
		step(t, round.second+" done and released", 3*time.Minute, func() bool {
			return r.hub.Task(round.second).Status == "done" && r.lease(t, second.LeaseID).State == "completed"
		})
		r.logTimings(t, round.firstRepo, first.LeaseID)
		r.logTimings(t, round.secondRepo, second.LeaseID)
		t.Logf("round %s→%s: created → %s done %v, → %s done %v", round.firstRepo, round.secondRepo, round.first, doneAt.Sub(created).Round(100*time.Millisecond), round.second, time.Since(created).Round(100*time.Millisecond))
	}
	// Every tool call ran and succeeded: no dialog stopped one.
	for _, q := range r.model.Requests() {
		for _, res := range q.ToolResults {
			if strings.Contains(res, "exited with code 1") || strings.Contains(res, "Exit code") || strings.Contains(res, "rejected") || strings.Contains(res, "denied") {
				t.Errorf("a tool call failed: %q", res)
			}
		}
	}
	r.noAgentLeftBehind(t)
}

// logTimings logs, for the lease's wake into repo's idle agent, how long
// the wake took from queued to submitted (the idle agent's wait) and from
// submitted to the broker's ack, as "timing" lines the closing notes read.
func (r *realLoop) logTimings(t *testing.T, repo, leaseID string) {
	t.Helper()
	ls := r.lease(t, leaseID)
	m := r.tamqMessage(t, ls.LocalLeaseID)
	var acked time.Time
	for _, rc := range r.receipts(t, leaseID) {
		if rc.Kind == "lease.acknowledged" {
			acked = rc.At
		}
	}
	if m.InjectedAt == nil || acked.IsZero() {
		t.Errorf("lease %s: no write or no ack (%+v)", leaseID, m)
		return
	}
	agent := "codex"
	for _, name := range []string{"claude", "gemini"} {
		// The program's path names it (the checkout's path may hold any word).
		if regexp.MustCompile(`/\.bin/` + name + `\b`).MatchString(r.Tmux.Must(t, "display", "-p", "-t", r.panes[repo], "#{pane_start_command}")) {
			agent = name
		}
	}
	t.Logf("timing %s wake_queued_to_submitted=%v submitted_to_broker_ack=%v", agent,
		m.InjectedAt.Sub(m.CreatedAt).Round(time.Millisecond), acked.Sub(*m.InjectedAt).Round(time.Millisecond))
}

// noAgentLeftBehind closes the windows and checks no agent process
// outlives them.
func (r *realLoop) noAgentLeftBehind(t *testing.T) {
	t.Helper()
	r.Tmux.Cmd("kill-server")
	step(t, "the agents to exit with their windows", 30*time.Second, func() bool { return len(agentProcesses(r.home)) == 0 })
}

// agentProcesses are the live processes whose environment names home: the
// agents of this test and whatever they started.
func agentProcesses(home string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sendTamq sends a message as the operator and returns its id.
func (r *realLoop) sendTamq(t *testing.T, text string) string {
	t.Helper()
	res := r.Env.Tamq(t, "send", "--json", text)
	var m tamqapi.Message
	if err := json.Unmarshal([]byte(res.Stdout), &m); err != nil {
		t.Fatalf("tamq send --json: %v\n%s", err, res)
	}
	return m.ID
}

// The ways the loop meets people and trouble, with the real agents:
//   - each agent asks permission for a command not allowed: a message sent
//     meanwhile is held, no Enter goes into the dialog; a person answers it
//     (send-keys, as a person would type) and the message goes in soon after;
//   - a task titled with 300 characters in an 80-column Codex window whose
//     agent goes idle without releasing: the lease expires (the broker stops
//     renewing an idle agent) and attempt 2 carries the checkpoint;
//   - an 8 KiB message goes in whole to each agent;
//   - an agent that exits mid-lease: its lease is no longer renewed;
//   - no agent process is left behind.
func TestRealLoopUnhappyPaths(t *testing.T) {
	long := strings.Repeat("Fix the parser's escaping of nested quotes in long titles ", 6)[:300]
	rules := []modelserver.Rule{
		// Attempt 1 of the long task: a checkpoint, then back to the
		// prompt without a release.
		{Contains: "coordination-engine wakes", Regexp: regexp.MustCompile(`attempt 1 of .*\n(?s:.*)task set LONG `), Steps: func(p string) []modelserver.Step {
			l := wakeLease.FindStringSubmatch(p)
			return []modelserver.Step{
				modelserver.Run(fmt.Sprintf("coordination-engine checkpoint --lease %s --attempt %s --summary 'half of the parser done' --next 'the other half'", l[1], l[2])),
				modelserver.Say("I stop here for now."),
			}
		}},
		// EXIT's agent asks to run a command not allowed, and is killed meanwhile.
		{Contains: "task set EXIT ", Steps: func(string) []modelserver.Step {
			return []modelserver.Step{modelserver.Run("touch exit-marker.txt"), modelserver.Say("Touched.")}
		}},
		{Contains: "coordination-engine wakes", Steps: theLoopsPart},
		modelserver.On("ask me first", modelserver.Ask("touch not-allowed.txt"), modelserver.Say("Touched.")),
		modelserver.On("eight KiB", modelserver.Say("Read all of it.")),
		modelserver.On("after the dialog", modelserver.Say("Got the second one.")),
	}
	r := newRealLoop(t, rules, "wake_ack_timeout_seconds = 120\nlease_renew_interval_seconds = 2\nlease_missed_renewals = 2\nretry_backoff_seconds = [1]\n", "alpha", "beta")
	r.openClaude(t, "alpha")
	r.openCodex(t, "beta")
	r.Tmux.Must(t, "resize-window", "-t", "tamq:beta", "-x", "80", "-y", "30")

	// The dialogs: each agent asks before it runs a command not allowed
	// (Codex: outside its sandbox).
	for _, repo := range []string{"alpha", "beta"} {
		agent := map[string]string{"alpha": "claude", "beta": "codex"}[repo]
		r.sendTamq(t, "To:"+repo+": ask me first")
		atDialog := func() bool {
			s := r.screen(repo)
			return strings.Contains(s, "Do you want to proceed?") || strings.Contains(s, "Press enter to confirm")
		}
		step(t, agent+"'s permission dialog", 2*time.Minute, atDialog)
		dialog := r.screen(repo)
		second := r.sendTamq(t, "To:"+repo+": after the dialog")
		step(t, "the second message to wait for "+agent+"'s dialog", time.Minute, func() bool {
			return strings.Contains(r.tamqMessage(t, second).LastError, "not at its prompt")
		})
		if st := r.tamqMessage(t, second); st.State != "queued" || strings.Contains(r.screen(repo), "after the dialog") {
			t.Fatalf("the second message went into %s's dialog: %+v\n%s", agent, st, r.screen(repo))
		}
		// A person answers yes, and presses Enter again when the first one
		// was not taken (an agent drawing its dialog may miss a key).
		r.Tmux.Must(t, "send-keys", "-t", r.panes[repo], "Enter")
		answered := time.Now()
		for i := 0; i < 3 && !testutil.Within(2*time.Second, func() bool { return !atDialog() }); i++ {
			t.Logf("%s's dialog still shows 2 s after the Enter: pressing it again", agent)
			r.Tmux.Must(t, "send-keys", "-t", r.panes[repo], "Enter")
			answered = time.Now()
		}
		step(t, "the second message to go in after "+agent+"'s dialog", time.Minute, func() bool { return r.tamqMessage(t, second).State == "injected" })
		t.Logf("timing %s dialog_closed_to_written=%v", agent, time.Since(answered).Round(10*time.Millisecond))
		if t.Failed() {
			t.Logf("%s's dialog:\n%s", agent, dialog)
		}
	}

	// Eight KiB to each agent, whole.
	for _, repo := range []string{"alpha", "beta"} {
		body := "eight KiB follow. " + strings.Repeat("0123456789abcdef", 600)
		body = body[:8*1024-len("To:"+repo+": ")-len("From:operator/o: ")]
		id := r.sendTamq(t, "To:"+repo+": "+body)
		step(t, "the 8 KiB message into "+repo, 2*time.Minute, func() bool { return r.tamqMessage(t, id).State == "injected" })
		step(t, repo+"'s model to get all of it", time.Minute, func() bool {
			for _, q := range r.model.Requests() {
				if strings.HasSuffix(strings.TrimSpace(q.Prompt), body[len(body)-64:]) && strings.Contains(q.Prompt, "eight KiB follow.") {
					return true
				}
			}
			return false
		})
	}

	// A 300-character title in an 80-column window, an agent idle without
	// releasing: attempt 2 carries the checkpoint and completes.
	r.hub.Put(contract.Workplan{ID: "W-LONG", Repo: "beta", Status: "active", Tasks: []contract.Task{{ID: "LONG", Title: long, Status: "todo", Repo: "beta"}}})
	var l *api.Lease
	step(t, "LONG woken", 2*time.Minute, func() bool { l = r.leaseOfTask(t, "LONG"); return l != nil })
	step(t, "LONG's attempt 2, after the idle agent's lease expired", 3*time.Minute, func() bool { return r.lease(t, l.LeaseID).Attempt == 2 })
	step(t, "LONG done by attempt 2", 3*time.Minute, func() bool {
		return r.hub.Task("LONG").Status == "done" && r.lease(t, l.LeaseID).State == "completed"
	})
	resumed := false
	for _, q := range r.model.Requests() {
		resumed = resumed || strings.Contains(q.Prompt, "attempt 2 of") && strings.Contains(q.Prompt, "Resume from your latest checkpoint") && strings.Contains(q.Prompt, "half of the parser done")
	}
	if !resumed {
		t.Error("attempt 2's prompt did not carry the checkpoint")
	}

	// An agent that exits mid-lease (killed while it waits at a permission
	// question in the middle of its turn): tamq no longer renews the lease,
	// and the attempt runs out.
	r.hub.Put(contract.Workplan{ID: "W-EXIT", Repo: "alpha", Status: "active", Tasks: []contract.Task{enginetest.Todo("EXIT", "alpha")}})
	var exit *api.Lease
	step(t, "EXIT woken", 2*time.Minute, func() bool { exit = r.leaseOfTask(t, "EXIT"); return exit != nil })
	step(t, "EXIT acknowledged", time.Minute, func() bool { return r.ackedBy(t, exit.LeaseID) == "broker" })
	step(t, "Claude Code asking to run its command", time.Minute, func() bool { return strings.Contains(r.screen("alpha"), "Do you want to proceed?") })
	killed := time.Now()
	r.killAgent(t, "alpha")
	step(t, "EXIT's attempt to run out once its agent is gone", time.Minute, func() bool {
		ls := r.lease(t, exit.LeaseID)
		return ls.State == "retry_wait" || ls.Attempt > 1
	})
	t.Logf("agent killed → its attempt over: %v (the hold is 4 s)", time.Since(killed).Round(100*time.Millisecond))
	r.noAgentLeftBehind(t)
}

// killAgent kills the agent running in repo's window (the processes under
// its broker), as a crash would.
func (r *realLoop) killAgent(t *testing.T, repo string) {
	t.Helper()
	var broker int
	fmt.Sscan(r.Tmux.Must(t, "display", "-p", "-t", r.panes[repo], "#{pane_pid}"), &broker)
	for _, pid := range descendants(broker) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// descendants are the processes below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The parent is the second field after the command's closing paren.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		var state string
		var ppid int
		fmt.Sscan(rest, &state, &ppid)
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// What a GitHub wake prompt names, as the scripted model reads it: the
// command that reads the task's description (the id quoted, as the prompt
// writes it).
var wakeShow = regexp.MustCompile(`(?m)task show ('[^']+'|\S+)$`)

// theGitHubLoopsPart is the model's part on a wake from GitHub Issues: it
// reads the issue's body first, as the prompt says, then does the loop's
// part.
func theGitHubLoopsPart(prompt string) []modelserver.Step {
	show := wakeShow.FindStringSubmatch(prompt)
	if show == nil {
		return []modelserver.Step{modelserver.Say("That wake names no task to read.")}
	}
	return append([]modelserver.Step{modelserver.Run("coordination-engine task show " + show[1])}, theLoopsPart(prompt)...)
}

// TestRealLoopFromGitHub: the loop driven from GitHub Issues (the double of
// its API) with the real agents: B, in Codex's repo, is blocked by A, in
// Claude Code's; once both are labelled, Claude Code is woken for A, reads
// the issue's body (`task show 'octo-org/alpha#1'`, the id quoted as the
// prompt writes it), closes it (`task set … --status done`) and releases;
// then Codex is woken for B and does the same. Every command runs as a tool
// call with no dialog on the way (tamq agent setup allows task show).
func TestRealLoopFromGitHub(t *testing.T) {
	l, gh := githubLoop(t, "wake_ack_timeout_seconds = 120\n", "alpha", "beta")
	l.Env.WriteConfig(t, realTamqConfig)
	r := &realLoop{loop: l, engine: client.New(l.PathsOf(t, paths.Engine)), home: filepath.Join(l.Env.Root, "agent-home"), panes: map[string]string{}}
	r.model = modelserver.Start(t, modelserver.Rule{Contains: "coordination-engine wakes", Steps: r.afterTheBrokersAck(theGitHubLoopsPart)})
	if err := os.MkdirAll(r.home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			r.saveScreens(t)
		}
	})
	r.openClaude(t, "alpha")
	r.openCodex(t, "beta")
	for _, repo := range []string{"alpha", "beta"} {
		step(t, repo+"'s agent at its prompt", 2*time.Minute, func() bool { return strings.Contains(r.screen(repo), "? for shortcuts") })
	}
	alpha, beta := ghOwner+"/alpha", ghOwner+"/beta"
	a := gh.CreateIssue(alpha, githubdouble.IssueInput{Title: "A", Body: "Do A.\nIt is small."})
	b := gh.CreateIssue(beta, githubdouble.IssueInput{Title: "B", Body: "Then B."})
	gh.AddBlockedBy(beta, b.Number, githubdouble.IssueRef{Repo: alpha, Number: a.Number})
	gh.AddLabels(alpha, a.Number, "agent")
	gh.AddLabels(beta, b.Number, "agent")
	for _, x := range []struct {
		repo string
		n    int
	}{{alpha, a.Number}, {beta, b.Number}} {
		id := github.TaskID(x.repo, x.n)
		step(t, id+" closed on GitHub", 5*time.Minute, func() bool { return gh.Issue(x.repo, x.n).State == "closed" })
		var l *api.Lease
		step(t, id+"'s lease released", 2*time.Minute, func() bool { l = r.leaseOfTask(t, id); return l != nil && l.State == "completed" })
		if by := r.ackedBy(t, l.LeaseID); by != "broker" {
			t.Errorf("%s acknowledged by %v", id, by)
		}
	}
	// Each request carries the turn's tool results so far: the pages shown
	// are counted once each.
	shown := map[string]bool{}
	for _, q := range r.model.Requests() {
		for _, res := range q.ToolResults {
			if strings.Contains(res, "exited with code 1") || strings.Contains(res, "Exit code") || strings.Contains(res, "rejected") || strings.Contains(res, "denied") {
				t.Errorf("a tool call failed: %q", res)
			}
			if _, page, ok := strings.Cut(res, "page: "); ok {
				shown[strings.Fields(page)[0]] = true
			}
		}
	}
	if len(shown) != 2 {
		t.Errorf("the agents read the descriptions of %v, want A's and B's", shown)
	}
	r.noAgentLeftBehind(t)
}
