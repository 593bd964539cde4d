//go:build agents

package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/modelserver"
)

// openGemini opens repo's window running Gemini CLI in trigger mode, set up
// by `tamq agent setup gemini` (its policy allows the loop's commands, its
// trust takes the repo: the model server's environment trusts none).
func (r *realLoop) openGemini(t *testing.T, repo string) {
	t.Helper()
	env := r.model.GeminiEnv(t, modelserver.GeminiSetup{Home: r.home})
	r.setup(t, "gemini", repo)
	r.open(t, repo, env, testutil.AgentBin(t, "gemini"))
}

// geminiAtPrompt says Gemini CLI shows its empty composer.
func geminiAtPrompt(screen string) bool { return strings.Contains(screen, " >   Type your message") }

// TestRealLoopGemini: Gemini CLI, in an 80-column window, with Codex
// beside it. Task A in Gemini CLI's window, B in Codex's depending on it,
// then the other way round: each woken, acknowledged by the broker, its
// checkpoint, task set and release run as tool calls with no dialog on the
// way. Then messages between the two by To: lines, both ways; a permission
// question held (a message sent meanwhile waits, no Enter goes into the
// box) and answered by a person; an 8 KiB message whole; and no agent left
// running.
func TestRealLoopGemini(t *testing.T) {
	e := testutil.NewEnv(t)
	t.Logf("agents: Gemini CLI %s, Codex %s", agentVersion(t, e, "gemini"), agentVersion(t, e, "codex"))
	var loop *realLoop
	// The first rule that matches wins, and a prompt may hold a batch of
	// messages: the later steps' rules come first.
	rules := []modelserver.Rule{
		{Contains: "coordination-engine wakes", Steps: func(p string) []modelserver.Step { return loop.afterTheBrokersAck(theLoopsPart)(p) }},
		modelserver.On("ask me first", modelserver.Run("touch not-allowed.txt"), modelserver.Say("Touched.")),
		modelserver.On("eight KiB", modelserver.Say("Read all of it.")),
		modelserver.On("after the dialog", modelserver.Say("Got the second one.")),
		modelserver.On("greet beta", modelserver.Say("To:beta: hello from gemini")),
		modelserver.On("hello from gemini", modelserver.Say("To:alpha: hello back from codex")),
		modelserver.On("hello back from codex", modelserver.Say("Got the greeting.")),
	}
	r := newRealLoop(t, rules, "wake_ack_timeout_seconds = 120\n", "alpha", "beta")
	loop = r
	r.openGemini(t, "alpha")
	r.Tmux.Must(t, "resize-window", "-t", "tamq:alpha", "-x", "80", "-y", "30")
	r.openCodex(t, "beta")
	step(t, "Gemini CLI at its prompt", 2*time.Minute, func() bool { return geminiAtPrompt(r.screen("alpha")) })
	step(t, "Codex at its prompt", 2*time.Minute, func() bool { return strings.Contains(r.screen("beta"), "? for shortcuts") })

	for _, round := range []struct{ first, second, firstRepo, secondRepo string }{
		{"A", "B", "alpha", "beta"},
		{"C", "D", "beta", "alpha"},
	} {
		r.hub.Put(contract.Workplan{ID: "W-" + round.first, Repo: round.firstRepo, Status: "active", Tasks: []contract.Task{
			enginetest.Todo(round.first, round.firstRepo),
			enginetest.Todo(round.second, round.secondRepo, round.first),
		}})
		for _, x := range []struct{ task, repo string }{{round.first, round.firstRepo}, {round.second, round.secondRepo}} {
			var l *api.Lease
			step(t, x.task+" woken in "+x.repo, 3*time.Minute, func() bool { l = r.leaseOfTask(t, x.task); return l != nil })
			step(t, x.task+" acknowledged by the broker", 2*time.Minute, func() bool { return r.ackedBy(t, l.LeaseID) == "broker" })
			step(t, x.task+" done and released", 3*time.Minute, func() bool {
				return r.hub.Task(x.task).Status == "done" && r.lease(t, l.LeaseID).State == "completed"
			})
			r.logTimings(t, x.repo, l.LeaseID)
		}
	}

	// To: lines both ways: Gemini CLI's "✦ To:beta: …" goes to Codex,
	// Codex's "• To:alpha: …" back.
	r.sendTamq(t, "To:alpha: greet beta")
	step(t, "Gemini CLI's greeting to reach Codex's model", 2*time.Minute, func() bool { return r.promptSeen(modelserver.Codex, "From:alpha") })
	step(t, "Codex's answer to reach Gemini CLI's model", 2*time.Minute, func() bool { return r.promptSeen(modelserver.Gemini, "hello back from codex") })

	// A permission question: a message sent meanwhile waits; a person
	// answers (Enter on "1. Allow once"), then it goes in.
	r.sendTamq(t, "To:alpha: ask me first")
	atDialog := func() bool { return strings.Contains(r.screen("alpha"), "Allow execution of") }
	step(t, "Gemini CLI's permission question", 2*time.Minute, atDialog)
	second := r.sendTamq(t, "To:alpha: after the dialog")
	step(t, "the second message to wait for the question", time.Minute, func() bool {
		return strings.Contains(r.tamqMessage(t, second).LastError, "not at its prompt")
	})
	if st := r.tamqMessage(t, second); st.State != "queued" || strings.Contains(r.screen("alpha"), "after the dialog") {
		t.Fatalf("the second message went into Gemini CLI's question: %+v\n%s", st, r.screen("alpha"))
	}
	r.Tmux.Must(t, "send-keys", "-t", r.panes["alpha"], "Enter")
	answered := time.Now()
	for i := 0; i < 3 && !testutil.Within(2*time.Second, func() bool { return !atDialog() }); i++ {
		t.Logf("the question still shows 2 s after the Enter: pressing it again")
		r.Tmux.Must(t, "send-keys", "-t", r.panes["alpha"], "Enter")
		answered = time.Now()
	}
	step(t, "the second message to go in after the question", time.Minute, func() bool { return r.tamqMessage(t, second).State == "injected" })
	t.Logf("timing gemini dialog_closed_to_written=%v", time.Since(answered).Round(10*time.Millisecond))
	step(t, "Gemini CLI's model to get the second message", time.Minute, func() bool { return r.promptSeen(modelserver.Gemini, "after the dialog") })

	// Eight KiB, whole (Gemini CLI shows it as "[Pasted Text: N chars]").
	body := "eight KiB follow. " + strings.Repeat("0123456789abcdef", 600)
	body = body[:8*1024-len("To:alpha: ")-len("From:operator/o: ")]
	id := r.sendTamq(t, "To:alpha: "+body)
	step(t, "the 8 KiB message into Gemini CLI", 2*time.Minute, func() bool { return r.tamqMessage(t, id).State == "injected" })
	step(t, "Gemini CLI's model to get all of it", time.Minute, func() bool {
		for _, q := range r.model.Requests() {
			if q.Agent == modelserver.Gemini && strings.HasSuffix(strings.TrimSpace(q.Prompt), body[len(body)-64:]) && strings.Contains(q.Prompt, "eight KiB follow.") {
				return true
			}
		}
		return false
	})

	// Every tool call but the one asked about ran unasked and succeeded.
	for _, q := range r.model.Requests() {
		for _, res := range q.ToolResults {
			if strings.Contains(res, "exited with code 1") || strings.Contains(res, "Exit Code: 1") || strings.Contains(res, "rejected") || strings.Contains(res, "denied") {
				t.Errorf("a tool call failed: %q", res)
			}
		}
	}
	r.noAgentLeftBehind(t)
}

// promptSeen says agent's model was asked a prompt holding text.
func (r *realLoop) promptSeen(agent, text string) bool {
	for _, q := range r.model.Requests() {
		if q.Agent == agent && strings.Contains(q.Prompt, text) {
			return true
		}
	}
	return false
}
