package modelserver

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Fake keys of the shapes the agents accept: they start with them, and the
// server never checks them.
const (
	FakeAnthropicKey = "sk-ant-api03-modelservermodelservermodelservermodelservermodelservermodelservermodelserverAA"
	FakeOpenAIKey    = "sk-proj-modelservermodelservermodelservermodelserverab"
)

// codexKeyEnv names the variable Codex's provider reads its key from.
const codexKeyEnv = "MODELSERVER_API_KEY"

// ClaudeCodeSetup says where Claude Code runs: its HOME, the project folder
// it starts in, and the permission rules of that project.
type ClaudeCodeSetup struct {
	Home string
	Repo string
	// Allow are permission rules for Repo/.claude/settings.json, such as
	// "Bash(touch /tmp/x/one.txt:*)" or "Edit(//tmp/x/**)" (a command that
	// writes a file outside the project needs both).
	Allow []string
}

// ClaudeCodeEnv writes what Claude Code needs to run against s offline
// with no first-run screens, and returns the environment to start it with:
// $HOME/.claude.json (onboarding done, the fake key approved, Repo
// trusted), $HOME/.claude/settings.json (auto mode disabled, see the
// package doc) and Repo/.claude/settings.json with the Allow rules.
func (s *Server) ClaudeCodeEnv(t testing.TB, c ClaudeCodeSetup) []string {
	t.Helper()
	writeJSONFile(t, filepath.Join(c.Home, ".claude.json"), map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string][]string{"approved": {FakeAnthropicKey[len(FakeAnthropicKey)-20:]}, "rejected": {}},
		"projects":               map[string]any{c.Repo: map[string]bool{"hasTrustDialogAccepted": true}},
	})
	writeJSONFile(t, filepath.Join(c.Home, ".claude", "settings.json"), map[string]any{
		"permissions": map[string]any{"defaultMode": "default", "disableAutoMode": "disable"},
	})
	writeJSONFile(t, filepath.Join(c.Repo, ".claude", "settings.json"), map[string]any{
		"permissions": map[string]any{"allow": append([]string{}, c.Allow...)},
	})
	return []string{
		"HOME=" + c.Home,
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=" + FakeAnthropicKey,
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
	}
}

// CodexSetup says where Codex runs and what it may run unasked.
type CodexSetup struct {
	// Bin is the codex executable: when set, Codex is logged in with the
	// fake key (`codex login --with-api-key`). The model provider does
	// not need it; a config that falls back to the built-in OpenAI
	// provider does.
	Bin  string
	Home string
	Repo string
	// Allow are command prefixes (["touch", "/tmp/x/one.txt"]) written as
	// prefix_rule(..., decision="allow") to $HOME/.codex/rules: Codex runs
	// a command they match outside its sandbox, without asking.
	Allow [][]string
	// Config is more TOML for config.toml (whole tables, such as
	// [sandbox_workspace_write]).
	Config string
}

// CodexModel is the model Codex is told to use: a name it does not know,
// so it uses its fallback model metadata, which offers plain function tools
// (exec_command). Known names behave differently: gpt-5.5 is migrated on
// start to gpt-6-sol, whose tools come in an additional_tools item as
// JavaScript "code mode".
const CodexModel = "gpt-5-codex"

// CodexEnv writes what Codex needs to run against s offline, logs it in
// with the fake key, and returns the environment and the arguments
// (--no-daemon) to start it with: $HOME/.codex/config.toml (a model
// provider at s with the Responses API, Repo trusted, update checks,
// analytics, plugins, apps and the background daemon off, paste-burst
// detection off) and the Allow rules.
func (s *Server) CodexEnv(t testing.TB, c CodexSetup) (env, args []string) {
	t.Helper()
	dir := filepath.Join(c.Home, ".codex")
	var b strings.Builder
	fmt.Fprintf(&b, "model = %q\nmodel_provider = \"modelserver\"\ncheck_for_update_on_startup = false\n\n", CodexModel)
	fmt.Fprintf(&b, "[model_providers.modelserver]\nname = \"modelserver\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = %q\n\n", s.URL+"/v1", codexKeyEnv)
	b.WriteString("[analytics]\nenabled = false\n\n")
	b.WriteString("[tui]\nshow_tooltips = false\ndisable_paste_burst = true\n\n")
	b.WriteString("[features]\nplugins = false\nremote_plugin = false\napps = false\ndaemon_auto_start = false\n\n")
	fmt.Fprintf(&b, "[projects.%q]\ntrust_level = \"trusted\"\n\n", c.Repo)
	b.WriteString(c.Config)
	writeFile(t, filepath.Join(dir, "config.toml"), b.String())
	var rules strings.Builder
	for _, prefix := range c.Allow {
		q := make([]string, len(prefix))
		for i, p := range prefix {
			q[i] = fmt.Sprintf("%q", p)
		}
		fmt.Fprintf(&rules, "prefix_rule(pattern=[%s], decision=\"allow\")\n", strings.Join(q, ", "))
	}
	writeFile(t, filepath.Join(dir, "rules", "modelserver.rules"), rules.String())

	env = []string{"HOME=" + c.Home, codexKeyEnv + "=" + FakeOpenAIKey}
	if c.Bin == "" {
		return env, []string{"--no-daemon"}
	}
	login := exec.Command(c.Bin, "login", "--with-api-key")
	login.Env, login.Dir = append(os.Environ(), env...), c.Repo
	login.Stdin = strings.NewReader(FakeOpenAIKey + "\n")
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("codex login: %v\n%s", err, out)
	}
	return env, []string{"--no-daemon"}
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b)+"\n")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// FakeGeminiKey is a fake Gemini API key: Gemini CLI starts with any
// non-empty key, and the server never checks it.
const FakeGeminiKey = "AIzaSyModelServerModelServerModelServer0"

// GeminiSetup says where Gemini CLI runs and what it may run unasked.
type GeminiSetup struct {
	Home string
	// Repo is the folder to trust; "" trusts none (tamq agent setup
	// gemini writes the trust).
	Repo string
	// Allow are command prefixes ("touch /tmp/x/one.txt") written as
	// policy rules (toolName run_shell_command, commandPrefix, decision
	// allow) to $HOME/.gemini/policies/modelserver.toml: Gemini CLI runs
	// a command they match without asking.
	Allow []string
	// Settings are more top-level keys for $HOME/.gemini/settings.json
	// (hooks, …).
	Settings map[string]any
}

// GeminiEnv writes what Gemini CLI needs to run against s offline with no
// first-run screens, and returns the environment to start it with:
// $HOME/.gemini/settings.json (the API key chosen as the sign-in, update
// checks, update notices and usage statistics off), trustedFolders.json
// (Repo trusted) and the Allow rules. GOOGLE_GEMINI_BASE_URL points it at
// s (plain http is accepted on loopback). CI and GITHUB_ACTIONS are emptied:
// Gemini CLI runs headless, with no screen, when either is "true", as CI
// machines set them, and then exits at once for want of a prompt on stdin.
func (s *Server) GeminiEnv(t testing.TB, g GeminiSetup) []string {
	t.Helper()
	dir := filepath.Join(g.Home, ".gemini")
	settings := map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"general":  map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
	}
	for k, v := range g.Settings {
		settings[k] = v
	}
	writeJSONFile(t, filepath.Join(dir, "settings.json"), settings)
	if g.Repo != "" {
		writeJSONFile(t, filepath.Join(dir, "trustedFolders.json"), map[string]string{g.Repo: "TRUST_FOLDER"})
	}
	var policy strings.Builder
	for _, prefix := range g.Allow {
		fmt.Fprintf(&policy, "[[rule]]\ntoolName = %q\ncommandPrefix = %q\ndecision = \"allow\"\npriority = 100\n\n", geminiShell, prefix)
	}
	writeFile(t, filepath.Join(dir, "policies", "modelserver.toml"), policy.String())
	return []string{
		"HOME=" + g.Home,
		"GOOGLE_GEMINI_BASE_URL=" + s.URL,
		"GEMINI_API_KEY=" + FakeGeminiKey,
		"CI=",
		"GITHUB_ACTIONS=",
	}
}
