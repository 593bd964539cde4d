package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/tamq/agentsetup"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The agents tamq agent setup knows.
var setupAgents = []string{"claude", "codex", "gemini"}

// settingsFile is one file tamq agent setup reads and may write.
type settingsFile struct {
	Path   string `json:"path"`
	What   string `json:"what"` // what the file is, for people
	Action string `json:"action"`
	// Added is what was (or would be) added; Present what the file
	// already had of what the loop needs.
	Added   []string `json:"added"`
	Present []string `json:"present"`
	// LeftOut is what the file did not get because another file the
	// agent reads has it already (Claude's hooks in the user's settings).
	LeftOut []string `json:"left_out,omitempty"`
	Diff    string   `json:"diff,omitempty"` // --dry-run

	target string // where the bytes go: Path with symbolic links resolved
	// repo and rel, for a file inside a repo: its root and the path's
	// elements below it, each opened without following a link.
	repo    string
	rel     []string
	old     []byte
	exists  bool
	mode    fs.FileMode
	content []byte
	changed bool
}

type agentSetupRecord struct {
	Agent  string `json:"agent"`
	DryRun bool   `json:"dry_run"`
	// Scope is where the loop's allow rules apply: "repos" (each repo's
	// own files, the default) or "user-wide" (--user-wide).
	Scope string `json:"scope"`
	// Repos are the repos set up (by gita name).
	Repos    []string        `json:"repos"`
	Files    []*settingsFile `json:"files"`
	Warnings []string        `json:"warnings"`
}

// The scopes of agentSetupRecord.
const (
	scopeRepos    = "repos"
	scopeUserWide = "user-wide"
)

func newAgentSetupCmd(a *app.App) *cobra.Command {
	var dryRun, userWide bool
	cmd := &cobra.Command{
		Use:   "setup claude|codex|gemini [--user-wide] [REPO...]",
		Short: "Write what the wake loop needs into an agent's own settings",
		Long: `Write into the agent's own settings files what coordination-engine's wake loop
needs, and nothing more: the agent runs the loop's commands (coordination-engine
checkpoint, task set, lease release, message show|read, task show) without a
permission dialog, while every other command still asks, and the agent's hooks
tell tamq's broker about dialogs and turns ('tamq hook').

The allow rules are scoped to the repos: each REPO's own settings, or, without
REPOs, each repo gita has registered. Other repos, and the agent's sessions
outside them, still ask. --user-wide writes them into the agent's user settings
instead, where every session on this machine reads them.

claude: permission rules and hooks in each repo's .claude/settings.local.json
  (this machine's, not committed); nothing under your home directory.
  --user-wide: in ~/.claude/settings.json (takes no REPO).
codex: prefix rules in each repo's .codex/rules/tamq.rules, which Codex reads
  only in that repo and only once the repo is trusted; in ~/.codex/config.toml,
  which Codex reads them from and only from there, notify running 'tamq hook',
  allow_login_shell = false (commands keep the window's PATH, where tamq and
  coordination-engine are) and trust for each repo. No rule goes there.
  --user-wide: the prefix rules in ~/.codex/rules/tamq.rules, for every session,
  and trust for the REPOs named.
gemini: a policy rule in ~/.gemini/policies/tamq.toml (Gemini CLI 0.61 reads no
  repo's policies, so it holds for every session on this machine, and allows
  only the loop's commands), hooks running 'tamq hook' in ~/.gemini/settings.json
  and trust for each repo in ~/.gemini/trustedFolders.json. --user-wide: the
  same, with trust for the REPOs named only.

Any other agent: tamq has no rules for its screen, so it says what the agent
must do itself (run the lease's ack and renew commands the wake prompt
carries) and exits non-zero.

What is there is kept as written: only what is missing is added, and a setting
of yours that stands in the loop's way (a deny rule, your own notify) is left
as it is, with a warning on stderr. Running it again changes nothing. Each file
is replaced at once (a temporary file renamed), keeping its mode; new files
are 0600. A settings file that is not valid JSON or TOML, or a symbolic link
inside a repo (the file, or a directory on its way), stops it before anything
is written. --dry-run prints the diff of every file it would change.
What each entry is for: docs/agent-setup.md.`,
		Example: `  tamq agent setup claude --dry-run
  tamq agent setup codex net-kingdom railiance-platform
  tamq agent setup gemini --dry-run
  tamq agent setup claude --user-wide`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				// Say which agents there are, not cobra's "requires at least 1 arg(s)".
				return errs.New(errs.Usage, "name the agent to set up, one of %s: %s", strings.Join(setupAgents, ", "), cmd.Parent().CommandPath()+" "+cmd.Use).
					WithHint("for example 'tamq agent setup claude --dry-run'; run 'tamq agent setup --help' for what each writes")
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return setupAgents, cobra.ShellCompDirectiveNoFileComp
			}
			return app.CompleteRepos(a)(cmd, args[1:], toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgentSetup(cmd.Context(), a, args[0], args[1:], dryRun, userWide)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print a diff of every file it would change, and change nothing")
	cmd.Flags().BoolVar(&userWide, "user-wide", false, "write the allow rules into the agent's user settings, for every repo and session (default: each repo's own)")
	return cmd
}

func runAgentSetup(ctx context.Context, a *app.App, agent string, slugs []string, dryRun, userWide bool) error {
	if !slices.Contains(setupAgents, agent) {
		return errs.New(errs.Usage, "tamq agent setup has no settings to write for %s: it knows claude, codex and gemini", textsafe.Escape(agent)).
			WithHint("%s", agentsetup.Unreadable(textsafe.Escape(agent)))
	}
	if userWide && agent == "claude" && len(slugs) > 0 {
		return app.UsageError("--user-wide writes ~/.claude/settings.json, for every repo: it takes no REPO (without --user-wide, REPOs get their own settings)")
	}
	repos, err := setupRepos(a, slugs, !userWide)
	if err != nil {
		return err
	}
	home := a.Getenv("HOME")
	if !filepath.IsAbs(home) {
		return errs.New(errs.ConfigInvalid, "cannot find your home directory: HOME is not set to an absolute path").
			WithHint("set HOME; the agents keep their settings under it")
	}
	rec := agentSetupRecord{Agent: agent, DryRun: dryRun, Scope: scopeRepos, Repos: []string{}, Files: []*settingsFile{}, Warnings: []string{}}
	if userWide {
		rec.Scope = scopeUserWide
	}
	for _, r := range repos {
		rec.Repos = append(rec.Repos, r.Name)
	}
	// Everything is read and worked out first: a file that cannot be read,
	// is not valid, or is reached through a link inside a repo stops it
	// before anything is written.
	switch agent {
	case "claude":
		err = planClaude(ctx, a, home, repos, userWide, &rec)
	case "codex":
		err = planCodex(ctx, a, home, repos, userWide, &rec)
	default:
		err = planGemini(a, home, repos, &rec)
	}
	if err != nil {
		return err
	}
	rec.Warnings = append(rec.Warnings, pathWarnings(a)...)
	changed, err := writePlanned(a, &rec, dryRun)
	if err != nil {
		return err
	}
	if a.JSON {
		return a.PrintJSON(rec)
	}
	printAgentSetup(a, &rec, changed)
	return nil
}

// writePlanned writes the files the plan changed (or, with dryRun, their
// diffs) and says how many there were. A file that cannot be written stops
// the rest; those written before it are said.
func writePlanned(a *app.App, rec *agentSetupRecord, dryRun bool) (changed int, err error) {
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
		if err := f.write(); err != nil {
			for _, done := range rec.Files[:i] {
				if done.Action == "wrote" {
					a.Notef("wrote %s before the error", done.Path)
				}
			}
			return changed, err
		}
		f.Action = "wrote"
	}
	return changed, nil
}

func printAgentSetup(a *app.App, rec *agentSetupRecord, changed int) {
	for _, w := range rec.Warnings {
		a.Notef("warning: %s", w)
	}
	if a.Quiet {
		return
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
		leftOut := ""
		if len(f.LeftOut) > 0 {
			leftOut = "; left out " + textsafe.Escape(strings.Join(f.LeftOut, "; "))
		}
		if f.changed {
			a.Printf("%s %s (%s): added %s%s\n", f.Action, textsafe.Escape(f.Path), f.What, strings.Join(f.Added, "; "), leftOut)
		} else {
			why := "left as it is"
			if len(f.Present) > 0 {
				why = "has " + strings.Join(f.Present, ", ")
			}
			a.Printf("unchanged %s (%s): %s%s\n", textsafe.Escape(f.Path), f.What, why, leftOut)
		}
	}
	a.Printf("%s\n", scopeLine(rec))
	if changed == 0 {
		a.Printf("nothing to change\n")
	}
}

// scopeLine says where the loop's allow rules apply, so the user knows
// what the files just listed grant and to whom.
func scopeLine(rec *agentSetupRecord) string {
	names := make([]string, len(rec.Repos))
	for i, n := range rec.Repos {
		names[i] = textsafe.Escape(n)
	}
	repos := strings.Join(names, ", ")
	switch {
	case rec.Agent == "gemini":
		trust := "no repo's trust was added"
		if repos != "" {
			trust = "trust for " + repos
		}
		return "scope: Gemini CLI 0.61 reads no repo's policies, so the rule in ~/.gemini/policies/" + agentsetup.GeminiPolicyName +
			" lets every Gemini CLI session on this machine run the loop's commands (only those) without asking; " + trust + " in ~/.gemini/trustedFolders.json"
	case rec.Scope == scopeUserWide && rec.Agent == "claude":
		return "scope: user-wide (--user-wide): every Claude Code session on this machine, in any directory, runs the loop's commands without asking"
	case rec.Scope == scopeUserWide:
		return "scope: user-wide (--user-wide): every Codex session on this machine, in any directory, runs the loop's commands without asking and outside its sandbox"
	case rec.Agent == "claude":
		return "scope: the loop's commands run without asking only in " + repos + " (each repo's .claude/settings.local.json); nothing under your home directory is written, and other repos still ask"
	}
	return "scope: the loop's commands run without asking only in " + repos + " (each repo's .codex/rules, which Codex reads only in a repo it trusts); " +
		"~/.codex/config.toml gets what Codex reads from nowhere else (notify, allow_login_shell, the repos' trust) and no rule; other repos still ask"
}

// setupRepos resolves the REPO arguments in gita's registry, each once;
// with none and all set, it is every repo gita has registered (but bare
// ones, which have no work tree for an agent to run in).
func setupRepos(a *app.App, slugs []string, all bool) ([]gita.Repo, error) {
	if len(slugs) == 0 && !all {
		return nil, nil
	}
	reg, err := a.Registry()
	if err != nil {
		return nil, err
	}
	var repos []gita.Repo
	add := func(r gita.Repo) {
		if !slices.ContainsFunc(repos, func(o gita.Repo) bool { return o.Path == r.Path }) {
			repos = append(repos, r)
		}
	}
	for _, slug := range slugs {
		r, err := reg.Resolve(slug)
		if err != nil {
			return nil, err
		}
		add(r)
	}
	if len(slugs) == 0 {
		for _, r := range reg.Repos {
			if !r.Bare {
				add(r)
			}
		}
		if len(repos) == 0 {
			return nil, errs.New(errs.Usage, "no repo to set up: gita has none registered (%s)", reg.ReposFile).
				WithHint("register the repos with `gita add <path>`, or name them; --user-wide writes the agent's user settings instead, for every repo")
		}
	}
	return repos, nil
}

// claudeManagedSettings is where Claude Code reads an administrator's
// settings on Linux.
const claudeManagedSettings = "/etc/claude-code/managed-settings.json"

// planClaude works out Claude Code's settings: each repo's local
// settings, or with userWide the user's.
func planClaude(ctx context.Context, a *app.App, home string, repos []gita.Repo, userWide bool, rec *agentSetupRecord) error {
	dir := a.Getenv("CLAUDE_CONFIG_DIR")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(home, ".claude")
	}
	user := filepath.Join(dir, "settings.json")
	// Managed settings (an administrator's) win over every other file.
	if b, err := os.ReadFile(claudeManagedSettings); err == nil {
		rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(claudeManagedSettings, b)...)
	}
	if userWide {
		f, err := readSettings(user, "Claude Code's settings for every repo")
		if err != nil {
			return err
		}
		return rec.planClaudeFile(f, "", nil)
	}
	// Rules of the user's settings and of the repo's shared settings apply
	// along with the local ones: their deny and ask rules are reported too,
	// and the loop's allow rules a user-wide setup left there.
	userOld, _ := os.ReadFile(user)
	rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(user, userOld)...)
	rec.Warnings = append(rec.Warnings, agentsetup.ClaudeUserWideRules(user, userOld)...)
	// Claude Code runs the hooks of the user's settings and the repo's
	// both: those the user's have already are not written again.
	userHooks := agentsetup.ClaudeUserHooks(userOld)
	for _, r := range repos {
		f, err := readRepoSettings(r.Path, agentsetup.ClaudeRepoSettings, "Claude Code's settings for "+textsafe.Escape(r.Name)+" on this machine")
		if err != nil {
			return err
		}
		if err := rec.planClaudeFile(f, user, userHooks); err != nil {
			return err
		}
		shared := filepath.Join(r.Path, ".claude", "settings.json")
		if b, err := os.ReadFile(shared); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.ClaudeConflicts(shared, b)...)
		}
		rec.warnUnignored(ctx, r, agentsetup.ClaudeRepoSettings, "this machine's settings are not committed")
	}
	return nil
}

// warnUnignored warns when git would commit the repo's file at rel.
func (rec *agentSetupRecord) warnUnignored(ctx context.Context, r gita.Repo, rel []string, why string) {
	name := filepath.Join(rel...)
	if !gitIgnores(ctx, r.Path, name) {
		rec.Warnings = append(rec.Warnings, filepath.Join(r.Path, name)+" is not ignored by git: add "+name+" to the repo's .gitignore (or your global excludes) so "+why)
	}
}

// planClaudeFile plans the settings file f: what it will hold, and what
// to warn about.
// A repo's file leaves out the hooks userHooks names, which the user's
// settings (user) have already.
func (rec *agentSetupRecord) planClaudeFile(f *settingsFile, user string, userHooks []string) error {
	res, err := agentsetup.ClaudeBeside(f.Path, f.old, user, userHooks)
	if err != nil {
		return err
	}
	f.take(res)
	rec.Files = append(rec.Files, f)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	return nil
}

// planCodex works out Codex's rules files and config.toml: the rules in
// each repo's .codex/rules, or with userWide in Codex's own rules
// directory; config.toml is the user's either way, since Codex reads
// notify and the projects' trust from there only.
func planCodex(ctx context.Context, a *app.App, home string, repos []gita.Repo, userWide bool, rec *agentSetupRecord) error {
	dir := a.Getenv("CODEX_HOME")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(home, ".codex")
	}
	userRulesDir := filepath.Join(dir, "rules")
	userRules := filepath.Join(userRulesDir, agentsetup.CodexRulesName)
	if userWide {
		rules, err := readSettings(userRules, "Codex's command rules for every repo")
		if err != nil {
			return err
		}
		rec.planCodexRules(rules)
	} else {
		if _, err := os.Lstat(userRules); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.CodexUserWideRules(userRules))
		}
		for _, r := range repos {
			rules, err := readRepoSettings(r.Path, agentsetup.CodexRepoRules, "Codex's command rules for "+textsafe.Escape(r.Name))
			if err != nil {
				return err
			}
			rec.planCodexRules(rules)
			rec.warnOtherRules(filepath.Join(r.Path, ".codex", "rules"))
			rec.warnUnignored(ctx, r, agentsetup.CodexRepoRules, "its rules stay this machine's")
		}
	}
	// Codex reads the user's rules along with a repo's.
	rec.warnOtherRules(userRulesDir)

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
	res, err := agentsetup.CodexConfig(config.Path, config.old, in)
	if err != nil {
		return err
	}
	config.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, config)
	return nil
}

// planGemini works out Gemini CLI's files, all in its own directory
// (~/.gemini, or $GEMINI_CLI_HOME/.gemini): the policy file, the hooks in
// settings.json and the repos' trust.
func planGemini(a *app.App, home string, repos []gita.Repo, rec *agentSetupRecord) error {
	if h := a.Getenv("GEMINI_CLI_HOME"); filepath.IsAbs(h) {
		home = h
	}
	dir := filepath.Join(home, ".gemini")
	policies := filepath.Join(dir, "policies")
	policy, err := readSettings(filepath.Join(policies, agentsetup.GeminiPolicyName), "Gemini CLI's policy for every session")
	if err != nil {
		return err
	}
	res := agentsetup.GeminiPolicy(policy.Path, policy.old, policy.exists)
	policy.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, policy)
	others, _ := filepath.Glob(filepath.Join(policies, "*.toml"))
	sort.Strings(others)
	for _, other := range others {
		if filepath.Base(other) == agentsetup.GeminiPolicyName {
			continue
		}
		if b, err := os.ReadFile(other); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.GeminiPolicyConflicts(other, b)...)
		}
	}

	settings, err := readSettings(filepath.Join(dir, "settings.json"), "Gemini CLI's settings")
	if err != nil {
		return err
	}
	res, err = agentsetup.GeminiSettings(settings.Path, settings.old)
	if err != nil {
		return err
	}
	settings.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, settings)

	if len(repos) == 0 {
		return nil
	}
	trust, err := readSettings(filepath.Join(dir, "trustedFolders.json"), "the folders Gemini CLI trusts")
	if err != nil {
		return err
	}
	var projects []string
	for _, r := range repos {
		// Gemini CLI knows a folder by its working directory, links resolved.
		p := r.Path
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		projects = append(projects, p)
	}
	res, err = agentsetup.GeminiTrustedFolders(trust.Path, trust.old, projects)
	if err != nil {
		return err
	}
	trust.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, trust)
	return nil
}

// planCodexRules plans a tamq.rules file.
func (rec *agentSetupRecord) planCodexRules(rules *settingsFile) {
	res := agentsetup.CodexRules(rules.Path, rules.old, rules.exists)
	rules.take(res)
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	rec.Files = append(rec.Files, rules)
}

// warnOtherRules reads the other rules files of a Codex rules directory:
// one that names coordination-engine may hold a rule that wins over
// tamq's.
func (rec *agentSetupRecord) warnOtherRules(dir string) {
	others, _ := filepath.Glob(filepath.Join(dir, "*.rules"))
	sort.Strings(others)
	for _, other := range others {
		if filepath.Base(other) == agentsetup.CodexRulesName {
			continue
		}
		if b, err := os.ReadFile(other); err == nil {
			rec.Warnings = append(rec.Warnings, agentsetup.CodexRulesConflicts(other, b)...)
		}
	}
}

// readSettings reads a settings file of the user's (under their home
// directory), following a symbolic link: a dotfile kept in a repository of
// its own stays a link after the write. (A repo's file is read by
// readRepoSettings, which follows none.)
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
	f.LeftOut = append(f.LeftOut, res.LeftOut...)
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
	if err := fillTemp(tmp, f.content, f.mode); err != nil {
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

// write writes the file's new content: a repo's file by its descriptors
// (writeInRepo), the user's by its path (writeSettings).
func (f *settingsFile) write() error {
	if f.repo != "" {
		return f.writeInRepo()
	}
	return writeSettings(f)
}

// readRepoSettings reads the settings file at rel inside the repo at root.
// A repo's content is not the user's own choice the way their home
// directory is (a clone brings its links along), so nothing on the way from
// the repo's root is followed: a symbolic link there (the file, or a
// directory such as .claude) is refused, naming where it points, before
// anything is written. Each element is opened in its parent's descriptor
// with O_NOFOLLOW, so a link put there after the check is not followed
// either. The root's own path is the user's (gita's), and followed.
func readRepoSettings(root string, rel []string, what string) (*settingsFile, error) {
	path := filepath.Join(append([]string{root}, rel...)...)
	f := &settingsFile{Path: path, What: what, target: path, repo: root, rel: rel, mode: 0o600, Added: []string{}, Present: []string{}}
	dir, err := openRepoDir(root, rel[:len(rel)-1], false, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, err
	}
	defer unix.Close(dir)
	b, exists, mode, err := readAt(dir, rel[len(rel)-1], path)
	if err != nil || !exists {
		return f, err
	}
	f.old, f.exists, f.mode = b, true, mode
	return f, nil
}

// openRepoDir opens the directory at dirs below root, each element without
// following a link; create makes the missing ones (0700). file is the
// settings file the directory is opened for, for messages. A missing
// directory without create is fs.ErrNotExist.
func openRepoDir(root string, dirs []string, create bool, file string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errs.Wrap(errs.Storage, err, "cannot open the repo %s", root)
	}
	at := root
	for _, name := range dirs {
		at = filepath.Join(at, name)
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT) && !create:
			unix.Close(fd)
			return -1, fs.ErrNotExist
		case errors.Is(err, unix.ENOENT):
			if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, errs.Wrap(errs.Storage, err, "cannot create %s", at)
			}
		case err != nil:
			unix.Close(fd)
			return -1, errs.Wrap(errs.Storage, err, "cannot read %s", at)
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			defer unix.Close(fd)
			return -1, linkRefused(file, at, fd, name)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			defer unix.Close(fd)
			if isLink(fd, name) {
				return -1, linkRefused(file, at, fd, name)
			}
			if errors.Is(err, unix.ENOTDIR) {
				return -1, errs.New(errs.ConfigInvalid, "%s is not a directory", at)
			}
			return -1, errs.Wrap(errs.Storage, err, "cannot open %s", at)
		}
		unix.Close(fd)
		fd = next
	}
	return fd, nil
}

// readAt reads the regular file name in dir without following a link.
func readAt(dir int, name, path string) (content []byte, exists bool, mode fs.FileMode, err error) {
	// O_NONBLOCK: a FIFO put at the name must not hang the open; the
	// check below refuses it.
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, false, 0, nil
	case err != nil && isLink(dir, name):
		return nil, false, 0, linkRefused(path, path, dir, name)
	case err != nil:
		return nil, false, 0, errs.Wrap(errs.Storage, err, "cannot read %s", path)
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, false, 0, errs.Wrap(errs.Storage, err, "cannot read %s", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, 0, errs.New(errs.ConfigInvalid, "%s is not a regular file", path)
	}
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, false, 0, errs.Wrap(errs.Storage, err, "cannot read %s", path)
	}
	return b, true, fi.Mode().Perm(), nil
}

// isLink reports whether name in dir is a symbolic link.
func isLink(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// linkRefused is the error for a link at path (name in dir) on the way to
// the settings file file: it names where the link points.
func linkRefused(file, path string, dir int, name string) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	target := "somewhere tamq could not read"
	if err == nil {
		target = string(buf[:n])
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
	}
	what := path + " is a symbolic link to " + textsafe.Escape(target)
	if path == file {
		what = "it is a symbolic link to " + textsafe.Escape(target)
	}
	return errs.New(errs.PermissionDeny, "refusing to write %s: %s, and tamq agent setup follows no link inside a repo (a repo's link could make it write any file of yours)", file, what).
		WithHint("put the file itself there, or remove the link, then run tamq agent setup again; a link there is left as it is")
}

// writeInRepo replaces a repo's settings file as writeSettings does, by
// descriptors: the directories are opened (and made, 0700) without
// following a link, the temporary file is made in the last one with
// O_EXCL|O_NOFOLLOW, and renamed over the name in that same directory,
// which replaces whatever is at the name and writes through nothing.
func (f *settingsFile) writeInRepo() error {
	dir, err := openRepoDir(f.repo, f.rel[:len(f.rel)-1], true, f.Path)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	base := f.rel[len(f.rel)-1]
	tmpName := "." + base + ".tamq-" + rand.Text()[:12]
	fd, err := unix.Openat(dir, tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(f.mode))
	if err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	tmp := os.NewFile(uintptr(fd), tmpName)
	done := false
	defer func() {
		if !done {
			tmp.Close()
			unix.Unlinkat(dir, tmpName, 0)
		}
	}()
	if err := fillTemp(tmp, f.content, f.mode); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	now, exists, _, err := readAt(dir, base, f.Path)
	if err != nil {
		return err
	}
	if exists != f.exists || !bytes.Equal(now, f.old) {
		return errs.New(errs.Conflict, "%s changed while tamq agent setup was working on it; it was left as it is", f.Path).
			WithHint("run tamq agent setup again")
	}
	if err := unix.Renameat(dir, tmpName, dir, base); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", f.Path)
	}
	done = true
	unix.Fsync(dir)
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

// fillTemp writes a new file's content and mode into its temporary file and
// closes it, synced, before it is renamed into place.
func fillTemp(tmp *os.File, content []byte, mode os.FileMode) error {
	if _, err := tmp.Write(content); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	return tmp.Close()
}
