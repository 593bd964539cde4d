package agentsetup

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dustin/go-humanize/english"
)

// ClaudeHookEvent is a Claude Code hook event tamq's broker reads.
type ClaudeHookEvent struct {
	Name string
	// Matcher says the event takes a matcher (a tool name, a notification
	// type, a session source); tamq's hook takes them all (""). Events
	// without one are written without it, as Claude Code's documentation
	// shows them.
	Matcher bool
}

// ClaudeHookEvents are the events broker.HookState understands that Claude
// Code fires: a permission request or a notification that it waits for an
// answer opens a dialog; a prompt submitted, a session started, a tool run
// (or failed), a turn or a subagent ended close it. Only these: an event
// name Claude Code does not know made versions before 2.1.101 ignore the
// whole settings file.
var ClaudeHookEvents = []ClaudeHookEvent{
	{"PermissionRequest", true},
	{"Notification", true},
	{"UserPromptSubmit", false},
	{"SessionStart", true},
	{"PostToolUse", true},
	{"PostToolUseFailure", true},
	{"Stop", false},
	{"SubagentStop", false},
}

// Claude adds what the wake loop needs to a Claude Code settings file
// (~/.claude/settings.json, or a repo's .claude/settings.local.json) whose
// content is old (empty when it does not exist); path names it in messages.
// It adds an allow rule for each of Commands that no allow rule of the file
// covers yet, and a hook running HookCommand for each of ClaudeHookEvents
// that has none. A deny or ask rule of the file that catches one of
// Commands is left as it is, with a warning: Claude Code will refuse (or
// ask for) that command whatever the allow rules say.
func Claude(path string, old []byte) (Result, error) {
	return ClaudeBeside(path, old, "", nil)
}

// ClaudeUserHooks lists the events of ClaudeHookEvents whose hooks in a
// Claude Code user settings file (content) already run tamq's hook: an
// earlier user-wide setup's, or the user's own.
func ClaudeUserHooks(content []byte) []string {
	root, err := parseObject(content)
	if err != nil {
		return nil
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return nil
	}
	var out []string
	for _, ev := range ClaudeHookEvents {
		if groups, err := hooks.array(ev.Name); err == nil && hasTamqHook(groups) {
			out = append(out, ev.Name)
		}
	}
	return out
}

// ClaudeBeside is Claude for a repo's settings file, which Claude Code
// reads along with the user's (userPath): the hooks userHooks names (as
// ClaudeUserHooks reads them) are left out, since Claude Code runs the
// hooks of every settings file and tamq's would run twice; LeftOut says so.
func ClaudeBeside(path string, old []byte, userPath string, userHooks []string) (Result, error) {
	root, err := parseObject(old)
	if err != nil {
		return Result{}, invalid(path, "JSON", err)
	}
	perms, err := root.child("permissions")
	if err != nil {
		return Result{}, invalid(path, "Claude Code settings", err)
	}
	allow, err := perms.array("allow")
	if err != nil {
		return Result{}, invalid(path, "Claude Code settings", fmt.Errorf("permissions: %w", err))
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return Result{}, invalid(path, "Claude Code settings", err)
	}
	res := Result{Content: old}
	res.Warnings = ClaudeConflicts(path, old)

	have := stringsOf(allow)
	var rules []string
	for i, c := range Commands {
		if !coveredBy(have, c.Example) {
			rule := ClaudeAllowRules()[i]
			rules = append(rules, rule)
			allow = append(allow, jsonString(rule))
		}
	}

	var events, elsewhere []string
	for _, ev := range ClaudeHookEvents {
		groups, err := hooks.array(ev.Name)
		if err != nil {
			return Result{}, invalid(path, "Claude Code settings", fmt.Errorf("hooks: %w", err))
		}
		if hasTamqHook(groups) {
			continue
		}
		if slices.Contains(userHooks, ev.Name) {
			elsewhere = append(elsewhere, ev.Name)
			continue
		}
		events = append(events, ev.Name)
		hooks.set(ev.Name, encodeArray(append(groups, claudeHookGroup(ev))))
	}
	if off, _ := root.get("disableAllHooks"); strings.TrimSpace(string(off)) == "true" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s sets disableAllHooks: Claude Code runs no hooks, so tamq's broker hears nothing from them (left as it is)", path))
	}

	if len(rules) < len(Commands) {
		res.Present = append(res.Present, english.Plural(len(Commands)-len(rules), "loop command allowed", "loop commands allowed"))
	}
	if n := len(ClaudeHookEvents) - len(events) - len(elsewhere); n > 0 {
		res.Present = append(res.Present, english.Plural(n, "hook", "hooks"))
	}
	if len(elsewhere) > 0 {
		res.LeftOut = append(res.LeftOut, english.Plural(len(elsewhere), "hook", "hooks")+" running `"+HookCommand+"` that "+userPath+
			" has already ("+strings.Join(elsewhere, ", ")+"): Claude Code runs the hooks of both files, so they would run twice")
	}
	if len(rules) == 0 && len(events) == 0 {
		return res, nil
	}
	if len(rules) > 0 {
		perms.set("allow", encodeArray(allow))
		root.set("permissions", perms.encode())
		res.Added = append(res.Added, english.Plural(len(rules), "allow rule", "allow rules")+" for coordination-engine's loop commands")
	}
	if len(events) > 0 {
		root.set("hooks", hooks.encode())
		res.Added = append(res.Added, hooksAdded(events))
	}
	content, err := render(old, root.encode())
	if err != nil {
		return Result{}, err
	}
	res.Content, res.Changed = content, true
	return res, nil
}

// claudePermissions is a Claude Code settings file's "permissions" object;
// false when the file is not a JSON object or has none.
func claudePermissions(content []byte) (*object, bool) {
	root, err := parseObject(content)
	if err != nil {
		return nil, false
	}
	perms, err := root.child("permissions")
	return perms, err == nil
}

// ClaudeConflicts reads a Claude Code settings file (the one written, or
// another Claude Code reads along with it) for deny and ask rules that
// catch one of Commands, and says which. A file that is not valid JSON
// gives no warning here: the file written is checked by Claude, the others
// are Claude Code's to complain about.
func ClaudeConflicts(path string, content []byte) []string {
	perms, ok := claudePermissions(content)
	if !ok {
		return nil
	}
	var out []string
	for _, kind := range []string{"deny", "ask"} {
		list, err := perms.array(kind)
		if err != nil {
			continue
		}
		for _, rule := range stringsOf(list) {
			var caught []string
			for _, c := range Commands {
				if claudeRule(rule).matches(c.Example) {
					caught = append(caught, "`"+c.Line()+"`")
				}
			}
			if len(caught) == 0 {
				continue
			}
			what := "refuses"
			if kind == "ask" {
				what = "asks before it runs"
			}
			out = append(out, fmt.Sprintf("%s: the %s rule %q catches %s: Claude Code %s them whatever the allow rules say (left as it is; the wake loop stops there)",
				path, kind, rule, strings.Join(caught, ", "), what))
		}
	}
	return out
}

// coveredBy reports whether one of the allow rules takes cmd.
func coveredBy(rules []string, cmd string) bool {
	for _, r := range rules {
		if claudeRule(r).matches(cmd) {
			return true
		}
	}
	return false
}

// claudeHookGroup is one hook entry of an event: tamq's hook, for every
// matcher.
func claudeHookGroup(ev ClaudeHookEvent) json.RawMessage {
	hook := (&object{members: []member{
		{"type", jsonString("command")},
		{"command", jsonString(HookCommand)},
	}}).encode()
	group := &object{}
	if ev.Matcher {
		group.members = append(group.members, member{"matcher", jsonString("")})
	}
	group.members = append(group.members, member{"hooks", encodeArray([]json.RawMessage{hook})})
	return group.encode()
}

// hasTamqHook reports whether one of an event's hook groups already runs
// tamq's hook (by any path to tamq), whatever its matcher.
func hasTamqHook(groups []json.RawMessage) bool {
	for _, g := range groups {
		var group struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		}
		if json.Unmarshal(g, &group) != nil {
			continue
		}
		for _, h := range group.Hooks {
			if isTamqHook(strings.Fields(h.Command)) {
				return true
			}
		}
	}
	return false
}

// isTamqHook reports whether argv runs `tamq hook`, tamq named by any path.
func isTamqHook(argv []string) bool {
	return len(argv) == 2 && filepath.Base(argv[0]) == "tamq" && argv[1] == "hook"
}
