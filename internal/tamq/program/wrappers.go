package program

import (
	"slices"
	"strings"
	"sync"
)

// A command line may start its program through others that only run it:
// runners (env, nice, nohup, stdbuf, timeout, …), which leave it on the
// window's terminal, and wrappers (script, ssh, sudo, doas, su, docker run,
// …), which put it on a terminal of their own or run it as someone else.
// tamq judges what a window runs by its terminal's foreground program
// (Judge); a runner hides nothing from that, a wrapper hides everything:
// the foreground is the wrapper, whatever runs inside it (an agent, or a
// shell that would run a typed prompt as a command). So a wrapper counts as
// an agent only when the command line names the program it runs and that is
// a known agent (`sudo -u dev claude`, `script -q -c claude /dev/null`,
// `ssh -t host claude`), and the agent's exit ends the wrapper. A
// multiplexer (screen, tmux) never counts: it keeps windows of its own,
// which may run shells, and outlives the agent.

// wrapKind says how a program runs the program it is given.
type wrapKind int

const (
	// runner runs it in its place or as its child on the same terminal.
	runner wrapKind = iota + 1
	// wrapper runs it on a terminal of its own, on another machine, in a
	// container or as another user.
	wrapper
	// opaque is a wrapper whose arguments tamq does not read (or whose
	// program is a script's), or a multiplexer: what it runs is not known.
	opaque
)

// wrapped is what a runner or wrapper runs, as its arguments say.
type wrapped struct {
	// argv is the program and its arguments, when one is named.
	argv []string
	// shell: it starts an interactive shell (nothing else named to run,
	// or an option that asks for one: sudo -s, doas -s).
	shell bool
	// why says why what it runs cannot be told, when neither argv nor
	// shell says it ("options tamq does not read (-X)").
	why string
}

type wrapSpec struct {
	kind wrapKind
	// read reads the program's arguments (after its name).
	read func(args []string) wrapped
	// why says what an opaque one is, for the message ("it is …").
	why string
}

// wrappers are the programs tamq looks through, by base name. Built on
// first use: every tamq command links this package, few judge a command.
var wrappers = sync.OnceValue(func() map[string]wrapSpec {
	return map[string]wrapSpec{
		// Runners.
		"exec":    {kind: runner, read: optsThenArgv(optSpec{valued: "a", flags: "cl"}, 0)},
		"command": {kind: runner, read: optsThenArgv(optSpec{flags: "p"}, 0)},
		"env":     {kind: runner, read: readEnv},
		"nohup":   {kind: runner, read: optsThenArgv(optSpec{}, 0)},
		"nice":    {kind: runner, read: optsThenArgv(optSpec{valued: "n", long: []string{"adjustment"}, numeric: true}, 0)},
		"stdbuf":  {kind: runner, read: optsThenArgv(optSpec{valued: "ioe", long: []string{"input", "output", "error"}}, 0)},
		"timeout": {kind: runner, read: optsThenArgv(optSpec{valued: "ks", flags: "v", long: []string{"kill-after", "signal"},
			longFlags: []string{"foreground", "preserve-status", "verbose"}}, 1)},
		"ionice": {kind: runner, read: readIonice},
		"chrt": {kind: runner, read: readNoPid(optSpec{flags: "abdefimorRv", valued: "TPD",
			long: []string{"sched-runtime", "sched-period", "sched-deadline"}, longFlags: []string{"all-tasks", "batch", "deadline", "fifo", "idle", "other", "rr", "reset-on-fork", "verbose"}}, 1, "p")},
		"taskset": {kind: runner, read: readNoPid(optSpec{flags: "ac", longFlags: []string{"all-tasks", "cpu-list"}}, 1, "p")},
		"setsid":  {kind: runner, read: optsThenArgv(optSpec{flags: "cfw", longFlags: []string{"ctty", "fork", "wait"}}, 0)},
		"time": {kind: runner, read: optsThenArgv(optSpec{valued: "fo", flags: "apqv", long: []string{"format", "output"},
			longFlags: []string{"append", "portability", "quiet", "verbose"}}, 0)},

		// Wrappers: terminal wrappers, remote shells, containers, privilege
		// changers.
		"script":   {kind: wrapper, read: readScript},
		"unbuffer": {kind: wrapper, read: optsThenArgv(optSpec{flags: "p"}, 0)},
		"ssh":      {kind: wrapper, read: readSSH},
		"sudo":     {kind: wrapper, read: readSudo},
		"doas":     {kind: wrapper, read: readDoas},
		"su":       {kind: wrapper, read: readSu},
		"runuser":  {kind: wrapper, read: readSu},
		"pkexec": {kind: wrapper, read: orShell(optsThenArgv(optSpec{long: []string{"user"},
			longFlags: []string{"keep-cwd", "disable-internal-agent"}}, 0))},
		"docker": {kind: wrapper, read: readContainer},
		"podman": {kind: wrapper, read: readContainer},

		// Multiplexers: their windows are out of tamq's sight.
		"screen": {kind: opaque, why: "it is a terminal multiplexer: it keeps windows of its own, which may run shells, and tamq cannot see which one is in front"},
		"tmux":   {kind: opaque, why: "it is a terminal multiplexer: it keeps windows of its own, which may run shells, and tamq cannot see which one is in front"},
		"zellij": {kind: opaque, why: "it is a terminal multiplexer: it keeps windows of its own, which may run shells, and tamq cannot see which one is in front"},
		"byobu":  {kind: opaque, why: "it is a terminal multiplexer: it keeps windows of its own, which may run shells, and tamq cannot see which one is in front"},
		"dtach":  {kind: opaque, why: "it is a terminal multiplexer: what it runs outlives the window's command, out of tamq's sight"},
		"abduco": {kind: opaque, why: "it is a terminal multiplexer: what it runs outlives the window's command, out of tamq's sight"},
		// Scripted terminals.
		"expect": {kind: opaque, why: "it runs a script: what the script spawns, and what it types there, is the script's"},
		// Other ways into a shell elsewhere, whose arguments tamq does not read.
		"mosh":          {kind: opaque, why: "it is a remote shell whose arguments tamq does not read"},
		"telnet":        {kind: opaque, why: "it is a remote login"},
		"rlogin":        {kind: opaque, why: "it is a remote login"},
		"rsh":           {kind: opaque, why: "it is a remote shell whose arguments tamq does not read"},
		"run0":          {kind: opaque, why: "it is a privilege changer whose arguments tamq does not read"},
		"machinectl":    {kind: opaque, why: "it runs a shell or a program in a container, by arguments tamq does not read"},
		"systemd-run":   {kind: opaque, why: "it runs a program in a unit of its own, by arguments tamq does not read"},
		"nsenter":       {kind: opaque, why: "it runs a shell or a program in other namespaces, by arguments tamq does not read"},
		"chroot":        {kind: opaque, why: "it runs a shell or a program in another root, by arguments tamq does not read"},
		"unshare":       {kind: opaque, why: "it runs a shell or a program in new namespaces, by arguments tamq does not read"},
		"kubectl":       {kind: opaque, why: "it runs a program in a container, by arguments tamq does not read"},
		"lxc":           {kind: opaque, why: "it runs a program in a container, by arguments tamq does not read"},
		"incus":         {kind: opaque, why: "it runs a program in a container, by arguments tamq does not read"},
		"distrobox":     {kind: opaque, why: "it runs a shell or a program in a container, by arguments tamq does not read"},
		"toolbox":       {kind: opaque, why: "it runs a shell or a program in a container, by arguments tamq does not read"},
		"flatpak-spawn": {kind: opaque, why: "it runs a program outside its sandbox, by arguments tamq does not read"},
	}
})

// launch is what a simple command runs, looked through runners and
// wrappers.
type launch struct {
	// program is what runs at the end: Classify's verdict on argv.
	program Program
	argv    []string
	// wrapper is the outermost wrapper ("" when none).
	wrapper string
	// shell: an interactive shell runs at the end (named, or started by
	// a wrapper given nothing to run).
	shell bool
	// via and why say which runner or wrapper's program cannot be told,
	// and why ("it has an option tamq does not read (-X)"); "" when it can.
	via, why string
}

// maxDepth bounds how many runners and wrappers are looked through.
const maxDepth = 16

// resolve looks through the runners and wrappers at the head of argv.
func resolve(argv []string, extra []string) launch {
	var l launch
	for depth := 0; ; depth++ {
		argv = skipAssignments(argv)
		if len(argv) == 0 {
			// Nothing named: a wrapper given nothing runs the shell (ssh
			// host, script); a command line of assignments runs nothing.
			l.shell = l.wrapper != ""
			return l
		}
		if depth == maxDepth {
			l.via, l.why = base(argv[0]), "it is run through too many programs that run programs"
			return l
		}
		if isShellVar(argv[0]) {
			// The user's shell by name: what it expands to is not known
			// here, but a shell it is.
			l.argv, l.program = argv, Program{Kind: Other, Name: "$SHELL"}
			l.shell = interactive(argv[1:])
			if !l.shell {
				return lookThroughShellC(l, argv[1:], extra, depth)
			}
			return l
		}
		name := strings.TrimSuffix(base(argv[0]), ".exe")
		spec, ok := wrappers()[name]
		if !ok || agentName(name, extra) != "" {
			l.argv, l.program = argv, Classify(argv, extra)
			l.shell = l.program.Kind == Shell
			if l.program.Kind == Other && slices.Contains(shells, l.program.Name) {
				return lookThroughShellC(l, argv[1:], extra, depth)
			}
			return l
		}
		if spec.kind != runner && l.wrapper == "" {
			l.wrapper = name
		}
		if spec.kind == opaque {
			l.argv, l.program, l.via, l.why = argv, Program{Kind: Other, Name: name}, name, spec.why
			return l
		}
		w := spec.read(argv[1:])
		switch {
		case w.why != "":
			l.argv, l.program, l.via, l.why = argv, Program{Kind: Other, Name: name}, name, w.why
			return l
		case w.shell:
			l.argv, l.program, l.shell = argv, Program{Kind: Shell, Name: name}, true
			return l
		case len(w.argv) == 0 && spec.kind == runner:
			// A runner given nothing to run is a program of its own
			// (env alone prints the environment).
			l.argv, l.program = argv, Program{Kind: Other, Name: name}
			return l
		}
		argv = w.argv
	}
}

// lookThroughShellC reads a shell run with -c: under a wrapper, `bash -c
// 'claude'` runs claude; a command line of more than one command is not
// read (what it runs at the end is not known here). Outside a wrapper the
// shell is the program, as before (its command line runs on the window's
// terminal, in tamq's sight).
func lookThroughShellC(l launch, args []string, extra []string, depth int) launch {
	if l.wrapper == "" {
		return l
	}
	line, ok := shellCommand(args)
	if !ok {
		l.via, l.why = l.wrapper, "it runs "+l.program.Name+" with arguments tamq does not read"
		return l
	}
	words, ok := plainCommand(line)
	if !ok {
		l.via, l.why = l.wrapper, "it runs a shell's command line ("+quote(line)+"), and tamq cannot tell which program that ends in"
		return l
	}
	inner := resolve(words, extra)
	inner.wrapper = l.wrapper
	return inner
}

// shellCommand is the command line of a shell run as `sh -c LINE` (-lc,
// -ec, … included).
func shellCommand(args []string) (string, bool) {
	for i, a := range args {
		switch {
		case a == "-c" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a[1:], "c"):
			if i+1 < len(args) && i+2 >= len(args) {
				return args[i+1], true
			}
			return "", false
		case strings.HasPrefix(a, "-"):
			continue
		default:
			return "", false
		}
	}
	return "", false
}

// plainCommand is the words of a command line that a shell runs as one
// simple command: no operator, redirection, expansion or substitution
// (outside single quotes nothing of `;&|<>()$` and backquote, no newline).
// Only such a line says which program it runs.
func plainCommand(line string) ([]string, bool) {
	inSingle := false
	for _, c := range line {
		switch {
		case c == '\'':
			inSingle = !inSingle
		case inSingle:
		case strings.ContainsRune(";&|<>()$`\n\\*?[{", c):
			return nil, false
		}
	}
	words := Words(line)
	return words, len(words) > 0
}

func isShellVar(w string) bool { return w == "$SHELL" || w == "${SHELL}" }

// skipAssignments drops the NAME=value words before a program.
func skipAssignments(argv []string) []string {
	for len(argv) > 0 && assignment(argv[0]) {
		argv = argv[1:]
	}
	return argv
}

// optSpec is the options a program takes before what it runs.
type optSpec struct {
	valued    string   // short options that take a value (-u USER, -uUSER)
	flags     string   // short options that take none
	long      []string // long options that take a value (--user USER, --user=USER)
	longFlags []string // long options that take none
	// numeric: -N is an option (nice -10).
	numeric bool
	// permute: options may come after operands (util-linux su).
	permute bool
}

// opt is one option read: its name (a short one as its letter) and value.
type opt struct{ name, value string }

// scan reads the options of args; rest is the operands (after the
// options, or all of them when permute). bad names an option it does not
// know, or one that lacks its value.
func (s optSpec) scan(args []string) (opts []opt, rest []string, bad string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(rest, args[i+1:]...), ""
		case a == "-" || !strings.HasPrefix(a, "-"):
			if !s.permute {
				return opts, append(rest, args[i:]...), ""
			}
			rest = append(rest, a)
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			switch {
			case slices.Contains(s.long, name) && hasValue:
				opts = append(opts, opt{name, value})
			case slices.Contains(s.long, name):
				if i+1 == len(args) {
					return nil, nil, a
				}
				i++
				opts = append(opts, opt{name, args[i]})
			case slices.Contains(s.longFlags, name):
				opts = append(opts, opt{name, value})
			default:
				return nil, nil, a
			}
		case s.numeric && isNumber(a[1:]):
			opts = append(opts, opt{"n", a[1:]})
		default:
			for j := 1; j < len(a); j++ {
				c := a[j : j+1]
				switch {
				case strings.Contains(s.flags, c):
					opts = append(opts, opt{c, ""})
				case strings.Contains(s.valued, c) && j+1 < len(a):
					opts = append(opts, opt{c, a[j+1:]})
					j = len(a)
				case strings.Contains(s.valued, c):
					if i+1 == len(args) {
						return nil, nil, a
					}
					i++
					opts = append(opts, opt{c, args[i]})
				default:
					return nil, nil, "-" + c
				}
			}
		}
	}
	return opts, rest, ""
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// has reports whether one of names was given.
func has(opts []opt, names ...string) bool {
	return slices.ContainsFunc(opts, func(o opt) bool { return slices.Contains(names, o.name) })
}

// value is the last value given to one of names.
func value(opts []opt, names ...string) (string, bool) {
	for i := len(opts) - 1; i >= 0; i-- {
		if slices.Contains(names, opts[i].name) {
			return opts[i].value, true
		}
	}
	return "", false
}

func unread(bad string) wrapped {
	return wrapped{why: "it has an option tamq does not read (" + bad + ")"}
}

// optsThenArgv reads options, skips the operands before the program
// (timeout's DURATION), and takes the rest as the program's argv.
func optsThenArgv(s optSpec, operands int) func([]string) wrapped {
	return func(args []string) wrapped {
		_, rest, bad := s.scan(args)
		if bad != "" {
			return unread(bad)
		}
		if len(rest) < operands {
			return wrapped{}
		}
		return wrapped{argv: rest[operands:]}
	}
}

// orShell is read, with a wrapper given nothing to run starting a shell
// (pkexec alone: root's shell).
func orShell(read func([]string) wrapped) func([]string) wrapped {
	return func(args []string) wrapped {
		w := read(args)
		if w.why == "" && len(w.argv) == 0 {
			w.shell = true
		}
		return w
	}
}

// readNoPid reads chrt and taskset: with -p they change a running process
// and run nothing.
func readNoPid(s optSpec, operands int, pid string) func([]string) wrapped {
	s.flags += pid
	s.longFlags = append(s.longFlags, "pid")
	return func(args []string) wrapped {
		opts, rest, bad := s.scan(args)
		switch {
		case bad != "":
			return unread(bad)
		case has(opts, pid, "pid") || len(rest) < operands:
			return wrapped{}
		}
		return wrapped{argv: rest[operands:]}
	}
}

func readIonice(args []string) wrapped {
	s := optSpec{valued: "cnpPu", flags: "t", long: []string{"class", "classdata", "pid", "pgid", "uid"}, longFlags: []string{"ignore"}}
	opts, rest, bad := s.scan(args)
	switch {
	case bad != "":
		return unread(bad)
	case has(opts, "p", "P", "u", "pid", "pgid", "uid"):
		return wrapped{}
	}
	return wrapped{argv: rest}
}

// readEnv reads env (GNU's and BSD's options): its assignments are skipped
// by resolve; -S splits its value into words, as env does.
func readEnv(args []string) wrapped {
	s := optSpec{valued: "uCSP", flags: "i0v", long: []string{"unset", "chdir", "split-string"},
		longFlags: []string{"ignore-environment", "null", "debug", "list-signal-handling", "block-signal", "default-signal", "ignore-signal"}}
	var argv []string
	for len(args) > 0 {
		if args[0] == "-" { // the old spelling of -i
			args = args[1:]
			continue
		}
		opts, rest, bad := s.scan(args)
		if bad != "" {
			return unread(bad)
		}
		rest = skipAssignments(rest)
		if split, ok := value(opts, "S", "split-string"); ok {
			// env -S 'bash -i' runs bash -i.
			rest = append(Words(split), rest...)
		}
		if len(rest) > 0 && strings.HasPrefix(rest[0], "-") && rest[0] != "-" {
			args = rest // options after an assignment or -S
			continue
		}
		argv = rest
		break
	}
	return wrapped{argv: argv}
}

// readScript reads script: util-linux's -c COMMAND (run by the user's
// shell), or BSD's script FILE COMMAND…; with neither it starts a shell.
func readScript(args []string) wrapped {
	s := optSpec{valued: "cEIOBmTo", flags: "aefqhkrdF", long: []string{"command", "echo", "log-in", "log-out", "log-io", "logging-format", "log-timing", "output-limit"},
		longFlags: []string{"append", "return", "flush", "force", "quiet", "timing"}}
	// -t takes its file only attached (-tFILE).
	var clean []string
	for _, a := range args {
		if strings.HasPrefix(a, "-t") && !strings.HasPrefix(a, "--") {
			continue
		}
		clean = append(clean, a)
	}
	opts, rest, bad := s.scan(clean)
	if bad != "" {
		return unread(bad)
	}
	if line, ok := value(opts, "c", "command"); ok {
		return commandLine("script -c", line)
	}
	if len(rest) > 1 {
		argv := rest[1:]
		if argv[0] == "--" {
			argv = argv[1:]
		}
		if len(argv) > 0 {
			return wrapped{argv: argv}
		}
	}
	return wrapped{shell: true}
}

// commandLine is what a command line run by a shell runs: a plain simple
// command says its program; anything more is not read.
func commandLine(what, line string) wrapped {
	if strings.TrimSpace(line) == "" {
		return wrapped{shell: true}
	}
	words, ok := plainCommand(line)
	if !ok {
		return wrapped{why: "its command line (" + what + " " + quote(line) + ") is for a shell, and tamq cannot tell which program it ends in"}
	}
	return wrapped{argv: words}
}

// readSSH reads ssh: options, the destination, options again (OpenSSH
// reads them after it too), then the remote command, which the remote
// user's shell runs. No remote command: a remote login shell.
func readSSH(args []string) wrapped {
	s := optSpec{valued: "BbcDEeFIiJLlmOoPpQRSWw", flags: "46AaCfGgKkMNnqsTtVvXxYy"}
	opts, rest, bad := s.scan(args)
	if bad != "" {
		return unread(bad)
	}
	if len(rest) == 0 {
		return wrapped{why: "it names no destination"}
	}
	more, cmd, bad := s.scan(rest[1:])
	if bad != "" {
		return unread(bad)
	}
	opts = append(opts, more...)
	for _, o := range opts {
		if o.name == "o" && strings.HasPrefix(strings.ToLower(o.value), "remotecommand") {
			return wrapped{why: "its remote command comes from -o RemoteCommand, which tamq does not read"}
		}
	}
	if has(opts, "N", "W") {
		return wrapped{why: "it runs no remote command (-N, -W)"}
	}
	if len(cmd) == 0 {
		return wrapped{shell: true}
	}
	return commandLine("ssh", strings.Join(cmd, " "))
}

// readSudo reads sudo: its options, assignments, then the program; -s and
// -i run the command through a shell, or the shell itself when none.
func readSudo(args []string) wrapped {
	s := optSpec{valued: "CDghpRrTtUu", flags: "AbBEeHiKklLnNPSsVv",
		long: []string{"user", "group", "host", "prompt", "chroot", "chdir", "role", "type", "command-timeout", "other-user", "close-from"},
		longFlags: []string{"askpass", "background", "bell", "preserve-env", "edit", "set-home", "login", "remove-timestamp", "reset-timestamp",
			"list", "non-interactive", "preserve-groups", "stdin", "shell", "validate", "version", "help"}}
	opts, rest, bad := s.scan(args)
	switch {
	case bad != "":
		return unread(bad)
	case has(opts, "e", "edit"):
		return wrapped{why: "it edits files (sudo -e), in an editor tamq does not name"}
	case has(opts, "l", "list", "v", "validate", "V", "version", "K", "remove-timestamp", "help"):
		return wrapped{why: "it runs no program"}
	}
	rest = skipAssignments(rest)
	if has(opts, "s", "shell", "i", "login") {
		return commandLine("sudo -s", strings.Join(rest, " "))
	}
	if len(rest) == 0 {
		return wrapped{why: "it names no program"}
	}
	return wrapped{argv: rest}
}

// readDoas reads OpenBSD's doas (and opendoas): -s runs the shell.
func readDoas(args []string) wrapped {
	s := optSpec{valued: "Cu", flags: "Lns"}
	opts, rest, bad := s.scan(args)
	switch {
	case bad != "":
		return unread(bad)
	case has(opts, "s"):
		return wrapped{shell: true}
	case has(opts, "L", "C"):
		return wrapped{why: "it runs no program"}
	case len(rest) == 0:
		return wrapped{why: "it names no program"}
	}
	return wrapped{argv: rest}
}

// readSu reads util-linux's su and runuser: options anywhere; -c COMMAND
// is run by the user's shell; without it, the user's shell. runuser -u
// USER COMMAND… runs the command itself.
func readSu(args []string) wrapped {
	s := optSpec{valued: "cgGswu", flags: "flmpP", permute: true,
		long:      []string{"command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"},
		longFlags: []string{"login", "fast", "preserve-environment", "pty"}}
	// runuser -u USER: options end at the command, which it runs itself.
	first := s
	first.permute = false
	if opts, rest, bad := first.scan(args); bad == "" && has(opts, "u", "user") {
		return wrapped{argv: rest}
	}
	opts, rest, bad := s.scan(args)
	if bad != "" {
		return unread(bad)
	}
	if has(opts, "u", "user") {
		return wrapped{why: "it has an option tamq does not read after -u"}
	}
	if len(rest) > 0 && rest[0] == "-" {
		rest = rest[1:]
	}
	if len(rest) > 1 {
		return wrapped{why: "it passes arguments to the user's shell (" + strings.Join(rest[1:], " ") + ")"}
	}
	if sh, ok := value(opts, "s", "shell"); ok && !slices.Contains(shells, base(sh)) {
		return wrapped{why: "its shell is " + sh + ", which tamq does not read"}
	}
	if line, ok := value(opts, "c", "command", "session-command"); ok {
		return commandLine("su -c", line)
	}
	return wrapped{shell: true}
}

// readContainer reads docker and podman: `run [OPTIONS] IMAGE [COMMAND…]`
// (--entrypoint names the program) and `exec [OPTIONS] CONTAINER
// COMMAND…`, after global options; `container run|exec` too. Any other
// subcommand, and an option tamq does not know, is not read. With no
// command, run starts the image's own, which tamq does not know.
func readContainer(args []string) wrapped {
	global := optSpec{valued: "cHl", flags: "Dv", long: []string{"context", "host", "log-level", "config", "tlscacert", "tlscert", "tlskey",
		"connection", "url", "identity", "root", "runroot", "storage-driver", "cgroup-manager", "events-backend", "runtime", "tmpdir", "module"},
		longFlags: []string{"debug", "tls", "tlsverify", "remote", "syslog"}}
	_, rest, bad := global.scan(args)
	if bad != "" {
		return unread(bad)
	}
	if len(rest) > 0 && rest[0] == "container" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return wrapped{why: "it names no subcommand"}
	}
	sub := rest[0]
	common := []string{"env", "env-file", "user", "workdir", "detach-keys"}
	commonFlags := []string{"detach", "interactive", "tty", "privileged", "help"}
	var s optSpec
	switch sub {
	case "run", "create":
		s = optSpec{valued: "acehlmpuvw", flags: "diPqt",
			long: append([]string{"add-host", "annotation", "attach", "blkio-weight", "cap-add", "cap-drop", "cgroup-parent", "cgroupns", "cidfile",
				"cpu-period", "cpu-quota", "cpu-shares", "cpus", "cpuset-cpus", "cpuset-mems", "device", "device-cgroup-rule", "dns", "dns-option",
				"dns-search", "domainname", "entrypoint", "expose", "gpus", "group-add", "health-cmd", "health-interval", "health-retries",
				"health-start-period", "health-timeout", "hostname", "ip", "ip6", "ipc", "isolation", "label", "label-file", "link", "log-driver",
				"log-opt", "mac-address", "memory", "memory-reservation", "memory-swap", "memory-swappiness", "mount", "name", "network", "net",
				"network-alias", "pid", "pids-limit", "platform", "publish", "pull", "restart", "runtime", "security-opt", "shm-size",
				"stop-signal", "stop-timeout", "storage-opt", "sysctl", "tmpfs", "ulimit", "userns", "uts", "volume", "volumes-from",
				"arch", "os", "variant", "pod", "secret", "hostuser", "userns-uid-map", "passwd-entry"}, common...),
			longFlags: append([]string{"rm", "init", "read-only", "publish-all", "no-healthcheck", "oom-kill-disable", "sig-proxy", "quiet",
				"replace", "rmi", "systemd", "use-api-version"}, commonFlags...)}
	case "exec":
		s = optSpec{valued: "euw", flags: "dit", long: common, longFlags: commonFlags}
	default:
		return wrapped{why: "tamq does not read what its subcommand `" + sub + "` runs"}
	}
	opts, rest, bad := s.scan(rest[1:])
	if bad != "" {
		return unread(bad)
	}
	if len(rest) == 0 {
		return wrapped{why: "it names no image or container"}
	}
	cmd := rest[1:]
	if ep, ok := value(opts, "entrypoint"); ok {
		if ep == "" {
			return wrapped{why: "its entrypoint is empty, so the image's own command runs, which tamq does not know"}
		}
		cmd = append(Words(ep), cmd...)
	}
	if len(cmd) == 0 {
		return wrapped{why: "it names no command, so the image's own runs, which tamq does not know"}
	}
	return wrapped{argv: cmd}
}

// segments splits a command line into its simple commands, at the
// operators outside quotes (; & | && || newline ( )), each as words.
func segments(cmd string) [][]string {
	var out [][]string
	var cur strings.Builder
	flush := func() {
		if w := Words(cur.String()); len(w) > 0 {
			out = append(out, w)
		}
		cur.Reset()
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				cur.WriteString(cmd[i:])
				i = len(cmd)
				break
			}
			cur.WriteString(cmd[i : i+j+2])
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(cmd) && cmd[j] != '"'; j++ {
				if cmd[j] == '\\' {
					j++
				}
			}
			cur.WriteString(cmd[i:min(j+1, len(cmd))])
			i = j
		case c == '\\' && i+1 < len(cmd):
			cur.WriteString(cmd[i : i+2])
			i++
		case strings.IndexByte(";&|\n()", c) >= 0:
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}
