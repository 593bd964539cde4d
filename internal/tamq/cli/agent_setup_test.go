package cli

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/agentsetup"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// setupEnv is a private HOME and XDG directories with a gita registry of
// real repositories, and a PATH holding stand-ins for tamq and
// coordination-engine, for tamq agent setup run in this process.
type setupEnv struct {
	vars  map[string]string
	home  string
	repos map[string]string
}

func newSetupEnv(t *testing.T, repos ...string) *setupEnv {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	os.MkdirAll(bin, 0o755)
	for _, name := range []string{"tamq", "coordination-engine"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &setupEnv{home: filepath.Join(root, "home"), repos: map[string]string{}}
	e.vars = map[string]string{"HOME": e.home, "XDG_CONFIG_HOME": filepath.Join(root, "config"),
		"XDG_STATE_HOME": filepath.Join(root, "state"), "XDG_RUNTIME_DIR": filepath.Join(root, "run"), "PATH": bin}
	os.MkdirAll(e.home, 0o755)
	var csv strings.Builder
	for _, name := range repos {
		path := filepath.Join(root, "src", name)
		if out, err := exec.Command("git", "init", "-q", path).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		csv.WriteString(testutil.GitaRow(path, name))
		e.repos[name] = path
	}
	os.MkdirAll(filepath.Join(e.vars["XDG_CONFIG_HOME"], "gita"), 0o755)
	if err := os.WriteFile(filepath.Join(e.vars["XDG_CONFIG_HOME"], "gita", "repos.csv"), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

type setupResult struct {
	stdout, stderr string
	status         int
}

// run runs tamq in this process.
func (e *setupEnv) run(args ...string) setupResult {
	var out, errb bytes.Buffer
	a := &app.App{Program: paths.Tamq, Short: short, Migrations: store.Migrations,
		Getenv: func(k string) string { return e.vars[k] }, Now: time.Now, In: strings.NewReader(""), Out: &out, Err: &errb}
	status := app.Run(a, NewRoot(a), args)
	return setupResult{out.String(), errb.String(), status}
}

func (e *setupEnv) must(t *testing.T, args ...string) setupResult {
	t.Helper()
	r := e.run(args...)
	if r.status != 0 {
		t.Fatalf("tamq %s: exit %d\n%s%s", strings.Join(args, " "), r.status, r.stdout, r.stderr)
	}
	return r
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// Claude Code with --user-wide, the user's settings: --dry-run shows the
// diff and writes nothing; the run writes the file (0600 in a 0700
// directory) and says so in one line, and that the rules are user-wide;
// the next run changes nothing and says so. A user's file that is a
// symbolic link (a dotfiles repository) stays one.
func TestAgentSetupClaudeUserWide(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	settings := filepath.Join(e.home, ".claude", "settings.json")
	want, err := agentsetup.Claude(settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	scope := "scope: user-wide (--user-wide): every Claude Code session on this machine, in any directory, runs the loop's commands without asking\n"

	dry := e.must(t, "agent", "setup", "claude", "--user-wide", "--dry-run")
	for _, s := range []string{"--- /dev/null\n", "+++ " + settings + "\n", `+      "Bash(coordination-engine lease release:*)",`,
		"would write " + settings + " (Claude Code's settings for every repo): added 6 allow rules", scope} {
		if !strings.Contains(dry.stdout, s) {
			t.Errorf("--dry-run output lacks %q:\n%s", s, dry.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, ".claude")); err == nil {
		t.Fatal("--dry-run created ~/.claude")
	}
	if dry.stderr != "" {
		t.Errorf("stderr: %s", dry.stderr)
	}

	r := e.must(t, "agent", "setup", "claude", "--user-wide")
	if got := readFile(t, settings); got != string(want.Content) {
		t.Errorf("settings.json:\n%s", got)
	}
	if m := mode(t, settings); m != 0o600 {
		t.Errorf("settings.json is %v", m)
	}
	if m := mode(t, filepath.Dir(settings)); m != 0o700 {
		t.Errorf("~/.claude is %v", m)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "wrote "+settings+" (") || lines[1]+"\n" != scope {
		t.Errorf("output: %q", r.stdout)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(e.home, ".claude", ".*tamq-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if _, err := os.Stat(filepath.Join(e.repos["alpha"], ".claude")); err == nil {
		t.Error("--user-wide wrote into a repo")
	}

	again := e.must(t, "agent", "setup", "claude", "--user-wide")
	if !strings.Contains(again.stdout, "unchanged "+settings) || !strings.HasSuffix(again.stdout, scope+"nothing to change\n") {
		t.Errorf("second run: %q", again.stdout)
	}
	if got := readFile(t, settings); got != string(want.Content) {
		t.Errorf("the second run changed settings.json:\n%s", got)
	}
	if d := e.must(t, "agent", "setup", "claude", "--user-wide", "--dry-run"); d.stdout != again.stdout {
		t.Errorf("--dry-run with nothing to change: %q", d.stdout)
	}

	// The user's settings kept in a dotfiles repository, linked.
	e2 := newSetupEnv(t)
	kept := filepath.Join(e2.home, "dotfiles", "claude.json")
	os.MkdirAll(filepath.Dir(kept), 0o755)
	os.WriteFile(kept, []byte("{\n  \"model\": \"opus\"\n}\n"), 0o640)
	link := filepath.Join(e2.home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(link), 0o700)
	if err := os.Symlink(kept, link); err != nil {
		t.Fatal(err)
	}
	e2.must(t, "agent", "setup", "claude", "--user-wide")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the user's settings are no longer a link: %v", err)
	}
	if got := readFile(t, kept); !strings.HasPrefix(got, "{\n  \"model\": \"opus\",\n  \"permissions\"") || mode(t, kept) != 0o640 {
		t.Errorf("the linked file (%v):\n%s", mode(t, kept), got)
	}
	// --user-wide is for every repo: Claude's takes no REPO.
	if r := e.run("agent", "setup", "claude", "--user-wide", "alpha"); r.status != 2 || !strings.Contains(r.stderr, "--user-wide writes ~/.claude/settings.json, for every repo: it takes no REPO") {
		t.Errorf("--user-wide with a REPO: %+v", r)
	}
}

// homeFiles lists the files under dir (the test's HOME), relative to it.
func homeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// By default the allow rules go into each repo's own settings: every repo
// gita has registered (the bare one aside), or the REPOs named, each once.
// Nothing is written under HOME; the output names each file and says the
// rules are scoped to those repos. Deny rules of the user's settings that
// catch a loop command, the loop's rules a user-wide setup left there, and
// a local settings file git would commit are named on stderr.
func TestAgentSetupClaudeRepos(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha", "beta")
	os.WriteFile(filepath.Join(e.repos["alpha"], ".gitignore"), []byte(".claude/settings.local.json\n"), 0o644)
	user := filepath.Join(e.home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(user), 0o700)
	userSettings := `{"permissions": {"deny": ["Bash(coordination-engine:*)"], "allow": ["Bash(coordination-engine task set:*)"]}}`
	os.WriteFile(user, []byte(userSettings), 0o644)
	before := homeFiles(t, e.home)
	alphaLocal := filepath.Join(e.repos["alpha"], ".claude", "settings.local.json")
	betaLocal := filepath.Join(e.repos["beta"], ".claude", "settings.local.json")

	for _, args := range [][]string{{"agent", "setup", "claude"}, {"agent", "setup", "claude", "alpha", "beta", "alpha"}} {
		os.RemoveAll(filepath.Dir(alphaLocal))
		os.RemoveAll(filepath.Dir(betaLocal))
		r := e.must(t, args...)
		for _, local := range []string{alphaLocal, betaLocal} {
			if !strings.Contains(readFile(t, local), `"Bash(coordination-engine message read:*)"`) || mode(t, local) != 0o600 || mode(t, filepath.Dir(local)) != 0o700 {
				t.Errorf("%v: %s (%v):\n%s", args, local, mode(t, local), readFile(t, local))
			}
		}
		if after := homeFiles(t, e.home); !slices.Equal(after, before) || readFile(t, user) != userSettings {
			t.Errorf("%v wrote under HOME: %q, was %q", args, after, before)
		}
		wantOut := "wrote " + alphaLocal + " (Claude Code's settings for alpha on this machine): added 6 allow rules for coordination-engine's loop commands; 8 hooks"
		if n := strings.Count(r.stdout, "wrote "); n != 2 || !strings.Contains(r.stdout, wantOut) || !strings.Contains(r.stdout, "wrote "+betaLocal+" (") ||
			!strings.HasSuffix(r.stdout, "scope: the loop's commands run without asking only in alpha, beta (each repo's .claude/settings.local.json); nothing under your home directory is written, and other repos still ask\n") {
			t.Errorf("%v: %d files written, want 2 (alpha once):\n%s", args, n, r.stdout)
		}
		for _, s := range []string{
			`tamq: warning: ` + user + `: the deny rule "Bash(coordination-engine:*)" catches`,
			`tamq: warning: ` + user + ` allows 1 of the loop's commands in every repo (Bash(coordination-engine task set:*); from a user-wide tamq agent setup)`,
			`tamq: warning: ` + betaLocal + ` is not ignored by git`,
		} {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, s, r.stderr)
			}
		}
		if strings.Contains(r.stderr, alphaLocal+" is not ignored") {
			t.Errorf("alpha ignores its local settings:\n%s", r.stderr)
		}
	}
	var rec agentSetupRecord
	if r := e.must(t, "--json", "agent", "setup", "claude", "beta"); json.Unmarshal([]byte(r.stdout), &rec) != nil ||
		rec.Scope != "repos" || !slices.Equal(rec.Repos, []string{"beta"}) || len(rec.Files) != 1 || rec.Files[0].Path != betaLocal {
		t.Errorf("--json: %s", r.stdout)
	}
}

// A repo's settings file reached through a symbolic link (the file, or a
// directory on its way) is refused, naming where the link points, and
// nothing is written: not the link's target, not another repo's file, not
// with --dry-run either. (A clone may bring a link along: it once made
// setup write into an unrelated file.)
func TestAgentSetupRefusesLinksInRepos(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		agent string
		link  func(t *testing.T, repo, elsewhere string) (at, target string)
	}{
		{"claude, the settings file", "claude", func(t *testing.T, repo, elsewhere string) (string, string) {
			target := filepath.Join(elsewhere, "unrelated.json")
			os.WriteFile(target, []byte("{\"theme\": \"dark\"}\n"), 0o644)
			os.MkdirAll(filepath.Join(repo, ".claude"), 0o755)
			return filepath.Join(repo, ".claude", "settings.local.json"), target
		}},
		{"claude, the .claude directory", "claude", func(t *testing.T, repo, elsewhere string) (string, string) {
			target := filepath.Join(elsewhere, "dotclaude")
			os.MkdirAll(target, 0o755)
			os.WriteFile(filepath.Join(target, "settings.local.json"), []byte("{}\n"), 0o644)
			return filepath.Join(repo, ".claude"), target
		}},
		{"codex, the rules directory", "codex", func(t *testing.T, repo, elsewhere string) (string, string) {
			target := filepath.Join(elsewhere, "rules")
			os.MkdirAll(target, 0o755)
			os.MkdirAll(filepath.Join(repo, ".codex"), 0o755)
			return filepath.Join(repo, ".codex", "rules"), target
		}},
		{"codex, the rules file, relative", "codex", func(t *testing.T, repo, elsewhere string) (string, string) {
			os.MkdirAll(filepath.Join(repo, ".codex", "rules"), 0o755)
			os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("mine\n"), 0o644)
			return filepath.Join(repo, ".codex", "rules", "tamq.rules"), "../../mine.txt"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSetupEnv(t, "alpha", "beta")
			elsewhere := filepath.Join(e.home, "elsewhere")
			os.MkdirAll(elsewhere, 0o755)
			at, target := tc.link(t, e.repos["beta"], elsewhere)
			if err := os.Symlink(target, at); err != nil {
				t.Fatal(err)
			}
			resolved := target
			if !filepath.IsAbs(resolved) {
				resolved = filepath.Join(filepath.Dir(at), target)
			}
			snapshot := func() map[string]string {
				out := map[string]string{}
				for _, dir := range []string{e.home, e.repos["alpha"], e.repos["beta"]} {
					filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
						if err == nil && !d.IsDir() && !strings.Contains(path, "/.git/") {
							b, _ := os.ReadFile(path)
							out[path] = string(b)
						}
						return nil
					})
				}
				return out
			}
			before := snapshot()
			for _, args := range [][]string{{"agent", "setup", tc.agent, "--dry-run"}, {"agent", "setup", tc.agent}, {"agent", "setup", tc.agent, "beta"}} {
				r := e.run(args...)
				if r.status != 9 || !strings.Contains(r.stderr, "tamq: refusing to write "+e.repos["beta"]+"/.") ||
					!strings.Contains(r.stderr, "is a symbolic link to "+resolved+", and tamq agent setup follows no link inside a repo") || r.stdout != "" {
					t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.status, r.stdout, r.stderr)
				}
			}
			if after := snapshot(); !maps.Equal(after, before) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", before, after)
			}
			if fi, err := os.Lstat(at); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("the link changed: %v", err)
			}
		})
	}
}

// Codex by default: the prefix rules in each repo's .codex/rules (0600 in
// 0700 directories), and in the user's config.toml (its text and mode
// kept) notify, allow_login_shell and trust for the repo by its real path,
// but no rule; --json says what was done and that the rules are scoped;
// the second run changes nothing. An edited rules file is left, with a
// warning. --user-wide writes the rules into Codex's own rules directory.
func TestAgentSetupCodex(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	config := filepath.Join(e.home, ".codex", "config.toml")
	os.MkdirAll(filepath.Dir(config), 0o755)
	mine := "# mine\nmodel = \"gpt-5.5\"\n\n[tui]\ntheme = \"dark\"\n"
	os.WriteFile(config, []byte(mine), 0o644)
	rules := filepath.Join(e.repos["alpha"], ".codex", "rules", "tamq.rules")
	userRules := filepath.Join(e.home, ".codex", "rules", "tamq.rules")

	r := e.must(t, "--json", "agent", "setup", "codex", "alpha")
	var rec agentSetupRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rec.Agent != "codex" || rec.Scope != "repos" || !slices.Equal(rec.Repos, []string{"alpha"}) || len(rec.Files) != 2 ||
		rec.Files[0].Path != rules || rec.Files[0].Action != "wrote" || rec.Files[1].Path != config || rec.Files[1].Action != "wrote" ||
		len(rec.Warnings) != 1 || !strings.HasPrefix(rec.Warnings[0], rules+" is not ignored by git") {
		t.Errorf("record: %s", r.stdout)
	}
	if readFile(t, rules) != string(agentsetup.CodexRulesText()) || mode(t, rules) != 0o600 || mode(t, filepath.Dir(rules)) != 0o700 {
		t.Errorf("rules (%v):\n%s", mode(t, rules), readFile(t, rules))
	}
	if _, err := os.Stat(filepath.Dir(userRules)); err == nil {
		t.Errorf("the default wrote into %s", filepath.Dir(userRules))
	}
	got := readFile(t, config)
	real, _ := filepath.EvalSymlinks(e.repos["alpha"])
	if !strings.HasPrefix(got, "# mine\nmodel = \"gpt-5.5\"\n# tamq agent setup") || !strings.Contains(got, "\n[tui]\ntheme = \"dark\"\n") ||
		!strings.Contains(got, "notify = [\"tamq\", \"hook\"]\n") || !strings.Contains(got, "allow_login_shell = false\n") ||
		!strings.Contains(got, "[projects.\""+real+"\"]\ntrust_level = \"trusted\"\n") || mode(t, config) != 0o644 || strings.Contains(got, "prefix_rule") {
		t.Errorf("config.toml (%v):\n%s", mode(t, config), got)
	}

	again := e.must(t, "agent", "setup", "codex", "alpha")
	if strings.Contains(again.stdout, "wrote") || readFile(t, config) != got || !strings.HasSuffix(again.stdout,
		"scope: the loop's commands run without asking only in alpha (each repo's .codex/rules, which Codex reads only in a repo it trusts); "+
			"~/.codex/config.toml gets what Codex reads from nowhere else (notify, allow_login_shell, the repos' trust) and no rule; other repos still ask\nnothing to change\n") {
		t.Errorf("second run: %s", again.stdout)
	}

	// A rules file someone edited is theirs now: left, with a warning.
	edited := readFile(t, rules) + "prefix_rule(pattern = [\"make\"])\n"
	os.WriteFile(rules, []byte(edited), 0o600)
	r = e.must(t, "agent", "setup", "codex")
	if !strings.Contains(r.stdout, "unchanged "+rules+" (Codex's command rules for alpha): left as it is\n") ||
		!strings.Contains(r.stderr, "tamq: warning: "+rules+" differs from what this tamq writes") || readFile(t, rules) != edited {
		t.Errorf("an edited rules file:\n%s%s", r.stdout, r.stderr)
	}

	// --user-wide: Codex's own rules directory, for every session.
	r = e.must(t, "agent", "setup", "codex", "--user-wide")
	if readFile(t, userRules) != string(agentsetup.CodexRulesText()) || !strings.Contains(r.stdout, "wrote "+userRules+" (Codex's command rules for every repo)") ||
		!strings.Contains(r.stdout, "scope: user-wide (--user-wide): every Codex session on this machine, in any directory, runs the loop's commands without asking and outside its sandbox\n") {
		t.Errorf("--user-wide:\n%s", r.stdout)
	}
	// Once there, the default says so: it allows what the repos' rules
	// were to keep to them.
	r = e.must(t, "agent", "setup", "codex")
	if !strings.Contains(r.stderr, "tamq: warning: "+userRules+" (from a user-wide tamq agent setup) allows the loop's commands in every Codex session on this machine") {
		t.Errorf("a user-wide rules file left:\n%s", r.stderr)
	}
}

// Gemini CLI: the policy file, the hooks and the repos' trust, all in
// ~/.gemini; a second run changes nothing, --dry-run shows the diff and
// writes nothing, the user's settings stay as written, an edited policy
// file is left alone, and a settings file kept elsewhere through a link
// stays a link.
func TestAgentSetupGemini(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha", "beta")
	dir := filepath.Join(e.home, ".gemini")
	policy := filepath.Join(dir, "policies", "tamq.toml")
	settings := filepath.Join(dir, "settings.json")
	trust := filepath.Join(dir, "trustedFolders.json")
	// The user's settings live in a dotfiles folder, linked.
	dotfiles := filepath.Join(t.TempDir(), "gemini-settings.json")
	mine := "{\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n  \"ui\": {\"theme\": \"GitHub\"}\n}\n"
	os.WriteFile(dotfiles, []byte(mine), 0o644)
	os.MkdirAll(dir, 0o700)
	if err := os.Symlink(dotfiles, settings); err != nil {
		t.Fatal(err)
	}

	dry := e.must(t, "agent", "setup", "gemini", "alpha", "--dry-run")
	if _, err := os.Stat(policy); err == nil || readFile(t, dotfiles) != mine || !strings.Contains(dry.stdout, "+++ "+policy+"\n") ||
		!strings.Contains(dry.stdout, "+    \"Notification\": [\n") || !strings.Contains(dry.stdout, "would write "+trust) {
		t.Errorf("--dry-run wrote, or showed no diff:\n%s", dry.stdout)
	}

	r := e.must(t, "--json", "agent", "setup", "gemini", "alpha")
	var rec agentSetupRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rec.Agent != "gemini" || !slices.Equal(rec.Repos, []string{"alpha"}) || len(rec.Files) != 3 || rec.Files[0].Path != policy ||
		rec.Files[1].Path != settings || rec.Files[2].Path != trust || len(rec.Warnings) != 0 {
		t.Errorf("record: %s", r.stdout)
	}
	for _, f := range rec.Files {
		if f.Action != "wrote" {
			t.Errorf("%s: %s", f.Path, f.Action)
		}
	}
	if readFile(t, policy) != string(agentsetup.GeminiPolicyText()) || mode(t, policy) != 0o600 {
		t.Errorf("policy (%v):\n%s", mode(t, policy), readFile(t, policy))
	}
	if fi, err := os.Lstat(settings); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("settings.json is no longer a link: %v", err)
	}
	got := readFile(t, dotfiles)
	if !strings.HasPrefix(got, "{\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n  \"ui\": {\"theme\": \"GitHub\"},\n  \"hooks\": {") ||
		strings.Count(got, "\"command\": \"tamq hook\"") != len(agentsetup.GeminiHookEvents) || mode(t, dotfiles) != 0o644 {
		t.Errorf("settings.json (%v):\n%s", mode(t, dotfiles), got)
	}
	real, _ := filepath.EvalSymlinks(e.repos["alpha"])
	if tr := readFile(t, trust); tr != "{\n  \""+real+"\": \"TRUST_FOLDER\"\n}\n" {
		t.Errorf("trustedFolders.json:\n%s", tr)
	}

	again := e.must(t, "agent", "setup", "gemini", "alpha")
	if strings.Contains(again.stdout, "wrote") || readFile(t, dotfiles) != got || !strings.HasSuffix(again.stdout,
		"scope: Gemini CLI 0.61 reads no repo's policies, so the rule in ~/.gemini/policies/tamq.toml lets every Gemini CLI session on this machine run the loop's commands (only those) without asking; "+
			"trust for alpha in ~/.gemini/trustedFolders.json\nnothing to change\n") {
		t.Errorf("second run: %s", again.stdout)
	}

	// A policy file someone edited is theirs now: left, with a warning; a
	// policy of the user's naming coordination-engine is warned about.
	edited := readFile(t, policy) + "\n[[rule]]\ntoolName = \"read_file\"\ndecision = \"allow\"\npriority = 1\n"
	os.WriteFile(policy, []byte(edited), 0o600)
	os.WriteFile(filepath.Join(dir, "policies", "mine.toml"), []byte("[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"coordination-engine\"\ndecision = \"deny\"\npriority = 500\n"), 0o600)
	r = e.must(t, "agent", "setup", "gemini")
	if !strings.Contains(r.stdout, "unchanged "+policy+" (Gemini CLI's policy for every session): left as it is\n") || readFile(t, policy) != edited ||
		!strings.Contains(r.stderr, "tamq: warning: "+policy+" differs from what this tamq writes") ||
		!strings.Contains(r.stderr, "tamq: warning: "+filepath.Join(dir, "policies", "mine.toml")+" also names coordination-engine") ||
		!strings.Contains(r.stdout, "added trust for ") {
		t.Errorf("an edited policy, beta's trust:\n%s%s", r.stdout, r.stderr)
	}
}

// Bad input is refused with the documented exit status, a message on
// stderr, and nothing written anywhere.
func TestAgentSetupRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	nothingWritten := func(t *testing.T) {
		t.Helper()
		for _, dir := range []string{filepath.Join(e.home, ".claude"), filepath.Join(e.home, ".codex", "rules"), filepath.Join(e.home, ".gemini"), filepath.Join(e.repos["alpha"], ".claude"), filepath.Join(e.repos["alpha"], ".codex")} {
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%s was created", dir)
			}
		}
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"agent", "setup", "aider"}, 2, "tamq: tamq agent setup has no settings to write for aider: it knows claude, codex and gemini\n" +
			"tamq: hint: tamq has no screen rules or hooks for aider: its broker cannot see when aider takes a wake"},
		{[]string{"agent", "setup"}, 2, "name the agent to set up, one of claude, codex, gemini"},
		{[]string{"agent", "bogus"}, 2, `unknown command "bogus" for "tamq agent"`},
		{[]string{"agent", "setup", "claude", "alhpa"}, 5, "unknown target 'alhpa': not in the gita registry (see `gita ls`); did you mean 'alpha'?"},
		{[]string{"agent", "setup", "codex", "alpha", "nope"}, 5, "unknown target 'nope'"},
		{[]string{"agent", "setup", "claude", "--user-wide", "alpha"}, 2, "it takes no REPO"},
	} {
		r := e.run(tc.args...)
		if r.status != tc.status || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("tamq %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), r.status, tc.status, tc.stderr, r.stdout, r.stderr)
		}
	}
	nothingWritten(t)

	// No repo registered: nothing to set up but with --user-wide.
	if r := newSetupEnv(t).run("agent", "setup", "claude"); r.status != 2 || !strings.Contains(r.stderr, "tamq: no repo to set up: gita has none registered") ||
		!strings.Contains(r.stderr, "--user-wide writes the agent's user settings instead") {
		t.Errorf("an empty registry: %+v", r)
	}

	// An invalid config.toml stops Codex's setup before the rules file is
	// written; an invalid settings.json is left as it was.
	config := filepath.Join(e.home, ".codex", "config.toml")
	os.MkdirAll(filepath.Dir(config), 0o700)
	os.WriteFile(config, []byte("notify = [\"a\"\n"), 0o600)
	r := e.run("agent", "setup", "codex")
	if r.status != 3 || !strings.Contains(r.stderr, "tamq: "+config+" is not valid TOML: line ") || !strings.Contains(r.stderr, "nothing was written") {
		t.Errorf("invalid config.toml: exit %d\n%s", r.status, r.stderr)
	}
	if readFile(t, config) != "notify = [\"a\"\n" {
		t.Error("the invalid config.toml changed")
	}
	local := filepath.Join(e.repos["alpha"], ".claude", "settings.local.json")
	os.MkdirAll(filepath.Dir(local), 0o755)
	os.WriteFile(local, []byte("{\"permissions\": }"), 0o600)
	r = e.run("agent", "setup", "claude", "alpha", "--dry-run")
	if r.status != 3 || !strings.Contains(r.stderr, local+" is not valid JSON: line 1, column 17") || r.stdout != "" {
		t.Errorf("invalid settings.local.json: exit %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	os.Remove(local)
	os.Remove(filepath.Dir(local))
	os.Remove(config)
	nothingWritten(t)
}

// tamq and coordination-engine off the PATH: said on stderr, and the
// files are written all the same.
func TestAgentSetupWarnsOfThePath(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t)
	e.vars["PATH"] = "/nonexistent"
	r := e.must(t, "agent", "setup", "codex", "--user-wide")
	for _, s := range []string{"tamq: warning: tamq is not on your PATH", "tamq: warning: coordination-engine is not on your PATH"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if q := e.run("-q", "agent", "setup", "codex", "--user-wide"); q.status != 0 || q.stdout != "" || q.stderr != "" {
		t.Errorf("--quiet: %+v", q)
	}
}

// Issue 40: after `tamq agent setup claude --user-wide`, setting up a repo
// wrote the same eight hooks into its settings again, and Claude Code runs
// the hooks of both files: each hook ran twice. The repo's file now gets
// none of them, and the output says why.
func TestAgentSetupClaudeRepoAfterUserWide(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	e.must(t, "agent", "setup", "claude", "--user-wide")
	user := filepath.Join(e.home, ".claude", "settings.json")
	local := filepath.Join(e.repos["alpha"], ".claude", "settings.local.json")
	r := e.must(t, "agent", "setup", "claude", "alpha")
	if got := readFile(t, local); strings.Contains(got, "tamq hook") {
		t.Errorf("the repo's settings run tamq hook again:\n%s", got)
	}
	want := "; left out 8 hooks running `tamq hook` that " + user + " has already (PermissionRequest, Notification, UserPromptSubmit, SessionStart, PostToolUse, PostToolUseFailure, Stop, SubagentStop): Claude Code runs the hooks of both files, so they would run twice\n"
	if !strings.Contains(r.stdout, "wrote "+local+" (") || !strings.Contains(r.stdout, want) {
		t.Errorf("the output does not say the hooks were left out:\n%s", r.stdout)
	}
	// Run again: nothing to change, and it still says why.
	if again := e.must(t, "agent", "setup", "claude", "alpha"); !strings.Contains(again.stdout, "unchanged "+local+" (") ||
		!strings.Contains(again.stdout, want) || !strings.HasSuffix(again.stdout, "nothing to change\n") {
		t.Errorf("second run:\n%s", again.stdout)
	}
}
