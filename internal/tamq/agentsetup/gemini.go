package agentsetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize/english"
)

// Gemini CLI keeps its settings in ~/.gemini (GEMINI_CLI_HOME in place of
// the home directory when set): settings.json (hooks), trustedFolders.json
// (the folders it trusts) and policies/*.toml (which tool calls it runs
// without asking). Gemini CLI 0.61.0 reads no repo's policies (its
// workspace policy tier is turned off in that release: resolveWorkspace
// PolicyState, disableWorkspacePolicies), so the loop's allow rules can
// only go into the user's policies directory, where every session reads
// them; they allow nothing but the loop's coordination-engine commands.

// GeminiPolicyName is the policy file tamq writes in Gemini CLI's policies
// directory (~/.gemini/policies/).
const GeminiPolicyName = "tamq.toml"

// GeminiShellTool is Gemini CLI's shell tool, which the wake prompts'
// commands run through.
const GeminiShellTool = "run_shell_command"

// geminiPolicyPriority places tamq's rules within the user's tier (which
// wins over Gemini CLI's own defaults, which ask before any command): a
// deny or ask rule of the user's with a higher priority still wins.
const geminiPolicyPriority = 100

// GeminiPolicyText is the policy file: one allow rule for the shell tool,
// with a command prefix for each of Commands. Gemini CLI matches a prefix
// at a word's end, and checks each command of a compound line (a && b)
// against the rules on its own, so a loop command joined with anything
// else still asks for the rest.
func GeminiPolicyText() []byte {
	var b strings.Builder
	b.WriteString(`# Written by "tamq agent setup gemini"; what it is for: tamq's docs/agent-setup.md.
#
# Allows, without asking, exactly the coordination-engine commands a wake
# prompt asks the agent to run. Every other command (other
# coordination-engine commands too: wake, stop, ...) is left to Gemini CLI's
# own settings and policies.
#
# This file is tamq's: once it differs from what tamq writes, tamq agent setup
# leaves it alone. Keep rules of your own in another file of this directory.

[[rule]]
toolName = "` + GeminiShellTool + `"
commandPrefix = [
`)
	for _, c := range Commands {
		fmt.Fprintf(&b, "  %s, # %s\n", strconv.Quote(c.Line()), c.Why)
	}
	fmt.Fprintf(&b, "]\ndecision = \"allow\"\npriority = %d\n", geminiPolicyPriority)
	return []byte(b.String())
}

// GeminiPolicy is the policy file's new content, given the current one (old,
// and whether the file exists). A file that differs from GeminiPolicyText
// is someone's edit, or an older tamq's: it is left alone, with a warning.
func GeminiPolicy(path string, old []byte, exists bool) Result {
	want := GeminiPolicyText()
	switch {
	case !exists:
		return Result{Content: want, Changed: true,
			Added: []string{"a policy rule allowing coordination-engine's " + english.Plural(len(Commands), "loop command", "loop commands")}}
	case bytes.Equal(old, want):
		return Result{Content: old, Present: []string{"the loop's policy rule"}}
	default:
		return Result{Content: old, Warnings: []string{fmt.Sprintf(
			"%s differs from what this tamq writes and was left as it is: remove it and run tamq agent setup gemini again to get the current rule", path)}}
	}
}

// GeminiPolicyConflicts reads another policy file of Gemini CLI's policies
// directory: one that names coordination-engine may hold a deny or ask rule
// of a higher priority, which wins over tamq's allow.
func GeminiPolicyConflicts(path string, content []byte) []string {
	if !bytes.Contains(content, []byte(Program)) {
		return nil
	}
	return []string{fmt.Sprintf("%s also names %s: a deny or ask_user rule there with a priority above %d wins over tamq's rule (left as it is)",
		path, Program, geminiPolicyPriority)}
}

// GeminiHookEvents are the events broker.HookState understands that Gemini
// CLI fires: a Notification of type ToolPermission (it asks before a tool
// runs) opens a dialog; a prompt sent (BeforeAgent) or the tool run
// (AfterTool) closes it. Not SessionStart nor AfterAgent: Gemini CLI fires
// them after it has drawn its empty composer (SessionStart up to seconds
// after), where a delivery's paste may be under way, and an event during
// the paste holds its Enter back; the screen says as much at those times.
var GeminiHookEvents = []ClaudeHookEvent{
	{"Notification", true},
	{"BeforeAgent", false},
	{"AfterTool", true},
}

// GeminiSettings adds tamq's hooks to Gemini CLI's settings.json (old is
// its content, empty when it does not exist; path names it in messages):
// a hook running HookCommand for each of GeminiHookEvents that has none.
// Hooks use Claude Code's layout. Nothing else is added, changed or
// removed; settings of the user's that keep the hooks from running, or
// that ask before every command, are warned about.
func GeminiSettings(path string, old []byte) (Result, error) {
	root, err := parseObject(old)
	if err != nil {
		return Result{}, invalid(path, "JSON", err)
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return Result{}, invalid(path, "Gemini CLI settings", err)
	}
	res := Result{Content: old}
	res.Warnings = geminiSettingsWarnings(path, root)
	var events []string
	for _, ev := range GeminiHookEvents {
		groups, err := hooks.array(ev.Name)
		if err != nil {
			return Result{}, invalid(path, "Gemini CLI settings", fmt.Errorf("hooks: %w", err))
		}
		if hasTamqHook(groups) {
			continue
		}
		events = append(events, ev.Name)
		hooks.set(ev.Name, encodeArray(append(groups, claudeHookGroup(ev))))
	}
	if len(events) < len(GeminiHookEvents) {
		res.Present = append(res.Present, english.Plural(len(GeminiHookEvents)-len(events), "hook", "hooks"))
	}
	if len(events) == 0 {
		return res, nil
	}
	root.set("hooks", hooks.encode())
	res.Added = append(res.Added, hooksAdded(events))
	content, err := render(old, root.encode())
	if err != nil {
		return Result{}, err
	}
	res.Content, res.Changed = content, true
	return res, nil
}

// geminiSettingsWarnings names settings of the user's that stand in the
// loop's way: hooks turned off, and the deprecated tools.allowed list,
// which Gemini CLI 0.61.0 turns into rules that win over the policy files.
func geminiSettingsWarnings(path string, root *object) []string {
	var out []string
	if cfg, err := root.child("hooksConfig"); err == nil {
		if v, ok := cfg.get("enabled"); ok && strings.TrimSpace(string(v)) == "false" {
			out = append(out, path+" sets hooksConfig.enabled: false: Gemini CLI runs no hooks, so tamq's broker hears nothing from them (left as it is; it still reads the screen)")
		}
	}
	if tools, err := root.child("tools"); err == nil {
		if allowed, err := tools.array("allowed"); err == nil && len(allowed) > 0 {
			out = append(out, path+" sets tools.allowed (deprecated): Gemini CLI turns it into rules of its own; if the loop's commands still ask, move those entries into a policy file (left as it is)")
		}
	}
	return out
}

// GeminiTrustedFolders adds each of projects (absolute paths, as Gemini CLI
// sees its working directory) to Gemini CLI's trustedFolders.json as
// TRUST_FOLDER, unless the file already says something of that folder: a
// folder the user does not trust stays so, with a warning.
func GeminiTrustedFolders(path string, old []byte, projects []string) (Result, error) {
	root, err := parseObject(old)
	if err != nil {
		return Result{}, invalid(path, "JSON", err)
	}
	res := Result{Content: old}
	var added []string
	trusted := 0
	for _, p := range projects {
		if v, ok := root.get(p); ok {
			var level string
			json.Unmarshal(v, &level)
			if level == "TRUST_FOLDER" || level == "TRUST_PARENT" {
				trusted++
			} else {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s says %s for %s: Gemini CLI does not trust that repo, so it asks at start there and reads none of its settings (left as it is)", path, strings.TrimSpace(string(v)), p))
			}
			continue
		}
		root.set(p, jsonString("TRUST_FOLDER"))
		added = append(added, "trust for "+p)
	}
	if trusted > 0 {
		res.Present = append(res.Present, english.Plural(trusted, "repo trusted", "repos trusted"))
	}
	if len(added) == 0 {
		return res, nil
	}
	content, err := render(old, root.encode())
	if err != nil {
		return Result{}, err
	}
	res.Content, res.Changed, res.Added = content, true, added
	return res, nil
}

// CommandList names the loop's commands in one line.
func CommandList() string {
	lines := make([]string, len(Commands))
	for i, c := range Commands {
		lines[i] = "`" + c.Line() + "`"
	}
	return strings.Join(lines, ", ")
}
