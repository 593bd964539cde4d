package program

import (
	"slices"
	"testing"
)

func TestClassify(t *testing.T) {
	extra := []string{"aider", "scriptedagent"}
	tests := []struct {
		argv []string
		want Program
	}{
		{[]string{"claude"}, Program{Agent, Claude}},
		{[]string{"/home/me/.local/bin/claude", "--resume"}, Program{Agent, Claude}},
		{[]string{"codex", "--no-daemon"}, Program{Agent, Codex}},
		{[]string{"/repo/node_modules/.bin/codex"}, Program{Agent, Codex}},
		{[]string{"gemini"}, Program{Agent, Gemini}},
		{[]string{"node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"}, Program{Agent, Claude}},
		{[]string{"/usr/bin/node", "--no-warnings", "/x/node_modules/@openai/codex/bin/codex.js", "exec"}, Program{Agent, Codex}},
		{[]string{"bun", "claude.mjs"}, Program{Agent, Claude}},
		{[]string{"python3", "/home/me/.local/bin/aider"}, Program{Agent, "aider"}},
		{[]string{"/tmp/bin/scriptedagent"}, Program{Agent, "scriptedagent"}},
		{[]string{"node", "server.js"}, Program{Other, "node"}},
		{[]string{"python3", "-i", "-q"}, Program{Other, "python3"}},
		{[]string{"bash"}, Program{Shell, "bash"}},
		{[]string{"-bash"}, Program{Shell, "bash"}},
		{[]string{"-zsh"}, Program{Shell, "zsh"}},
		{[]string{"/usr/bin/fish", "-l"}, Program{Shell, "fish"}},
		{[]string{"bash", "--norc", "-i"}, Program{Shell, "bash"}},
		{[]string{"/bin/sh", "-c", "stty raw; exec cat"}, Program{Other, "sh"}},
		{[]string{"bash", "-lc", "make"}, Program{Other, "bash"}},
		{[]string{"bash", "build.sh"}, Program{Other, "bash"}},
		{[]string{"pwsh"}, Program{Shell, "pwsh"}},
		{[]string{"nu"}, Program{Shell, "nu"}},
		{[]string{"vim", "notes.txt"}, Program{Other, "vim"}},
		{[]string{"cat", "notes.txt"}, Program{Other, "cat"}},
		{[]string{"claudette"}, Program{Other, "claudette"}},
		{nil, Program{}},
	}
	for _, tt := range tests {
		if got := Classify(tt.argv, extra); got != tt.want {
			t.Errorf("Classify(%q) = %+v, want %+v", tt.argv, got, tt.want)
		}
	}
	// Without the configured names, aider is only a script python runs.
	if got := Classify([]string{"python3", "/home/me/.local/bin/aider"}, nil); got != (Program{Other, "python3"}) {
		t.Errorf("aider without agent_programs: %+v", got)
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		cmd  string
		want []string
	}{
		{"", nil},
		{"  claude  --resume ", []string{"claude", "--resume"}},
		{`env -i PATH=/usr/bin:/bin TERM=xterm PS1='bash$ ' bash --norc -i`, []string{"env", "-i", "PATH=/usr/bin:/bin", "TERM=xterm", "PS1=bash$ ", "bash", "--norc", "-i"}},
		{`sh -c 'stty raw -echo; exec cat > "/tmp/rec/$TAMQ_REPO"'`, []string{"sh", "-c", `stty raw -echo; exec cat > "/tmp/rec/$TAMQ_REPO"`}},
		{`echo "a \"b\" \$c" d\ e`, []string{"echo", `a "b" $c`, "d e"}},
		{`''`, []string{""}},
	}
	for _, tt := range tests {
		if got := Words(tt.cmd); !slices.Equal(got, tt.want) {
			t.Errorf("Words(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestCommandIsShell(t *testing.T) {
	shells := []string{"", "  ", "bash", "/bin/zsh -l", "exec fish", "SHELL=/bin/bash bash", "env -i PATH=/bin PS1='$ ' bash --norc -i",
		"env -u HOME bash", "-bash", "nu", "exec $SHELL", "${SHELL} -l"}
	for _, c := range shells {
		if !CommandIsShell(c) {
			t.Errorf("CommandIsShell(%q) = false", c)
		}
	}
	agents := []string{"claude", "codex --no-daemon", "exec /tmp/scriptedagent agent", "env SCRIPTED_AGENT_PLAN='a b' /bin/scriptedagent",
		"sh -c 'stty raw -echo; exec cat > rec'", "bash -lc claude", "bash build.sh", "python3 -i -q", "cat", "true; exec bash", "$SHELL -c claude"}
	for _, c := range agents {
		if CommandIsShell(c) {
			t.Errorf("CommandIsShell(%q) = true", c)
		}
	}
}

func TestCommandAgent(t *testing.T) {
	tests := map[string]string{
		"claude":                             Claude,
		"codex --no-daemon":                  Codex,
		"env HOME=/tmp/h /x/.bin/claude":     Claude,
		"cd /repo && codex":                  Codex,
		"sh -c 'exec claude --resume'":       Claude,
		"scriptedagent":                      "",
		"":                                   "",
		"echo claudette":                     "",
		"/repo/node_modules/.bin/codex exec": Codex,
	}
	for cmd, want := range tests {
		if got := CommandAgent(cmd); got != want {
			t.Errorf("CommandAgent(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestArgvCommandAndBrokerChild(t *testing.T) {
	if got := ArgvCommand([]string{"/bin/sh", "-c", "claude --resume"}); got != "claude --resume" {
		t.Errorf("sh -c: %q", got)
	}
	if got := ArgvCommand([]string{"/bin/bash"}); got != "" {
		t.Errorf("bare shell: %q", got)
	}
	if got := ArgvCommand([]string{"cat", "-v"}); got != "cat -v" {
		t.Errorf("other: %q", got)
	}
	argv := []string{"sh", "-c", "printf '$ '; read a", "it's"}
	if got := Words(ArgvCommand(argv)); !slices.Equal(got, argv) {
		t.Errorf("ArgvCommand(%q) reads back as %q", argv, got)
	}
	child, ok := BrokerChild([]string{"/usr/bin/tamq", "broker", "--repo", "x", "--gita-dir", "/g", "--", "/bin/sh", "-c", "claude"})
	if !ok || !slices.Equal(child, []string{"/bin/sh", "-c", "claude"}) {
		t.Errorf("BrokerChild: %q %v", child, ok)
	}
	if _, ok := BrokerChild([]string{"bash"}); ok {
		t.Error("bash is no broker")
	}
}

func TestJudge(t *testing.T) {
	extra := []string{"scriptedagent"}
	tests := []struct {
		name    string
		fg      Foreground
		command string
		want    Verdict
	}{
		{"the user's shell at its prompt", Foreground{[]string{"-bash"}, true}, "", Verdict{false, "bash", ""}},
		{"a command run in the shell", Foreground{[]string{"cat", "notes.txt"}, false}, "", Verdict{false, "cat", ""}},
		{"claude started by hand in the shell", Foreground{[]string{"claude"}, false}, "", Verdict{true, Claude, Claude}},
		{"codex by npm in the shell", Foreground{[]string{"node", "/n/@openai/codex/bin/codex.js"}, false}, "", Verdict{true, Codex, Codex}},
		{"a configured agent by hand", Foreground{[]string{"/t/scriptedagent"}, false}, "", Verdict{true, "scriptedagent", ""}},
		{"the window's command", Foreground{[]string{"cat"}, true}, "sh -c 'stty raw; exec cat'", Verdict{true, "cat", ""}},
		{"the window's compound command (sh leads)", Foreground{[]string{"/bin/sh", "-c", "printf x; read a"}, true}, "printf x; read a", Verdict{true, "sh", ""}},
		{"the window's agent command", Foreground{[]string{"/bin/sh", "-c", "claude; echo bye"}, true}, "claude; echo bye", Verdict{true, "sh", Claude}},
		{"the window's command became a shell", Foreground{[]string{"bash"}, true}, "true; exec bash", Verdict{false, "bash", ""}},
		{"a shell command", Foreground{[]string{"bash", "--norc", "-i"}, true}, "env -i bash --norc -i", Verdict{false, "bash", ""}},
		{"a job the window's command started in its own group", Foreground{[]string{"vim"}, false}, "claude", Verdict{false, "vim", ""}},
		{"nothing to read", Foreground{nil, true}, "claude", Verdict{}},
	}
	for _, tt := range tests {
		if got := Judge(tt.fg, tt.command, extra); got != tt.want {
			t.Errorf("%s: Judge = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
