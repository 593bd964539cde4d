package agentsetup

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize/english"
)

// CodexRulesName is the rules file tamq writes in Codex's rules directory
// (~/.codex/rules/).
const CodexRulesName = "tamq.rules"

// CodexRulesText is the rules file: a prefix_rule allowing each of
// Commands, and a host_executable entry with no paths, so an absolute path
// to some other program named coordination-engine (one the agent wrote in
// its workspace, say) matches none of them. Codex runs a command that only
// allowed rules match without asking and outside its sandbox (exec_policy.rs,
// bypass_sandbox), which is how these reach coordination-engine's socket.
// Each rule's match example is checked by Codex when it loads the file.
func CodexRulesText() []byte {
	var b strings.Builder
	b.WriteString(`# Written by "tamq agent setup codex"; what it is for: tamq's docs/agent-setup.md.
#
# Allows, without asking and outside Codex's sandbox, exactly the
# coordination-engine commands a wake prompt asks the agent to run, so they
# reach coordination-engine's socket. Every other coordination-engine command
# (wake, stop, ...) is left to Codex's own settings, and so is a command line
# that joins one of these with anything else.
#
# This file is tamq's: once it differs from what tamq writes, tamq agent setup
# leaves it alone. Keep rules of your own in another file of this directory.
`)
	for _, c := range Commands {
		words := make([]string, 0, len(c.Words)+1)
		for _, w := range append([]string{Program}, c.Words...) {
			words = append(words, strconv.Quote(w))
		}
		fmt.Fprintf(&b, `
prefix_rule(
    pattern = [%s],
    decision = "allow",
    justification = %s,
    match = [%s],
)
`, strings.Join(words, ", "), strconv.Quote("tamq wake loop: "+c.Why), strconv.Quote(c.Example))
	}
	b.WriteString(`
# Only the coordination-engine the shell finds on PATH: no absolute path to a
# program of that name matches the rules above.
host_executable(name = "coordination-engine", paths = [])
`)
	return []byte(b.String())
}

// CodexRules is the rules file's new content, given the current one (old,
// and whether the file exists). A file that differs from CodexRulesText is
// someone's edit, or an older tamq's: it is left alone, with a warning.
func CodexRules(path string, old []byte, exists bool) Result {
	want := CodexRulesText()
	switch {
	case !exists:
		return Result{Content: want, Changed: true,
			Added: []string{english.Plural(len(Commands), "prefix rule", "prefix rules") + " allowing coordination-engine's loop commands (outside the sandbox)"}}
	case bytes.Equal(old, want):
		return Result{Content: old, Present: []string{"the loop's prefix rules"}}
	default:
		return Result{Content: old, Warnings: []string{fmt.Sprintf(
			"%s differs from what this tamq writes and was left as it is: remove it and run tamq agent setup codex again to get the current rules", path)}}
	}
}

// CodexRulesConflicts reads another rules file of Codex's rules directory:
// one that names coordination-engine may hold a prompt or forbidden rule,
// which wins over tamq's allow.
func CodexRulesConflicts(path string, content []byte) []string {
	if !bytes.Contains(content, []byte(`"`+Program+`"`)) {
		return nil
	}
	return []string{fmt.Sprintf("%s also names %s: a prompt or forbidden rule there wins over tamq's rules (check with: codex execpolicy check --rules %s %s)",
		path, Program, path, Commands[3].Example)}
}

// CodexInput is what the Codex config needs besides the file.
type CodexInput struct {
	// Projects are the repositories to trust, by the absolute path Codex
	// sees as its working directory.
	Projects []string
}

// CodexConfig adds what the wake loop needs to Codex's config.toml (old is
// its content, empty when it does not exist; path names it in messages):
//
//   - notify = ["tamq", "hook"]: Codex tells tamq's broker when a turn ends.
//     Codex runs one notify program; a user's own is kept, with a warning.
//   - allow_login_shell = false: commands run in a plain shell with the
//     window's environment, PATH included, where tamq and coordination-engine
//     are. In a login shell (Codex's default, and its shell snapshot, taken
//     from one) PATH is rebuilt from the login profile, which often lacks
//     their directory (~/go/bin, ...).
//   - [projects."<path>"] trust_level = "trusted" for in.Projects.
//
// Keys are added as text, the rest of the file kept byte for byte; a value
// the user set is never changed, only warned about. Each addition is checked
// by parsing the result: one that would change another value, or that the
// file's layout does not allow (an inline table), is not made, and the
// warning says what to add by hand.
func CodexConfig(path string, old []byte, in CodexInput) (Result, error) {
	doc, err := parseTOML(old)
	if err != nil {
		return Result{}, invalid(path, "TOML", err)
	}
	res := Result{Content: old}
	res.Warnings = codexEnvWarnings(path, doc.values)

	type setting struct {
		table   []string
		key     string
		value   string // as TOML
		comment string
		ok      func(any) bool
		clash   func(any) string // the warning when the user's value is not ok
		added   string
	}
	settings := []setting{{
		key: "notify", value: `["tamq", "hook"]`,
		comment: "# tamq agent setup: tamq's broker hears when a turn ends",
		ok: func(v any) bool {
			list, _ := v.([]any)
			var argv []string
			for _, s := range list {
				str, _ := s.(string)
				argv = append(argv, str)
			}
			return isTamqHook(argv)
		},
		clash: func(v any) string {
			return fmt.Sprintf("%s sets notify = %s: Codex runs one notify program, so tamq's broker does not hear when a turn ends (left as it is; to have both, make that program also run `tamq hook` with the same last argument)", path, tomlValue(v))
		},
		added: "notify running `tamq hook`",
	}, {
		key: "allow_login_shell", value: "false",
		comment: "# tamq agent setup: commands keep the window's PATH (tamq, coordination-engine)",
		ok:      func(v any) bool { return v == false },
		clash: func(v any) string {
			return fmt.Sprintf("%s sets allow_login_shell = %s: Codex's commands run in a login shell, whose PATH comes from your login profile; coordination-engine is found only if the profile puts its directory on PATH (left as it is)", path, tomlValue(v))
		},
		added: "allow_login_shell = false (the window's PATH)",
	}}
	for _, p := range in.Projects {
		settings = append(settings, setting{
			table: []string{"projects", p}, key: "trust_level", value: `"trusted"`,
			comment: "# tamq agent setup: a repo of tamq's windows, trusted",
			ok:      func(v any) bool { return v == "trusted" },
			clash: func(v any) string {
				return fmt.Sprintf("%s sets trust_level = %s for %s: Codex does not trust that repo, so it asks before it starts there (left as it is)", path, tomlValue(v), p)
			},
			added: "trust for " + p,
		})
	}

	text := old
	var trusted int
	for _, s := range settings {
		if have, ok := doc.lookup(append(append([]string{}, s.table...), s.key)...); ok {
			if s.ok(have) {
				if s.table != nil {
					trusted++
				} else {
					res.Present = append(res.Present, s.key)
				}
			} else {
				res.Warnings = append(res.Warnings, s.clash(have))
			}
			continue
		}
		line := s.key + " = " + s.value
		next := doc.insert(s.table, s.comment, line)
		ndoc, err := parseTOML(next)
		if err != nil || !doc.keeps(ndoc) || !ndoc.has(append(append([]string{}, s.table...), s.key), mustValue(s.value)) {
			where := "at the top level"
			if s.table != nil {
				where = "in [" + tomlKeyPath(s.table) + "]"
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: could not add %s %s without changing what is there; add it by hand", path, line, where))
			continue
		}
		text, doc = next, ndoc
		res.Added = append(res.Added, s.added)
	}
	if trusted > 0 {
		res.Present = append(res.Present, english.Plural(trusted, "repo trusted", "repos trusted"))
	}
	res.Content, res.Changed = text, !bytes.Equal(text, old)
	return res, nil
}

// mustValue decodes a TOML value tamq writes.
func mustValue(v string) any {
	d, err := parseTOML([]byte("v = " + v))
	if err != nil {
		panic(err)
	}
	return d.values["v"]
}

// tomlValue writes a decoded value back, for a message.
func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return tomlString(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return fmt.Sprint(v)
	}
}

// The variables coordination-engine's commands need from the window: PATH to
// be found, its socket to reach the engine.
var codexCommandEnv = []string{"PATH", "COORDINATION_ENGINE_SOCKET"}

// codexEnvWarnings says whether the user's [shell_environment_policy] keeps
// a variable the loop's commands need from reaching them.
func codexEnvWarnings(file string, values map[string]any) []string {
	policy, _ := values["shell_environment_policy"].(map[string]any)
	if policy == nil {
		return nil
	}
	var out []string
	lost := func(name, why string) {
		out = append(out, fmt.Sprintf("%s: [shell_environment_policy] %s, so %s does not reach Codex's commands: coordination-engine then %s (left as it is)",
			file, why, name, map[string]string{"PATH": "is not found", "COORDINATION_ENGINE_SOCKET": "cannot reach the engine of the window"}[name]))
	}
	switch inherit, _ := policy["inherit"].(string); inherit {
	case "none":
		for _, name := range codexCommandEnv {
			if _, set := setVar(policy, name); !set {
				lost(name, `inherit = "none"`)
			}
		}
		return out
	case "core":
		lost("COORDINATION_ENGINE_SOCKET", `inherit = "core"`)
	}
	for _, name := range codexCommandEnv {
		if p, ok := matchesAny(policy["exclude"], name); ok {
			lost(name, fmt.Sprintf("exclude has %q", p))
		}
		if only, _ := policy["include_only"].([]any); len(only) > 0 {
			if _, ok := matchesAny(only, name); !ok {
				lost(name, "include_only leaves it out")
			}
		}
	}
	if v, set := setVar(policy, "PATH"); set {
		out = append(out, fmt.Sprintf("%s: [shell_environment_policy] sets PATH = %s for Codex's commands: it must hold the directories of tamq and coordination-engine (left as it is)", file, tomlValue(v)))
	}
	return out
}

func setVar(policy map[string]any, name string) (any, bool) {
	set, _ := policy["set"].(map[string]any)
	v, ok := set[name]
	return v, ok
}

// matchesAny reports which of patterns (Codex's case-insensitive
// wildcards) matches name.
func matchesAny(patterns any, name string) (string, bool) {
	list, _ := patterns.([]any)
	for _, p := range list {
		s, _ := p.(string)
		if ok, _ := path.Match(strings.ToUpper(s), strings.ToUpper(name)); ok {
			return s, true
		}
	}
	return "", false
}
