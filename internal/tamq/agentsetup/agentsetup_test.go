package agentsetup

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
)

// Every coordination-engine command a wake prompt names is one of
// Commands, and every one of Commands is named by some prompt: the list
// allowed is the list asked for.
func TestCommandsAreThePromptsCommands(t *testing.T) {
	in := prompt.Input{
		Program: Program, LeaseID: "0197d2a4-8c3e-7b1f-9a52-3e6f0c4d2b18", Attempt: 2, MaxAttempts: 5,
		Repo:    "net",
		Trigger: prompt.Trigger{Source: "task", SourceID: "T-7", SourceRevision: "r12", Reason: "dependency_satisfied"},
		Task:    &prompt.Task{ID: "T-7", Title: "Fix the parser", Workplan: "WP-2"},
		Message: &prompt.Message{ID: "M-1", Subject: "hello", From: "ops"},
		// A tracker with task descriptions (GitHub) names task show too.
		TaskBodies: true,
	}
	text := prompt.Build(in)
	// A command is the program and the lowercase words after it.
	re := regexp.MustCompile(regexp.QuoteMeta(Program) + `((?: [a-z]+)+)`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		words := strings.Fields(m[1])
		if words[0] == "wakes" { // the header: "coordination-engine wakes net: ..."
			continue
		}
		found := false
		for _, c := range Commands {
			if len(words) >= len(c.Words) && slices.Equal(words[:len(c.Words)], c.Words) {
				seen[c.Line()], found = true, true
			}
		}
		if !found {
			t.Errorf("the prompt asks for %q, which is not among the commands allowed", Program+m[1])
		}
	}
	for _, c := range Commands {
		if !seen[c.Line()] {
			t.Errorf("%q is allowed, but no prompt asks for it", c.Line())
		}
	}
}

// Every hook event written for Claude Code moves tamq's broker: it opens a
// dialog or closes one.
func TestClaudeHookEventsMoveTheBroker(t *testing.T) {
	now := time.Now()
	for _, ev := range ClaudeHookEvents {
		var h broker.HookState
		switch ev.Name {
		case "PermissionRequest", "Notification":
			h.Apply(broker.HookEvent{Event: ev.Name, Type: "permission_prompt"}, now)
			if h.Dialog(false, now) == "" {
				t.Errorf("%s opens no dialog", ev.Name)
			}
		default:
			h.Apply(broker.HookEvent{Event: "PermissionRequest"}, now)
			h.Apply(broker.HookEvent{Event: ev.Name}, now)
			if d := h.Dialog(false, now); d != "" {
				t.Errorf("%s leaves the dialog open: %s", ev.Name, d)
			}
		}
	}
}

func TestClaudeRuleMatches(t *testing.T) {
	ack := "coordination-engine lease ack L --attempt 1"
	for _, tc := range []struct {
		rule string
		cmd  string
		want bool
	}{
		{"Bash", ack, true},
		{"Bash(*)", ack, true},
		{"Bash()", ack, true},
		{"Bash(coordination-engine lease ack:*)", ack, true},
		{"Bash(coordination-engine lease ack:*)", "coordination-engine lease ack", true},
		{"Bash(coordination-engine lease ack:*)", "coordination-engine lease acknowledge", false},
		{"Bash(coordination-engine lease:*)", ack, true},
		{"Bash(coordination-engine:*)", ack, true},
		{"Bash(coordination-engine *)", ack, true},
		{"Bash(coordination-engine *)", "coordination-engine", true},
		{"Bash(coordination*)", ack, true},
		{"Bash(* --attempt 1)", ack, true},
		{"Bash(coordination-engine * renew *)", ack, false},
		{"Bash(coordination-engine lease ack L --attempt 1)", ack, true},
		{"Bash(coordination-engine lease renew:*)", ack, false},
		{"Bash(coordination-engine wake:*)", ack, false},
		{"Read(./.env)", ack, false},
		{"WebFetch", ack, false},
		{"Bash(unclosed", ack, false},
	} {
		if got := claudeRule(tc.rule).matches(tc.cmd); got != tc.want {
			t.Errorf("%q matches %q: %v, want %v", tc.rule, tc.cmd, got, tc.want)
		}
	}
}

// The allow rules tamq writes take their command and nothing else of
// coordination-engine's.
func TestClaudeAllowRulesTakeTheirCommandOnly(t *testing.T) {
	rules := ClaudeAllowRules()
	others := []string{"coordination-engine wake net", "coordination-engine stop", "coordination-engine", "coordination-engine lease list"}
	for i, c := range Commands {
		if !claudeRule(rules[i]).matches(c.Example) {
			t.Errorf("%s does not take %q", rules[i], c.Example)
		}
		for j, d := range Commands {
			if i != j && claudeRule(rules[i]).matches(d.Example) {
				t.Errorf("%s takes %q too", rules[i], d.Example)
			}
		}
		for _, o := range others {
			if claudeRule(rules[i]).matches(o) {
				t.Errorf("%s takes %q", rules[i], o)
			}
		}
	}
}

func TestCodexRules(t *testing.T) {
	want := CodexRulesText()
	if res := CodexRules("tamq.rules", nil, false); !res.Changed || string(res.Content) != string(want) || len(res.Warnings) > 0 {
		t.Errorf("a new rules file: %+v", res)
	}
	if res := CodexRules("tamq.rules", want, true); res.Changed || len(res.Warnings) > 0 || len(res.Present) != 1 {
		t.Errorf("the same rules file: %+v", res)
	}
	edited := append(append([]byte{}, want...), "prefix_rule(pattern = [\"make\"])\n"...)
	res := CodexRules("tamq.rules", edited, true)
	if res.Changed || string(res.Content) != string(edited) || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "left as it is") {
		t.Errorf("an edited rules file: %+v", res)
	}
	// One rule for each command, and the host_executable guard.
	text := string(want)
	for _, c := range Commands {
		if !strings.Contains(text, `match = ["`+c.Example+`"]`) {
			t.Errorf("no rule with the example %q", c.Example)
		}
	}
	if strings.Count(text, "prefix_rule(") != len(Commands) || !strings.Contains(text, `host_executable(name = "coordination-engine", paths = [])`) {
		t.Errorf("rules:\n%s", text)
	}
}

func TestCodexRulesConflicts(t *testing.T) {
	if w := CodexRulesConflicts("default.rules", []byte(`prefix_rule(pattern = ["git", "push"], decision = "prompt")`)); w != nil {
		t.Errorf("a file without coordination-engine: %v", w)
	}
	w := CodexRulesConflicts("mine.rules", []byte(`prefix_rule(pattern = ["coordination-engine"], decision = "forbidden")`))
	if len(w) != 1 || !strings.Contains(w[0], "mine.rules also names coordination-engine") {
		t.Errorf("a file naming coordination-engine: %v", w)
	}
}

// Conflicts are read from files tamq does not write too; one it cannot
// read says nothing (Claude Code complains about it itself).
func TestClaudeConflictsOfOtherFiles(t *testing.T) {
	if w := ClaudeConflicts("s.json", []byte(`{"permissions": {"deny": ["Bash"]}}`)); len(w) != 1 || !strings.Contains(w[0], `the deny rule "Bash" catches`) {
		t.Errorf("a blanket deny: %v", w)
	}
	if w := ClaudeConflicts("s.json", []byte(`{not json`)); w != nil {
		t.Errorf("an unreadable file: %v", w)
	}
}

func TestDiff(t *testing.T) {
	if d := Diff("f", []byte("a\n"), []byte("a\n"), true); d != "" {
		t.Errorf("no change: %q", d)
	}
	d := Diff("/h/.codex/rules/tamq.rules", nil, []byte("x\ny\n"), false)
	for _, want := range []string{"--- /dev/null\n", "+++ /h/.codex/rules/tamq.rules\n", "@@ -0,0 +1,2 @@\n+x\n+y\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff of a new file lacks %q:\n%s", want, d)
		}
	}
	d = Diff("f", []byte("a\nb\n"), []byte("a\nc\nb\n"), true)
	if !strings.Contains(d, "--- f\n+++ f\n") || !strings.Contains(d, " a\n+c\n b\n") {
		t.Errorf("diff of an insertion:\n%s", d)
	}
}

// A config.toml with CRLF line ends gets CRLF lines (a case of its own: a
// golden file would hold CRs, which git's whitespace check refuses).
func TestCodexConfigKeepsCRLF(t *testing.T) {
	old := "model = \"o3\"\r\n[tui]\r\ntheme = \"dark\"\r\n"
	res, err := CodexConfig("config.toml", []byte(old), CodexInput{Projects: []string{"/src/net"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "model = \"o3\"\r\n" +
		"# tamq agent setup: tamq's broker hears when a turn ends\r\n" +
		"notify = [\"tamq\", \"hook\"]\r\n" +
		"# tamq agent setup: commands keep the window's PATH (tamq, coordination-engine)\r\n" +
		"allow_login_shell = false\r\n" +
		"\r\n" +
		"[tui]\r\ntheme = \"dark\"\r\n" +
		"\r\n" +
		"# tamq agent setup: a repo of tamq's windows, trusted\r\n" +
		"[projects.\"/src/net\"]\r\ntrust_level = \"trusted\"\r\n"
	if string(res.Content) != want {
		t.Errorf("got:\n%q\nwant:\n%q", res.Content, want)
	}
}

// A Claude Code settings file with CRLF line ends too.
func TestClaudeKeepsCRLF(t *testing.T) {
	old := "{\r\n  \"model\": \"opus\",\r\n  \"permissions\": {\r\n    \"allow\": [\r\n      \"Bash(git status)\"\r\n    ]\r\n  }\r\n}\r\n"
	res, err := Claude("settings.json", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	got := string(res.Content)
	if !strings.HasPrefix(got, "{\r\n  \"model\": \"opus\",\r\n  \"permissions\": {\r\n    \"allow\": [\r\n      \"Bash(git status)\",\r\n      \"Bash(coordination-engine checkpoint:*)\",\r\n") ||
		strings.Count(got, "\n") != strings.Count(got, "\r\n") {
		t.Errorf("got:\n%q", got)
	}
}

// ClaudeUserWideRules finds tamq's own allow rules in a user's settings
// (an earlier user-wide setup), and no other rule: a rule of the user's
// that allows more is theirs, warned of by nothing here.
func TestClaudeUserWideRules(t *testing.T) {
	full, err := Claude("settings.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ClaudeUserWideRules("settings.json", full.Content); len(got) != 1 ||
		!strings.HasPrefix(got[0], "settings.json allows 6 of the loop's commands in every repo (Bash(coordination-engine checkpoint:*), ") {
		t.Errorf("tamq's rules: %q", got)
	}
	for _, content := range []string{"", "{}", `{"permissions": {"allow": ["Bash(coordination-engine:*)", "Bash(coordination-engine lease *)"]}}`,
		`{"permissions": {"deny": ["Bash(coordination-engine task set:*)"]}}`, "not json"} {
		if got := ClaudeUserWideRules("settings.json", []byte(content)); got != nil {
			t.Errorf("%s: %q", content, got)
		}
	}
	if len(ClaudeRepoSettings) != 2 || CodexRepoRules[len(CodexRepoRules)-1] != CodexRulesName {
		t.Errorf("repo files: %q %q", ClaudeRepoSettings, CodexRepoRules)
	}
}
