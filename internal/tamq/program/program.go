// Package program says what a program is, from its command line: a known
// coding agent, a shell, or another program; and, from the foreground of a
// window's terminal and the window's command, whether an agent runs there
// now. tamq delivers into a window, and routes the To: lines its output
// shows, only while an agent runs in it: a shell runs what it is given, so a
// message typed into one is a command (docs/delivery.md). No I/O: the
// process table is read by internal/proc.
package program

import (
	"path/filepath"
	"slices"
	"strings"
)

// The known agents, by the name they go by.
const (
	Claude = "claude"
	Codex  = "codex"
	Gemini = "gemini"
)

// NoAgentRunning is the wait reason of a window whose foreground program is
// not an agent (a shell, or any other program): its messages wait, and say
// so in history, status and top.
const NoAgentRunning = "no agent running"

// Kind is what a program is.
type Kind int

const (
	// Other is any program that is neither an agent nor a shell.
	Other Kind = iota
	// Agent is a known coding agent (or a name the configuration adds).
	Agent
	// Shell is an interactive shell: one that reads commands from its
	// terminal (not one running a script or a -c command).
	Shell
)

// Program is a program as its command line shows it.
type Program struct {
	Kind Kind
	// Name is the agent's or shell's name, or the program's base name.
	Name string
}

// shells are the shells' names; a login shell's argv[0] starts with "-".
var shells = []string{"sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "tcsh", "csh", "ash", "nu", "elvish", "xonsh", "pwsh", "busybox"}

// interpreters run a script named by a later argument: the agent is the
// script (npm installs Claude Code as cli.js and Codex as codex.js, run by
// node).
var interpreters = []string{"node", "nodejs", "bun", "deno", "python", "python3", "tsx", "ts-node"}

// Classify says what the program of argv is. extra are names the
// configuration adds to the known agents (delivery.agent_programs).
func Classify(argv []string, extra []string) Program {
	if len(argv) == 0 {
		return Program{}
	}
	name := base(argv[0])
	if a := agentName(name, extra); a != "" {
		return Program{Kind: Agent, Name: a}
	}
	if slices.Contains(interpreters, name) || strings.HasPrefix(name, "python3.") {
		if script := scriptOf(argv[1:]); script != "" {
			if a := scriptAgent(script, extra); a != "" {
				return Program{Kind: Agent, Name: a}
			}
		}
		return Program{Kind: Other, Name: name}
	}
	if shell := strings.TrimPrefix(name, "-"); slices.Contains(shells, shell) {
		if strings.HasPrefix(name, "-") || interactive(argv[1:]) {
			return Program{Kind: Shell, Name: shell}
		}
		// A shell running a script or a -c command is that script.
		return Program{Kind: Other, Name: shell}
	}
	return Program{Kind: Other, Name: name}
}

// agentName is the agent a program's base name names, or "".
func agentName(name string, extra []string) string {
	switch strings.TrimSuffix(name, ".exe") {
	case Claude, "claude-code":
		return Claude
	case Codex:
		return Codex
	case Gemini:
		return Gemini
	}
	if slices.Contains(extra, name) {
		return name
	}
	return ""
}

// scriptAgent names the agent an interpreter's script is: the script's
// base name without .js/.mjs/.cjs/.ts/.py, or, for npm's layouts, the
// package the script belongs to (…/@anthropic-ai/claude-code/cli.js,
// …/@openai/codex/bin/codex.js, …/@google/gemini-cli/dist/index.js).
func scriptAgent(script string, extra []string) string {
	name := base(script)
	for _, ext := range []string{".js", ".mjs", ".cjs", ".ts", ".py"} {
		name = strings.TrimSuffix(name, ext)
	}
	if a := agentName(name, extra); a != "" {
		return a
	}
	switch {
	case strings.Contains(script, "/@anthropic-ai/claude-code/"):
		return Claude
	case strings.Contains(script, "/@openai/codex/"):
		return Codex
	case strings.Contains(script, "/@google/gemini-cli/"):
		return Gemini
	}
	return ""
}

// scriptOf is the script an interpreter runs: its first argument that is
// not an option. Options that take a value in the next argument are not
// known here; an interpreter run with one is taken as running no agent.
func scriptOf(args []string) string {
	for _, a := range args {
		if a == "--" {
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// interactive says whether a shell run with args reads its commands from
// the terminal: no -c, and no script to run. (Options only: -i, -l,
// --norc, --login, …)
func interactive(args []string) bool {
	for i, a := range args {
		switch {
		case a == "-c" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a[1:], "c")):
			return false
		case a == "-" || a == "--":
			return i == len(args)-1
		case a == "-i" || a == "-s":
			// -s reads commands from standard input: the terminal.
			continue
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			continue
		default:
			return false // a script file
		}
	}
	return true
}

// base is the last element of a path, as a program's name.
func base(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(strings.Trim(path, `'"`))
}

// Words splits a command line as a POSIX shell would split its simple words:
// blanks separate words, single quotes keep everything, double quotes keep
// all but the backslash before $ ` " \ and newline, a backslash outside
// quotes keeps the next character. Nothing is expanded; operators (; | &)
// are left inside the words they touch.
func Words(cmd string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				w.WriteString(cmd[i+1:])
				i = len(cmd)
				break
			}
			w.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte("$`\"\\\n", cmd[i+1]) >= 0 {
					i++
				}
				w.WriteByte(cmd[i])
			}
		case c == '\\' && i+1 < len(cmd):
			inWord = true
			i++
			w.WriteByte(cmd[i])
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// assignment reports a shell variable assignment word, NAME=value.
func assignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// CommandIsShell says whether a window's command (as `tamq open --command`
// recorded it; "" is the user's shell) runs an interactive shell, once the
// variable assignments and the runners before the program (exec, env,
// nohup, nice, …) are set aside: `bash`, `env -i PS1='$ ' bash --norc -i`,
// `zsh -l`; or a wrapper that starts one (`ssh host`, `script`, `sudo -s`).
// A shell given a script or -c is not: it runs that script (and what the
// script starts is judged when it runs). Only the line's first command
// counts: a later one runs in the window's terminal, where Judge sees it.
func CommandIsShell(cmd string) bool {
	segs := segments(cmd)
	return len(segs) == 0 || resolve(segs[0], nil).shell
}

// TriggerCheck says whether a window's command may have prompts typed into
// it (trigger mode): Refused when what reads them could be a shell, which
// would run them as commands.
type TriggerCheck struct {
	Refused bool
	// Shell: the command's program is an interactive shell (Via empty),
	// or a wrapper starts one (Via names it).
	Shell bool
	// Via names the wrapper (script, ssh, sudo, …) whose program is not a
	// known agent, or the runner whose arguments tamq cannot read; "" for
	// a plain shell.
	Via string
	// Wrapper: Via is a wrapper (it hides what it runs from Judge), not a
	// runner.
	Wrapper bool
	// Why says what Via runs, as a clause ("it runs a shell", "it runs
	// vim, which is not a known agent", "it is a terminal multiplexer …").
	Why string
	// Agent names the agent a wrapper runs, when the command is accepted
	// through one ("claude" for `sudo -u dev claude`).
	Agent string
}

// CheckTrigger judges a window's command for trigger mode (cmd as `tamq
// open --command` gives it, "" for the user's shell; extra as Classify's).
// Refused: the command is a shell (CommandIsShell), or one of its commands
// runs under a wrapper (a terminal wrapper, remote shell, container or
// privilege changer) anything but a known agent named on the line. A
// wrapper hides its program from the foreground check (Judge sees the
// wrapper), so what it runs must be known before it starts. Programs that
// only run another on the same terminal (env, nice, timeout, …) are looked
// through; what they run is judged as if run directly.
func CheckTrigger(cmd string, extra []string) TriggerCheck {
	segs := segments(cmd)
	if len(segs) == 0 {
		return TriggerCheck{Refused: true, Shell: true, Why: "it runs your shell"}
	}
	var agent string
	for i, seg := range segs {
		l := resolve(seg, extra)
		switch {
		case l.wrapper == "" && l.why != "" && i == 0:
			return TriggerCheck{Refused: true, Via: l.via, Why: l.why}
		case l.wrapper == "" && l.shell && i == 0:
			return TriggerCheck{Refused: true, Shell: true, Why: "it runs a shell"}
		case l.wrapper == "":
			// On the window's terminal: a shell a later command becomes
			// takes the foreground, where Judge sees it.
			continue
		case l.why != "":
			return TriggerCheck{Refused: true, Via: l.wrapper, Wrapper: true, Why: l.why}
		case l.shell:
			return TriggerCheck{Refused: true, Shell: true, Via: l.wrapper, Wrapper: true, Why: "it runs a shell"}
		case l.program.Kind != Agent:
			return TriggerCheck{Refused: true, Via: l.wrapper, Wrapper: true, Why: "it runs " + l.program.Name + ", which is not a known agent"}
		case agent == "":
			agent = l.program.Name
		}
	}
	return TriggerCheck{Agent: agent}
}

// CommandAgent names the agent whose screen rules apply to a window's
// command: the first of its words that names a known agent (claude, codex,
// an npm shim such as node_modules/.bin/codex), else "". Any word counts,
// since a command line may start an agent in many ways (`exec claude`,
// `cd x && codex`).
func CommandAgent(cmd string) string {
	for _, w := range Words(cmd) {
		// A quoted word may hold a command line of its own (sh -c '…').
		for _, part := range strings.FieldsFunc(w, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()", r) }) {
			if a := agentName(base(part), nil); a != "" {
				return a
			}
		}
	}
	return ""
}

// ArgvCommand is the window's command as a broker's child argv carries it:
// `/bin/sh -c CMD` (what tamq open runs for --command) is CMD, a bare shell
// (tamq open without --command) is "", anything else its words joined.
func ArgvCommand(argv []string) string {
	switch {
	case len(argv) == 3 && argv[1] == "-c" && Classify(argv[:1], nil).Name == "sh":
		return argv[2]
	case len(argv) == 1 && Classify(argv, nil).Kind == Shell:
		return ""
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = quote(a)
	}
	return strings.Join(words, " ")
}

// quote writes a word so that Words reads it back whole.
func quote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`;&|()<>*?[]{}~#!") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// BrokerChild says whether argv is a tamq broker's (`tamq broker … --
// COMMAND…`), and returns the command it runs.
func BrokerChild(argv []string) ([]string, bool) {
	if len(argv) < 3 || !strings.HasPrefix(base(argv[0]), "tamq") || argv[1] != "broker" {
		return nil, false
	}
	i := slices.Index(argv, "--")
	if i < 0 {
		return nil, false
	}
	return argv[i+1:], true
}

// Foreground is the program in the foreground of a window's terminal, as
// internal/proc reads it.
type Foreground struct {
	// Argv is the foreground group leader's command line; nil when there is
	// none to read (no foreground group, or its leader has exited).
	Argv []string
	// OwnGroup says the foreground group is the window's own process's
	// (what runs its command): the command itself is in the foreground.
	OwnGroup bool
}

// Verdict is whether an agent runs in a window now.
type Verdict struct {
	// Running: an agent is the foreground program.
	Running bool
	// Program names the foreground program ("claude", "bash", "vim"); ""
	// when none could be read.
	Program string
	// Rules names the agent whose screen rules apply (Claude, Codex,
	// Gemini), ""
	// for the generic rules.
	Rules string
}

// Judge says whether an agent runs in a window whose terminal shows fg and
// whose command is command ("" for the user's shell). The foreground program
// is an agent when it is a known agent (wherever it was started: by hand in
// the window's shell counts), or when it is the window's own command (its
// process group) and that command is not an interactive shell, nor has it
// become one (`exec bash` at the end of a script), nor runs under a wrapper
// anything but a known agent (CheckTrigger): in front is then the wrapper
// (ssh, script, sudo), and a shell behind it would take what is typed.
func Judge(fg Foreground, command string, extra []string) Verdict {
	if len(fg.Argv) == 0 {
		return Verdict{}
	}
	p := Classify(fg.Argv, extra)
	v := Verdict{Program: p.Name}
	switch {
	case p.Kind == Agent:
		v.Running = true
		v.Rules = rulesOf(p.Name)
	case fg.OwnGroup && p.Kind != Shell && !CheckTrigger(command, extra).Refused:
		v.Running = true
		v.Rules = rulesOf(CommandAgent(command))
	}
	return v
}

// rulesOf is the screen rules of an agent: Claude Code's, Codex's and
// Gemini CLI's are known; any other agent is read by the generic rules.
func rulesOf(agent string) string {
	if agent == Claude || agent == Codex || agent == Gemini {
		return agent
	}
	return ""
}

// AgentName is the name of the agent that argv runs (as Classify names
// it), or "" when it runs none.
func AgentName(argv []string, extra []string) string {
	if p := Classify(argv, extra); p.Kind == Agent {
		return p.Name
	}
	return ""
}
