package agentsetup

import (
	"regexp"
	"strings"
)

// claudeRule is one of Claude Code's permission rules ("Bash",
// "Bash(npm run test:*)", "Bash(git * main)", "Read(./.env)").
type claudeRule string

// ClaudeAllowRules are the permission rules tamq adds: one per Command, in
// Claude Code's prefix form, so each allows its subcommand with any
// arguments and nothing else of coordination-engine.
func ClaudeAllowRules() []string {
	out := make([]string, len(Commands))
	for i, c := range Commands {
		out[i] = "Bash(" + c.Line() + ":*)"
	}
	return out
}

// matches reports whether the rule applies to the Bash command line cmd,
// as Claude Code reads its rules: "Bash" and "Bash(*)" take every command;
// "Bash(prefix:*)" the prefix alone or followed by a space; otherwise "*"
// stands for any run of characters, and a single trailing " *" may match
// nothing (so "Bash(ls *)" takes "ls" and "ls -la", not "lsof"). Rules of
// other tools never apply. It is used to tell whether a rule of the user's
// already allows a command or stands in its way, so it errs on no side:
// a rule it cannot read does not match.
func (r claudeRule) matches(cmd string) bool {
	rule := strings.TrimSpace(string(r))
	if rule == "Bash" {
		return true
	}
	content, ok := strings.CutPrefix(rule, "Bash(")
	if !ok {
		return false
	}
	content, ok = strings.CutSuffix(content, ")")
	if !ok {
		return false
	}
	content = strings.TrimSpace(content)
	if content == "" || content == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(content, ":*"); ok {
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	if strings.Count(content, "*") == 1 && strings.HasSuffix(content, " *") {
		prefix := strings.TrimSuffix(content, " *")
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	parts := strings.Split(content, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re, err := regexp.Compile("^" + strings.Join(parts, ".*") + "$")
	return err == nil && re.MatchString(cmd)
}
