package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/tamq/agentsetup"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The agents tamq agent setup knows.
var setupAgents = []string{"claude", "codex"}

// settingsFile is one file tamq agent setup reads and may write.
type settingsFile struct {
	Path   string `json:"path"`
	What   string `json:"what"` // what the file is, for people
	Action string `json:"action"`
	// Added is what was (or would be) added; Present what the file
	// already had of what the loop needs.
	Added   []string `json:"added"`
	Present []string `json:"present"`
	Diff    string   `json:"diff,omitempty"` // --dry-run

	target  string // where the bytes go: Path with symbolic links resolved
	old     []byte
	exists  bool
	mode    fs.FileMode
	content []byte
	changed bool
}

type agentSetupRecord struct {
	Agent    string          `json:"agent"`
	DryRun   bool            `json:"dry_run"`
	Files    []*settingsFile `json:"files"`
	Warnings []string        `json:"warnings"`
}

func newAgentSetupCmd(a *app.App) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "setup claude|codex [REPO...]",
		Short: "Write what the wake loop needs into an agent's own settings",
		Long: `Write into the agent's own settings files what coordination-engine's wake loop
needs, and nothing more: the agent runs the loop's commands (coordination-engine
checkpoint, task set, lease release|ack|renew, message show|read) without a
permission dialog, while every other command still asks, and the agent's hooks
tell tamq's broker about dialogs and turns ('tamq hook').

claude: permission rules and hooks in ~/.claude/settings.json, or with REPOs in
  each repo's .claude/settings.local.json (this machine's, not committed).
codex: prefix rules in ~/.codex/rules/tamq.rules; in ~/.codex/config.toml
  notify running 'tamq hook', allow_login_shell = false (commands keep the
  window's PATH, where tamq and coordination-engine are), and with REPOs
  trust for each repo.

What is there is kept as written: only what is missing is added, and a setting
of yours that stands in the loop's way (a deny rule, your own notify) is left
as it is, with a warning on stderr. Running it again changes nothing. Each file
is replaced at once (a temporary file renamed), keeping its mode; new files
are 0600. A settings file that is not valid JSON or TOML stops it before
anything is written. --dry-run prints the diff of every file it would change.
What each entry is for: docs/agent-setup.md.`,
		Example: `  tamq agent setup claude --dry-run
  tamq agent setup codex net-kingdom railiance-platform`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return setupAgents, cobra.ShellCompDirectiveNoFileComp
			}
			return app.CompleteRepos(a)(cmd, args[1:], toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgentSetup(cmd.Context(), a, args[0], args[1:], dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print a diff of every file it would change, and change nothing")
	return cmd
}

func runAgentSetup(ctx context.Context, a *app.App, agent string, slugs []string, dryRun bool) error {
	if !slices.Contains(setupAgents, agent) {
		return app.UsageError("unknown agent %q: tamq agent setup takes claude or codex", agent)
	}
	repos, err := setupRepos(a, slugs)
	if err != nil {
		return err
	}
	home := a.Getenv("HOME")
	if !filepath.IsAbs(home) {
		return errs.New(errs.ConfigInvalid, "cannot find your home directory: HOME is not set to an absolute path").
			WithHint("set HOME; the agents keep their settings under it")
	}
	rec := agentSetupRecord{Agent: agent, DryRun: dryRun, Files: []*settingsFile{}, Warnings: []string{}}
	// Everything is read and worked out first: a file that cannot be read
	// or is not valid stops it before anything is written.
	if agent == "claude" {
		err = planClaude(ctx, a, home, repos, &rec)
	} else {
		err = planCodex(a, home, repos, &rec)
	}
	if err != nil {
		return err
	}
	rec.Warnings = append(rec.Warnings, pathWarnings(a)...)

	changed := 0
	for i, f := range rec.Files {
		if !f.changed {
			f.Action = "unchanged"
			continue
		}
		changed++
		if dryRun {
			f.Action, f.Diff = "would write", agentsetup.Diff(f.Path, f.old, f.content, f.exists)
			continue
		}
		if err := writeSettings(f); err != nil {
			// A file that cannot be written stops the rest; those written
			// before it are said.
			for _, done := range rec.Files[:i] {
				if done.Action == "wrote" {
					a.Notef("wrote %s before the error", done.Path)
				}
			}
			return err
		}
		f.Action = "wrote"
	}
	if a.JSON {
		return a.PrintJSON(rec)
	}
	for _, w := range rec.Warnings {
		a.Notef("warning: %s", w)
	}
	if a.Quiet {
		return nil
	}
	for _, f := range rec.Files {
		// Line by line: a line that needs escaping (a CR) is escaped alone.
		for _, line := range strings.SplitAfter(f.Diff, "\n") {
			if line != "" {
				a.Printf("%s", line)
			}
		}
	}
	for _, f := range rec.Files {
		if f.changed {
			a.Printf("%s %s (%s): added %s\n", f.Action, textsafe.Escape(f.Path), f.What, strings.Join(f.Added, "; "))
		} else {
			why := "left as it is"
			if len(f.Present) > 0 {
				why = "has " + strings.Join(f.Present, ", ")
			}
			a.Printf("unchanged %s (%s): %s\n", textsafe.Escape(f.Path), f.What, why)
		}
	}
	if changed == 0 {
		a.Printf("nothing to change\n")
	}
	return nil
}

// setupRepos resolves the REPO arguments in gita's registry, each once.
func setupRepos(a *app.App, slugs []string) ([]gita.Repo, error) {
	if len(slugs) == 0 {
		return nil, nil
	}
	reg, err := a.Registry()
	if err != nil {
		return nil, err
	}
	var repos []gita.Repo
	for _, slug := range slugs {
		r, err := reg.Resolve(slug)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(repos, func(o gita.Repo) bool { return o.Path == r.Path }) {
			repos = append(repos, r)
		}
	}
	return repos, nil
}

// claudeManagedSettings is where Claude Code reads an administrator's
// settings on Linux.
const claudeManagedSettings = "/etc/claude-code/managed-settings.json"

// planClaude works out Claude Code's settings: the user's, or each repo's
// local settings.
func planClaude(ctx context.Context, a *app.App, home string, repos []gita.Repo, rec *agentSetupRecord) error {
	dir := a.Getenv("CLAUDE_CONFIG_DIR")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(home, ".claude")
	}
	user := filepath.Join(dir, "settings.json")
	// Managed settings (an administrator's) win over every other file.
	if b, err := os.ReadFile(claudeManagedSettings); err == nil {
		rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(claudeManagedSettings, b)...)
	}
	if len(repos) == 0 {
		return rec.planClaudeFile(user, "Claude Code's settings for every repo")
	}
	// Rules of the user's settings and of the repo's shared settings apply
	// along with the local ones: their deny and ask rules are reported too.
	userOld, _ := os.ReadFile(user)
	rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(user, userOld)...)
	for _, r := range repos {
		local := filepath.Join(r.Path, ".claude", "settings.local.json")
		if err := rec.planClaudeFile(local, "Claude Code's settings for "+textsafe.Escape(r.Name)+" on this machine"); err != nil {
			return err
		}
		shared := filepath.Join(r.Path, ".claude", "settings.json")
		if b, err := os.ReadFile(shared); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(shared, b)...)
		}
		if !gitIgnores(ctx, r.Path, filepath.Join(".claude", "settings.local.json")) {
			rec.Warnings = append(rec.Warnings, local+" is not ignored by git: add .claude/settings.local.json to the repo's .gitignore (or your global excludes) so this machine's settings are not committed")
		}
	}
	return nil
}

// planClaudeFile plans the settings file at path (what says whose, for
// people): what it holds, what it will hold, and what to warn about.
func (rec *agentSetupRecord) planClaudeFile(path, what string) error {
	f, err := readSettings(path, what)
	if err != nil {
		return err
	}
	res, err := agentsetup.Claude(path, f.old)
	if err != nil {
		return err
	}
	f.take(res)
	rec.Files = append(rec.Files, f)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	return nil
}

// planCodex works out Codex's rules file and config.toml.
func planCodex(a *app.App, home string, repos []gita.Repo, rec *agentSetupRecord) error {
	dir := a.Getenv("CODEX_HOME")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(home, ".codex")
	}
	rulesDir := filepath.Join(dir, "rules")
	rules, err := readSettings(filepath.Join(rulesDir, agentsetup.CodexRulesName), "Codex's command rules")
	if err != nil {
		return err
	}
	res := agentsetup.CodexRules(rules.Path, rules.old, rules.exists)
	rules.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	others, _ := filepath.Glob(filepath.Join(rulesDir, "*.rules"))
	sort.Strings(others)
	for _, other := range others {
		if filepath.Base(other) == agentsetup.CodexRulesName {
			continue
		}
		if b, err := os.ReadFile(other); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.CodexRulesConflicts(other, b)...)
		}
	}

	config, err := readSettings(filepath.Join(dir, "config.toml"), "Codex's settings")
	if err != nil {
		return err
	}
	var in agentsetup.CodexInput
	for _, r := range repos {
		// Codex knows a repo by its working directory as the kernel
		// reports it: with symbolic links resolved.
		p := r.Path
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		in.Projects = append(in.Projects, p)
	}
	res, err = agentsetup.CodexConfig(config.Path, config.old, in)
	if err != nil {
		return err
	}
	config.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, rules, config)
	return nil
}

// readSettings reads a settings file, following a symbolic link (a dotfile
// kept in a repo of its own stays a link after the write).
func readSettings(path, what string) (*settingsFile, error) {
	f := &settingsFile{Path: path, What: what, target: path, mode: 0o600, Added: []string{}, Present: []string{}}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, errs.Wrap(errs.Storage, err, "cannot follow %s", path)
		}
		f.target = target
	}
	fi, err := os.Stat(f.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, errs.Wrap(errs.Storage, err, "cannot read %s", path)
	case !fi.Mode().IsRegular():
		return nil, errs.New(errs.ConfigInvalid, "%s is not a regular file", path)
	}
	b, err := os.ReadFile(f.target)
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot read %s", path)
	}
	f.old, f.exists, f.mode = b, true, fi.Mode().Perm()
	return f, nil
}

func (f *settingsFile) take(res agentsetup.Result) {
	f.content, f.changed = res.Content, res.Changed
	f.Added = append(f.Added, res.Added...)
	f.Present = append(f.Present, res.Present...)
}

// writeSettings replaces the file at once: a temporary file beside it,
// with the file's mode (0600 for a new one), synced, then renamed over it.
// Directories it creates are 0700. A file that changed since it was read
// (the agent saving its settings meanwhile) is not overwritten.
func writeSettings(f *settingsFile) error {
	dir := filepath.Dir(f.target)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot create %s", dir)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.target)+".tamq-*")
	if err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(f.content); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	if err := tmp.Chmod(f.mode); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	if err := tmp.Sync(); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	if err := tmp.Close(); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	now, err := os.ReadFile(f.target)
	if (err == nil) != f.exists || err == nil && !bytes.Equal(now, f.old) {
		return errs.New(errs.Conflict, "%s changed while tamq agent setup was working on it; it was left as it is", f.Path).
			WithHint("run tamq agent setup again")
	}
	if err := os.Rename(tmp.Name(), f.target); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// gitIgnores reports whether git ignores file in the repo at dir; true
// when git cannot say (not installed, not a repository).
func gitIgnores(ctx context.Context, dir, file string) bool {
	err := exec.CommandContext(ctx, "git", "-C", dir, "check-ignore", "-q", file).Run()
	var exit *exec.ExitError
	return !(errors.As(err, &exit) && exit.ExitCode() == 1)
}

// pathWarnings says whether the programs the agents run are on this
// shell's PATH, which the windows tamq opens from it get: the hooks run
// `tamq hook`, the wake prompts `coordination-engine`.
func pathWarnings(a *app.App) []string {
	self := ""
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		self = filepath.Dir(exe)
	}
	var out []string
	for _, name := range []string{"tamq", agentsetup.Program} {
		if found := lookPath(a.Getenv("PATH"), name); found != "" {
			continue
		}
		msg := name + " is not on your PATH: the agents run it by name (" + map[string]string{"tamq": "their hooks run `tamq hook`", agentsetup.Program: "the wake prompts' commands"}[name] + ")"
		if self != "" && lookPath(self, name) != "" {
			msg += "; it is in " + self + ": put that directory on the PATH your tamq windows start with"
		} else {
			msg += "; install it (make install) where the PATH your tamq windows start with finds it"
		}
		out = append(out, msg)
	}
	return out
}

// lookPath finds an executable file named name in the directories of
// path (a PATH value), as exec.LookPath does with the process's own.
func lookPath(path, name string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
