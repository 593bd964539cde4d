package cli

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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

// Claude Code, the user's settings: --dry-run shows the diff and writes
// nothing; the run writes the file (0600 in a 0700 directory) and says so
// in one line; the next run changes nothing and says so.
func TestAgentSetupClaude(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t)
	settings := filepath.Join(e.home, ".claude", "settings.json")
	want, err := agentsetup.Claude(settings, nil)
	if err != nil {
		t.Fatal(err)
	}

	dry := e.must(t, "agent", "setup", "claude", "--dry-run")
	for _, s := range []string{"--- /dev/null\n", "+++ " + settings + "\n", `+      "Bash(coordination-engine lease release:*)",`, "would write " + settings + " (Claude Code's settings for every repo): added 6 allow rules"} {
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

	r := e.must(t, "agent", "setup", "claude")
	if got := readFile(t, settings); got != string(want.Content) {
		t.Errorf("settings.json:\n%s", got)
	}
	if m := mode(t, settings); m != 0o600 {
		t.Errorf("settings.json is %v", m)
	}
	if m := mode(t, filepath.Dir(settings)); m != 0o700 {
		t.Errorf("~/.claude is %v", m)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "wrote "+settings+" (") {
		t.Errorf("output: %q", r.stdout)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(e.home, ".claude", ".*tamq-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	again := e.must(t, "agent", "setup", "claude")
	if !strings.Contains(again.stdout, "unchanged "+settings) || !strings.HasSuffix(again.stdout, "nothing to change\n") {
		t.Errorf("second run: %q", again.stdout)
	}
	if got := readFile(t, settings); got != string(want.Content) {
		t.Errorf("the second run changed settings.json:\n%s", got)
	}
	if d := e.must(t, "agent", "setup", "claude", "--dry-run"); d.stdout != again.stdout {
		t.Errorf("--dry-run with nothing to change: %q", d.stdout)
	}
}

// With repos, each repo's local settings are written, the user's are not;
// a deny rule in the user's settings that catches a loop command is named
// on stderr, as is a local settings file git would commit. A user's file
// that is a symbolic link stays one.
func TestAgentSetupClaudeRepos(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha", "beta")
	os.WriteFile(filepath.Join(e.repos["alpha"], ".gitignore"), []byte(".claude/settings.local.json\n"), 0o644)
	user := filepath.Join(e.home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(user), 0o700)
	os.WriteFile(user, []byte(`{"permissions": {"deny": ["Bash(coordination-engine:*)"]}}`), 0o644)
	// beta's local settings are a link to a file kept elsewhere.
	kept := filepath.Join(e.home, "dotfiles", "beta.json")
	os.MkdirAll(filepath.Dir(kept), 0o755)
	os.WriteFile(kept, []byte("{\n  \"model\": \"opus\"\n}\n"), 0o640)
	betaLocal := filepath.Join(e.repos["beta"], ".claude", "settings.local.json")
	os.MkdirAll(filepath.Dir(betaLocal), 0o755)
	if err := os.Symlink(kept, betaLocal); err != nil {
		t.Fatal(err)
	}

	r := e.must(t, "agent", "setup", "claude", "alpha", "beta", "alpha")
	alphaLocal := filepath.Join(e.repos["alpha"], ".claude", "settings.local.json")
	if !strings.Contains(readFile(t, alphaLocal), `"Bash(coordination-engine message read:*)"`) || mode(t, alphaLocal) != 0o600 {
		t.Errorf("alpha's local settings (%v):\n%s", mode(t, alphaLocal), readFile(t, alphaLocal))
	}
	if fi, err := os.Lstat(betaLocal); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("beta's local settings are no longer a link: %v", err)
	}
	if got := readFile(t, kept); !strings.HasPrefix(got, "{\n  \"model\": \"opus\",\n  \"permissions\"") || mode(t, kept) != 0o640 {
		t.Errorf("the linked file (%v):\n%s", mode(t, kept), got)
	}
	if got := readFile(t, user); got != `{"permissions": {"deny": ["Bash(coordination-engine:*)"]}}` {
		t.Errorf("the user's settings changed: %s", got)
	}
	if n := strings.Count(r.stdout, "wrote "); n != 2 {
		t.Errorf("%d files written, want 2 (alpha once):\n%s", n, r.stdout)
	}
	for _, s := range []string{
		`tamq: warning: ` + user + `: the deny rule "Bash(coordination-engine:*)" catches`,
		`tamq: warning: ` + betaLocal + ` is not ignored by git`,
	} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if strings.Contains(r.stderr, alphaLocal+" is not ignored") {
		t.Errorf("alpha ignores its local settings:\n%s", r.stderr)
	}
}

// Codex: the rules file and config.toml. The user's config keeps its
// text and its mode; the repo is trusted by its real path; --json says
// what was done; the second run changes nothing.
func TestAgentSetupCodex(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	config := filepath.Join(e.home, ".codex", "config.toml")
	os.MkdirAll(filepath.Dir(config), 0o755)
	mine := "# mine\nmodel = \"gpt-5.5\"\n\n[tui]\ntheme = \"dark\"\n"
	os.WriteFile(config, []byte(mine), 0o644)
	rules := filepath.Join(e.home, ".codex", "rules", "tamq.rules")

	r := e.must(t, "--json", "agent", "setup", "codex", "alpha")
	var rec agentSetupRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rec.Agent != "codex" || len(rec.Files) != 2 || rec.Files[0].Path != rules || rec.Files[0].Action != "wrote" ||
		rec.Files[1].Path != config || rec.Files[1].Action != "wrote" || len(rec.Warnings) != 0 {
		t.Errorf("record: %s", r.stdout)
	}
	if readFile(t, rules) != string(agentsetup.CodexRulesText()) || mode(t, rules) != 0o600 || mode(t, filepath.Dir(rules)) != 0o700 {
		t.Errorf("rules (%v):\n%s", mode(t, rules), readFile(t, rules))
	}
	got := readFile(t, config)
	real, _ := filepath.EvalSymlinks(e.repos["alpha"])
	if !strings.HasPrefix(got, "# mine\nmodel = \"gpt-5.5\"\n# tamq agent setup") || !strings.Contains(got, "\n[tui]\ntheme = \"dark\"\n") ||
		!strings.Contains(got, "notify = [\"tamq\", \"hook\"]\n") || !strings.Contains(got, "allow_login_shell = false\n") ||
		!strings.Contains(got, "[projects.\""+real+"\"]\ntrust_level = \"trusted\"\n") || mode(t, config) != 0o644 {
		t.Errorf("config.toml (%v):\n%s", mode(t, config), got)
	}

	again := e.must(t, "agent", "setup", "codex", "alpha")
	if strings.Contains(again.stdout, "wrote") || !strings.HasSuffix(again.stdout, "nothing to change\n") || readFile(t, config) != got {
		t.Errorf("second run: %s", again.stdout)
	}

	// A rules file someone edited is theirs now: left, with a warning.
	edited := readFile(t, rules) + "prefix_rule(pattern = [\"make\"])\n"
	os.WriteFile(rules, []byte(edited), 0o600)
	r = e.must(t, "agent", "setup", "codex")
	if !strings.Contains(r.stdout, "unchanged "+rules+" (Codex's command rules): left as it is\n") ||
		!strings.Contains(r.stderr, "tamq: warning: "+rules+" differs from what this tamq writes") || readFile(t, rules) != edited {
		t.Errorf("an edited rules file:\n%s%s", r.stdout, r.stderr)
	}
}

// Bad input is refused with the documented exit status, a message on
// stderr, and nothing written anywhere.
func TestAgentSetupRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newSetupEnv(t, "alpha")
	nothingWritten := func(t *testing.T) {
		t.Helper()
		for _, dir := range []string{filepath.Join(e.home, ".claude"), filepath.Join(e.home, ".codex", "rules"), filepath.Join(e.repos["alpha"], ".claude")} {
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
		{[]string{"agent", "setup", "gemini"}, 2, `tamq: unknown agent "gemini": tamq agent setup takes claude or codex`},
		{[]string{"agent", "setup"}, 2, "requires at least 1 arg"},
		{[]string{"agent", "bogus"}, 2, `unknown command "bogus" for "tamq agent"`},
		{[]string{"agent", "setup", "claude", "alhpa"}, 5, "unknown target 'alhpa': not in the gita registry (see `gita ls`); did you mean 'alpha'?"},
		{[]string{"agent", "setup", "codex", "alpha", "nope"}, 5, "unknown target 'nope'"},
	} {
		r := e.run(tc.args...)
		if r.status != tc.status || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("tamq %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), r.status, tc.status, tc.stderr, r.stdout, r.stderr)
		}
	}
	nothingWritten(t)

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
	r := e.must(t, "agent", "setup", "codex")
	for _, s := range []string{"tamq: warning: tamq is not on your PATH", "tamq: warning: coordination-engine is not on your PATH"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if q := e.run("-q", "agent", "setup", "codex"); q.status != 0 || q.stdout != "" || q.stderr != "" {
		t.Errorf("--quiet: %+v", q)
	}
}
