//go:build agents

// The real agents' tests are built only with the agents tag, which `make
// test-agents` sets: `make test` neither builds nor skips them.

package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/modelserver"
)

// The real Claude Code and Codex CLIs under tamq, offline with fake keys:
// `make test-agents` installs them (scripts/install-agents) and sets
// TAMQ_TEST_AGENTS to the folder holding their node_modules.

// Fake keys of the right shape: the agents start with them and fail only
// when they reach for their API.
const (
	fakeAnthropicKey = "sk-ant-api03-tamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtestAA"
	fakeOpenAIKey    = "sk-proj-tamqtesttamqtesttamqtesttamqtesttamqtestab"
)

// agentsConfig lets a delivery that finds no prompt be tried again for
// over a minute: offline, the agents take up to 40 s to show their prompt.
const agentsConfig = "[delivery]\nenter_pause_ms = 300\n[coordination]\nretry_backoff_seconds = [8]\nmax_attempts = 9\n"

func agentBin(t *testing.T, name string) string { return testutil.AgentBin(t, name) }

// agentWindow opens a window for repo running command with env, and
// returns the pane and a reader of its screen.
func agentWindow(t *testing.T, e *testutil.Env, tm *testutil.Tmux, repo string, env []string, command string) (string, func() string) {
	t.Helper()
	env = append(env, "PATH="+testutil.AgentPath(t))
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "env "+strings.Join(env, " ")+" "+command, repo)
	pane := paneOf(t, tm, repo)
	return pane, func() string { out, _ := tm.Cmd("capture-pane", "-p", "-J", "-t", pane); return string(out) }
}

func paneDead(t *testing.T, tm *testutil.Tmux, pane string) bool {
	return tm.Must(t, "display", "-p", "-t", pane, "#{pane_dead}") == "1"
}

// claudeHome writes what Claude Code needs to start offline without its
// first-run screens; trusted says whether it trusts the repo.
func claudeHome(t *testing.T, e *testutil.Env, repoPath string, trusted bool) []string {
	t.Helper()
	home := filepath.Join(e.Root, "agent-home")
	os.MkdirAll(home, 0o755)
	projects := map[string]any{}
	if trusted {
		projects[repoPath] = map[string]bool{"hasTrustDialogAccepted": true}
	}
	cfg, _ := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string][]string{"approved": {fakeAnthropicKey[len(fakeAnthropicKey)-20:]}, "rejected": {}},
		"projects":               projects,
	})
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "ANTHROPIC_API_KEY=" + fakeAnthropicKey, "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "TERM=xterm-256color"}
}

// codexHome writes Codex's home: logged in with the fake key (or not, to
// get its sign-in menu) and trusting the repo.
func codexHome(t *testing.T, e *testutil.Env, bin, repoPath string, loggedIn bool) []string {
	t.Helper()
	home := filepath.Join(e.Root, "agent-home")
	os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
	env := []string{"HOME=" + home, "OPENAI_API_KEY=" + fakeOpenAIKey, "TERM=xterm-256color"}
	if loggedIn {
		login := exec.Command(bin, "login", "--with-api-key")
		login.Env, login.Dir = append(os.Environ(), env...), repoPath
		login.Stdin = strings.NewReader(fakeOpenAIKey + "\n")
		if out, err := login.CombinedOutput(); err != nil {
			t.Fatalf("codex login: %v\n%s", err, out)
		}
	}
	cfg := fmt.Sprintf("[projects.%q]\ntrust_level = \"trusted\"\n", repoPath)
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return env
}

// geminiHome writes Gemini CLI's home for srv (modelserver.GeminiEnv), then
// takes back the repo's trust (untrusted) or the sign-in choice (signedOut)
// to get its first-start screens.
func geminiHome(t *testing.T, e *testutil.Env, srv *modelserver.Server, repoPath string, untrusted, signedOut bool) []string {
	t.Helper()
	home := filepath.Join(e.Root, "agent-home")
	g := modelserver.GeminiSetup{Home: home, Repo: repoPath}
	if signedOut {
		g.Settings = map[string]any{"security": map[string]any{}}
	}
	env := srv.GeminiEnv(t, g)
	if untrusted {
		if err := os.Remove(filepath.Join(home, ".gemini", "trustedFolders.json")); err != nil {
			t.Fatal(err)
		}
	}
	return append(env, "TERM=xterm-256color")
}

const threeLines = "To:%s: line one\nline two\nline three"

func TestRealAgents(t *testing.T) {
	t.Run("Claude Code takes a three-line message as one prompt", func(t *testing.T) {
		bin := agentBin(t, "claude")
		t.Parallel()
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "claude-repo")["claude-repo"]
		_, screen := agentWindow(t, e, tm, "claude-repo", claudeHome(t, e, repo, true), bin)
		defer func() {
			if t.Failed() {
				t.Logf("screen:\n%s", screen())
			}
		}()
		m := send(t, e, fmt.Sprintf(threeLines, "claude-repo"))
		defer func() {
			if t.Failed() {
				t.Logf("message: %+v", stateOf(t, e, m.ID))
			}
		}()
		testutil.WaitUpTo(t, "the message to go in", 3*time.Minute, func() bool { return stateOf(t, e, m.ID).State == "injected" })
		testutil.WaitUpTo(t, "Claude to submit it and fail on its API", 2*time.Minute, func() bool {
			return strings.Contains(screen(), "Can't reach the API server")
		})
		if s := screen(); strings.Count(s, "From:operator/o: line one") != 1 || !strings.Contains(s, "line three") {
			t.Errorf("not one prompt of three lines:\n%s", s)
		}
	})
	t.Run("Claude Code's trust dialog gets no Enter", func(t *testing.T) {
		bin := agentBin(t, "claude")
		t.Parallel()
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "claude-repo")["claude-repo"]
		pane, screen := agentWindow(t, e, tm, "claude-repo", claudeHome(t, e, repo, false), bin)
		noEnterIntoTheDialog(t, e, tm, pane, screen, "claude-repo", "Yes, I trust this folder")
	})
	t.Run("Codex takes a three-line message as one prompt", func(t *testing.T) {
		bin := agentBin(t, "codex")
		t.Parallel()
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "codex-repo")["codex-repo"]
		_, screen := agentWindow(t, e, tm, "codex-repo", codexHome(t, e, bin, repo, true), bin+" --no-daemon")
		defer func() {
			if t.Failed() {
				t.Logf("screen:\n%s", screen())
			}
		}()
		m := send(t, e, fmt.Sprintf(threeLines, "codex-repo"))
		testutil.WaitUpTo(t, "the message to go in", 3*time.Minute, func() bool { return stateOf(t, e, m.ID).State == "injected" })
		testutil.WaitUpTo(t, "Codex to submit it", 2*time.Minute, func() bool {
			s := screen()
			return strings.Contains(s, "esc to interrupt") || strings.Contains(s, "Reconnecting") || strings.Contains(s, "Queued follow-up")
		})
		if s := screen(); strings.Count(s, "From:operator/o: line one") != 1 || !strings.Contains(s, "line three") {
			t.Errorf("not one prompt of three lines:\n%s", s)
		}
	})
	t.Run("Codex's sign-in menu gets no Enter", func(t *testing.T) {
		bin := agentBin(t, "codex")
		t.Parallel()
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "codex-repo")["codex-repo"]
		pane, screen := agentWindow(t, e, tm, "codex-repo", codexHome(t, e, bin, repo, false), bin+" --no-daemon")
		noEnterIntoTheDialog(t, e, tm, pane, screen, "codex-repo", "Sign in with ChatGPT")
	})
	t.Run("Gemini CLI takes a three-line message as one prompt", func(t *testing.T) {
		bin := agentBin(t, "gemini")
		t.Parallel()
		srv := modelserver.Start(t)
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "gemini-repo")["gemini-repo"]
		_, screen := agentWindow(t, e, tm, "gemini-repo", geminiHome(t, e, srv, repo, false, false), bin)
		defer func() {
			if t.Failed() {
				t.Logf("screen:\n%s", screen())
			}
		}()
		m := send(t, e, fmt.Sprintf(threeLines, "gemini-repo"))
		testutil.WaitUpTo(t, "the message to go in", 3*time.Minute, func() bool { return stateOf(t, e, m.ID).State == "injected" })
		var prompts []string
		testutil.WaitUpTo(t, "Gemini CLI to submit it", 2*time.Minute, func() bool {
			prompts = nil
			for _, r := range srv.Requests() {
				if r.Agent == modelserver.Gemini && r.Shell != "" {
					prompts = append(prompts, r.Prompt)
				}
			}
			return len(prompts) > 0
		})
		if len(prompts) != 1 || prompts[0] != "From:operator/o: line one\nline two\nline three" {
			t.Errorf("not one prompt of three lines: %q", prompts)
		}
	})
	t.Run("Gemini CLI's trust dialog gets no Enter", func(t *testing.T) {
		bin := agentBin(t, "gemini")
		t.Parallel()
		srv := modelserver.Start(t)
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "gemini-repo")["gemini-repo"]
		pane, screen := agentWindow(t, e, tm, "gemini-repo", geminiHome(t, e, srv, repo, true, false), bin)
		noEnterIntoTheDialog(t, e, tm, pane, screen, "gemini-repo", "Do you trust the files in this folder?")
	})
	t.Run("Gemini CLI's sign-in menu gets no Enter", func(t *testing.T) {
		bin := agentBin(t, "gemini")
		t.Parallel()
		srv := modelserver.Start(t)
		e, tm := emptyWorkspace(t, agentsConfig)
		repo := e.Gita(t, "gemini-repo")["gemini-repo"]
		pane, screen := agentWindow(t, e, tm, "gemini-repo", geminiHome(t, e, srv, repo, false, true), bin)
		noEnterIntoTheDialog(t, e, tm, pane, screen, "gemini-repo", "How would you like to authenticate")
	})
}

// noEnterIntoTheDialog waits for the dialog (known by its text), sends a
// message, and checks that the broker held it back: queued with the reason,
// the agent alive, the dialog still there.
func noEnterIntoTheDialog(t *testing.T, e *testutil.Env, tm *testutil.Tmux, pane string, screen func() string, repo, dialog string) {
	t.Helper()
	testutil.WaitUpTo(t, "the dialog", 2*time.Minute, func() bool { return strings.Contains(screen(), dialog) })
	m := send(t, e, fmt.Sprintf(threeLines, repo))
	testutil.WaitUpTo(t, "the broker to hold the delivery back", 2*time.Minute, func() bool {
		return strings.Contains(stateOf(t, e, m.ID).LastError, "not at its prompt")
	})
	if st := stateOf(t, e, m.ID); st.State != "queued" {
		t.Errorf("message %+v", st)
	}
	if paneDead(t, tm, pane) || !strings.Contains(screen(), dialog) {
		t.Errorf("the dialog was answered:\n%s", screen())
	}
}
