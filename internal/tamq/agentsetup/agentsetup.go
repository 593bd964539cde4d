// Package agentsetup works out what `tamq agent setup` writes into an
// agent's own settings files so that coordination-engine's wake loop runs
// without a permission dialog and the agent's hooks reach tamq's broker:
// Claude Code's settings.json (permission rules and hooks), Codex's
// config.toml (notify, the shell's PATH, project trust) and its rules file
// (prefix rules), Gemini CLI's settings.json (hooks), trustedFolders.json
// and a policy file.
//
// It does no I/O: each function takes a file's current content and returns
// the new content, what was added and what the user should know. The
// user's own settings are kept as written: nothing is removed, reordered or
// changed, only what is missing is added, and a setting of theirs that
// stands in the loop's way is reported, never overwritten.
// docs/agent-setup.md says what each entry is for.
package agentsetup

import (
	"slices"
	"strings"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Program is the command the wake prompts name.
const Program = "coordination-engine"

// HookCommand is what the agents' hooks run (docs/broker.md, "Hooks").
const HookCommand = "tamq hook"

// Command is one subcommand a wake prompt asks the agent to run.
type Command struct {
	Words []string // the subcommand after Program: {"lease", "ack"}
	// Example is a command line as a wake prompt writes it, used to test
	// whether a rule of the user's already covers it or stands in its way.
	Example string
	Why     string // what the agent runs it for
}

// Line is the subcommand as one string: "coordination-engine lease ack".
func (c Command) Line() string { return Program + " " + strings.Join(c.Words, " ") }

// Commands are the subcommands the wake prompts ask for (internal/prompt
// and docs/agents.md, section 5), and the only ones allowed: the operator's
// (wake, stop, …) still ask.
var Commands = []Command{
	{[]string{"checkpoint"}, Program + " checkpoint --lease L --attempt 1 --summary TEXT --next TEXT --file F", "record where the work stands"},
	{[]string{"task", "set"}, Program + " task set T-7 --status done --note TEXT", "publish the task's state"},
	{[]string{"lease", "release"}, Program + " lease release L --attempt 1 --result completed", "end the lease"},
	{[]string{"message", "show"}, Program + " message show M-1", "read the State Hub message it was woken for"},
	{[]string{"message", "read"}, Program + " message read M-1", "mark that message read"},
	// Last, so the commands before keep their places (CodexRulesConflicts
	// names the fourth's example).
	{[]string{"task", "show"}, Program + " task show 'octo-org/alpha#12'", "read the description of the task it was woken for (a GitHub issue's body)"},
}

// Result is a settings file's new content.
type Result struct {
	Content []byte // the new content; the old one when nothing changed
	Changed bool
	// Added says what was added, each a short phrase for the one line
	// printed per file ("7 permission rules").
	Added []string
	// Present says what the file already had of what the loop needs.
	Present []string
	// Warnings are what the user should know: a setting of theirs that
	// stands in the loop's way and was left as it is.
	Warnings []string
	// LeftOut says what the file did not get because another file the
	// agent reads along with it has it already (a repo's Claude settings,
	// the hooks of the user's): written twice, it would run twice.
	LeftOut []string
}

// invalid is the error for a settings file that cannot be read as its
// format: nothing is written.
func invalid(path, format string, err error) error {
	return errs.Wrap(errs.ConfigInvalid, err, "%s is not valid %s", path, format).
		WithHint("fix it (or move it away) and run tamq agent setup again; nothing was written")
}

// Where the loop's allow rules go by default: each repo's own files,
// named from the repo's root. Only there do the agents apply them to that
// repo alone: Claude Code reads a repo's .claude/settings.local.json when it
// runs in the repo; Codex reads the *.rules of a repo's .codex/rules when it
// runs in the repo and the repo is trusted (a project's config layer, which
// only a trusted project's is loaded; codex-rs core/src/exec_policy.rs
// load_exec_policy, config/src/loader). A file named here is written only
// if no link is on the way from the repo's root (internal/tamq/cli).
var (
	ClaudeRepoSettings = []string{".claude", "settings.local.json"}
	CodexRepoRules     = []string{".codex", "rules", CodexRulesName}
)

// ClaudeUserWideRules says whether a Claude Code user settings file holds
// the loop's allow rules as tamq writes them (an earlier user-wide setup):
// they allow the loop's commands in every repo, whatever the repos' own
// settings say.
func ClaudeUserWideRules(path string, content []byte) []string {
	perms, ok := claudePermissions(content)
	if !ok {
		return nil
	}
	allow, err := perms.array("allow")
	if err != nil {
		return nil
	}
	have := stringsOf(allow)
	var found []string
	for _, rule := range ClaudeAllowRules() {
		if slices.Contains(have, rule) {
			found = append(found, rule)
		}
	}
	if len(found) == 0 {
		return nil
	}
	return []string{path + " allows " + english.Plural(len(found), "of the loop's commands", "of the loop's commands") +
		" in every repo (" + strings.Join(found, ", ") + "; from a user-wide tamq agent setup): every Claude Code session on this machine runs them without asking; remove those rules to keep them to the repos set up here (left as it is)"}
}

// CodexUserWideRules is the warning for tamq's rules file in Codex's own
// rules directory (an earlier user-wide setup): every Codex session on the
// machine runs the loop's commands unasked and outside its sandbox.
func CodexUserWideRules(path string) string {
	return path + " (from a user-wide tamq agent setup) allows the loop's commands in every Codex session on this machine, without asking and outside its sandbox; remove it to keep them to the repos set up here (left as it is)"
}

// Unreadable is what tamq agent setup says of an agent it has no rules
// for (aider, a home-made one): it cannot read that agent's screen nor hear its hooks, so the
// broker cannot tell when the agent takes a wake; the wake prompt then
// carries the lease's ack and renew commands, which the agent must run.
func Unreadable(agent string) string {
	return "tamq has no screen rules or hooks for " + agent + ": its broker cannot see when " + agent +
		" takes a wake, is busy or asks a question, so it never acknowledges or renews a lease for it. " +
		"The wake prompt then carries the lease's `" + Program + " lease ack` and `" + Program + " lease renew` commands (with the attempt), " +
		"and " + agent + " must run them: ack when it takes the wake, renew while it works, as the prompt says. " +
		"Allow those commands, and " + CommandList() + ", in " + agent + "'s own settings (docs/agents.md, \"Any other agent\"); " +
		"tamq agent setup writes settings for claude, codex and gemini only"
}

// hooksAdded says which hook events a setup gave `tamq hook`, as Claude
// Code's and Gemini CLI's setups both report it.
func hooksAdded(events []string) string {
	return english.Plural(len(events), "hook", "hooks") + " running `" + HookCommand + "` (" + strings.Join(events, ", ") + ")"
}
