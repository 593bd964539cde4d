package program

import (
	"slices"
	"strings"
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
		"env -u HOME bash", "-bash", "nu", "exec $SHELL", "${SHELL} -l",
		// Runners looked through, and wrappers that start a shell.
		"nice -n 10 bash", "timeout 1h bash -l", "env -S 'bash -i'", "script -q /dev/null", "ssh -t host", "sudo -s", "su - dev", "bash; echo x"}
	for _, c := range shells {
		if !CommandIsShell(c) {
			t.Errorf("CommandIsShell(%q) = false", c)
		}
	}
	agents := []string{"claude", "codex --no-daemon", "exec /tmp/scriptedagent agent", "env SCRIPTED_AGENT_PLAN='a b' /bin/scriptedagent",
		"sh -c 'stty raw -echo; exec cat > rec'", "bash -lc claude", "bash build.sh", "python3 -i -q", "cat", "true; exec bash", "$SHELL -c claude",
		"sudo -u dev claude", "script -q -c claude /dev/null", "nice claude"}
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
		// A wrapper in front: tamq sees the wrapper, not what it runs.
		{"the window's wrapper of a shell", Foreground{[]string{"script", "-q", "/dev/null"}, true}, "script -q /dev/null", Verdict{false, "script", ""}},
		{"the window's remote login", Foreground{[]string{"ssh", "-t", "host"}, true}, "ssh -t host", Verdict{false, "ssh", ""}},
		{"the window's multiplexer", Foreground{[]string{"tmux"}, true}, "tmux new claude", Verdict{false, "tmux", ""}},
		{"the window's wrapper of an agent", Foreground{[]string{"sudo", "-u", "dev", "claude"}, true}, "sudo -u dev claude", Verdict{true, "sudo", Claude}},
		{"the window's agent over ssh", Foreground{[]string{"ssh", "-t", "host", "codex"}, true}, "ssh -t host codex", Verdict{true, "ssh", Codex}},
	}
	for _, tt := range tests {
		if got := Judge(tt.fg, tt.command, extra); got != tt.want {
			t.Errorf("%s: Judge = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Each wrapper (terminal wrapper, remote shell, container, privilege
// changer, multiplexer, scripted terminal) is refused for trigger mode
// unless it runs a known agent named on the line; Via names it, and Why
// says what it runs.
func TestCheckTriggerRefusesWrappers(t *testing.T) {
	tests := []struct {
		cmd   string
		via   string
		shell bool
		why   string // a part of Why
	}{
		{"script -q /dev/null", "script", true, "it runs a shell"},
		{"script", "script", true, "it runs a shell"},
		{"script -q -c 'id > /tmp/x' /dev/null", "script", false, "is for a shell"},
		{"script -q -c bash /dev/null", "script", true, "it runs a shell"},
		{"script -q -c vim /dev/null", "script", false, "it runs vim, which is not a known agent"},
		{"ssh -t host", "ssh", true, "it runs a shell"},
		{"ssh host", "ssh", true, "it runs a shell"},
		{"ssh -t -p 2222 dev@host -l dev", "ssh", true, "it runs a shell"},
		{"ssh -t host 'claude; bash'", "ssh", false, "is for a shell"},
		{"ssh -t host bash -l", "ssh", true, "it runs a shell"},
		{"ssh -N -L 80:x:80 host", "ssh", false, "no remote command"},
		{"ssh -o RemoteCommand=bash host claude", "ssh", false, "RemoteCommand"},
		{"sudo -s", "sudo", true, "it runs a shell"},
		{"sudo -i", "sudo", true, "it runs a shell"},
		{"sudo bash", "sudo", true, "it runs a shell"},
		{"sudo -u dev -E HOME=/home/dev bash --login", "sudo", true, "it runs a shell"},
		{"sudo vim /etc/hosts", "sudo", false, "it runs vim, which is not a known agent"},
		{"sudo -e /etc/hosts", "sudo", false, "edits files"},
		{"sudo --bogus claude", "sudo", false, "option tamq does not read (--bogus)"},
		{"doas -s", "doas", true, "it runs a shell"},
		{"doas -u dev zsh", "doas", true, "it runs a shell"},
		{"su", "su", true, "it runs a shell"},
		{"su - dev", "su", true, "it runs a shell"},
		{"su -l dev", "su", true, "it runs a shell"},
		{"su dev -c 'claude; sh'", "su", false, "is for a shell"},
		{"runuser -u dev -- bash", "runuser", true, "it runs a shell"},
		{"pkexec", "pkexec", true, "it runs a shell"},
		{"docker run -it ubuntu", "docker", false, "the image's own"},
		{"docker run -it --rm -v /src:/src -w /src ubuntu bash", "docker", true, "it runs a shell"},
		{"docker run -it --entrypoint /bin/sh img", "docker", true, "it runs a shell"},
		{"docker exec -it box sh", "docker", true, "it runs a shell"},
		{"docker run -it --unknown x img claude", "docker", false, "option tamq does not read (--unknown)"},
		{"docker compose run app", "docker", false, "subcommand `compose`"},
		{"podman run -it fedora", "podman", false, "the image's own"},
		{"podman run -it --rm fedora bash", "podman", true, "it runs a shell"},
		{"podman exec -it box bash", "podman", true, "it runs a shell"},
		{"screen", "screen", false, "terminal multiplexer"},
		{"screen -S agent claude", "screen", false, "terminal multiplexer"},
		{"tmux", "tmux", false, "terminal multiplexer"},
		{"tmux new-session claude", "tmux", false, "terminal multiplexer"},
		{"expect -f agent.exp", "expect", false, "runs a script"},
		{"expect -c 'spawn claude; interact'", "expect", false, "runs a script"},
		{"unbuffer bash", "unbuffer", true, "it runs a shell"},
		{"mosh host", "mosh", false, "remote shell"},
		// Runners are looked through, wrappers under them found.
		{"env TERM=xterm script -q /dev/null", "script", true, "it runs a shell"},
		{"nice -n 5 ssh -t host", "ssh", true, "it runs a shell"},
		{"exec nohup stdbuf -oL sudo -s", "sudo", true, "it runs a shell"},
		{"timeout 8h sudo -u dev bash", "sudo", true, "it runs a shell"},
		{"sudo -u dev ssh -t host", "sudo", true, "it runs a shell"},
		{"sudo sh -c 'claude && bash'", "sudo", false, "shell's command line"},
		// A wrapper anywhere on the line: it runs on the window's
		// terminal later, out of Judge's sight.
		{"claude; ssh -t host", "ssh", true, "it runs a shell"},
		{"cd /src && script -q /dev/null", "script", true, "it runs a shell"},
	}
	for _, tt := range tests {
		got := CheckTrigger(tt.cmd, nil)
		if !got.Refused || got.Via != tt.via || !got.Wrapper || got.Shell != tt.shell || !strings.Contains(got.Why, tt.why) {
			t.Errorf("CheckTrigger(%q) = %+v, want refused via %s (shell %v) with %q", tt.cmd, got, tt.via, tt.shell, tt.why)
		}
	}
}

// A wrapper that runs a known agent named on the line is accepted: the
// agent's exit ends the wrapper, so nothing else reads the window's
// terminal (docs/agents.md, section 2).
func TestCheckTriggerAcceptsWrappedAgents(t *testing.T) {
	tests := map[string]string{
		"sudo -u dev claude":                                        Claude,
		"sudo -u dev -E HOME=/home/dev claude --resume":             Claude,
		"sudo -i claude":                                            Claude,
		"doas -u dev codex --no-daemon":                             Codex,
		"su dev -c claude":                                          Claude,
		"su -c 'codex --no-daemon' - dev":                           Codex,
		"runuser -u dev -- claude":                                  Claude,
		"runuser -u dev claude --resume":                            Claude,
		"script --timing -q -c claude /dev/null":                    Claude,
		"script -q -c claude /dev/null":                             Claude,
		"script -qfc 'claude --resume' /tmp/typescript":             Claude,
		"script -q /dev/null claude":                                Claude,
		"ssh -t host claude":                                        Claude,
		"ssh -tt -p 2222 dev@host codex --no-daemon":                Codex,
		"docker run -it --rm -v /src:/src -w /src agents claude":    Claude,
		"docker run -it --entrypoint claude agents --resume":        Claude,
		"podman run -it --rm agents codex":                          Codex,
		"docker exec -it -u dev box claude":                         Claude,
		"docker --context remote run -it img claude":                Claude,
		"podman container run -it img claude":                       Claude,
		"unbuffer -p claude":                                        Claude,
		"env HOME=/h sudo -u dev env PATH=/p claude":                Claude,
		"sudo -u dev bash -c claude":                                Claude,
		"sudo -u dev node /n/@anthropic-ai/claude-code/cli.js":      Claude,
		"ssh -t host sudo -u dev claude":                            Claude,
		"sudo -u dev /home/dev/.local/bin/scriptedagent --no-color": "scriptedagent",
	}
	for cmd, want := range tests {
		if got := CheckTrigger(cmd, []string{"scriptedagent"}); got.Refused || got.Agent != want {
			t.Errorf("CheckTrigger(%q) = %+v, want accepted with %s", cmd, got, want)
		}
	}
	// A configured agent counts only when configured.
	if got := CheckTrigger("sudo -u dev scriptedagent", nil); !got.Refused || got.Why != "it runs scriptedagent, which is not a known agent" {
		t.Errorf("an unconfigured program under sudo: %+v", got)
	}
}

// What runs on the window's terminal, in Judge's sight, is judged as
// before: a shell first is refused (no Via), anything else accepted; a
// runner whose options cannot be read is refused, naming it.
func TestCheckTriggerWithoutWrappers(t *testing.T) {
	for _, cmd := range []string{"claude", "cat", "sh -c 'stty raw -echo; exec cat > rec'", "env SCRIPTED_AGENT_PLAN='a b' /bin/scriptedagent",
		"echo setting up; exec sh", "bash build.sh", "nice -n 5 claude", "timeout --foreground 8h codex", "stdbuf -oL -eL cat",
		"env -S 'claude --resume'", "setsid -w claude", "taskset -c 0,1 claude", "chrt -b 0 claude", "ionice -c 3 claude", "time claude",
		"env", "nohup cat", "command claude"} {
		if got := CheckTrigger(cmd, nil); got.Refused {
			t.Errorf("CheckTrigger(%q) = %+v, want accepted", cmd, got)
		}
	}
	for _, cmd := range []string{"", "bash", "env -i PS1='$ ' bash --norc -i", "exec $SHELL", "nice -n 5 bash", "timeout 8h zsh -l",
		"env -S 'bash -i'", "env -u HOME -- bash", "stdbuf -oL fish", "setsid bash", "nohup nice bash", "bash; echo bye"} {
		if got := CheckTrigger(cmd, nil); !got.Refused || !got.Shell || got.Via != "" || got.Wrapper {
			t.Errorf("CheckTrigger(%q) = %+v, want refused as a shell", cmd, got)
		}
	}
	if got := CheckTrigger("nice --bogus claude", nil); !got.Refused || got.Via != "nice" || got.Wrapper || got.Why != "it has an option tamq does not read (--bogus)" {
		t.Errorf("a runner's unknown option: %+v", got)
	}
}
