package queue

import (
	"strconv"
	"syscall"
)

// EndpointState is whether an endpoint's tmux server can be reached.
type EndpointState string

const (
	Connected    EndpointState = "connected"
	Disconnected EndpointState = "disconnected"
)

// WindowMode is whether coordination-engine may wake a window's agent.
type WindowMode string

const (
	// Trigger: coordination-engine may wake the agent with a message.
	Trigger WindowMode = "trigger"
	// Manual: only people and other agents write to it.
	Manual WindowMode = "manual"
)

// AgentEnd is how a window's agent ended, as tamq last saw it. A restart
// never brings such a window back: a person quit the agent or closed the
// window, or the command could not run, and running it again would revive
// what they ended (and route its To: lines again).
type AgentEnd string

const (
	// AgentExited: the window's program exited; its pane is dead.
	AgentExited AgentEnd = "exited"
	// WindowClosed: the window was closed while its tmux server ran.
	WindowClosed AgentEnd = "closed"
)

// The value sets of the enums, in the order the schema lists them: the
// schema's CHECK constraints are tested against these.
var (
	States         = []State{Queued, Delivering, Injected, AwaitingAck, Acknowledged, Failed, Cancelled, Held}
	SenderKinds    = []SenderKind{FromWorker, FromOperator, FromCoordination, FromReplay}
	EndpointStates = []EndpointState{Connected, Disconnected}
	WindowModes    = []WindowMode{Trigger, Manual}
	AgentEnds      = []AgentEnd{AgentExited, WindowClosed}
)

// Names spells enum values as plain strings (for flags and completions).
func Names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Endpoint is a tmux server tamq delivers into, with its repo windows.
type Endpoint struct {
	ID         string // tmux-amq-<tmux server pid>
	TmuxSocket string
	ServerPID  int
	Session    string
	State      EndpointState
	// Forgotten: the operator said it is gone for good; it is kept for
	// history only.
	Forgotten bool
	Windows   []Window
}

// Window is the one window of a repo on an endpoint.
type Window struct {
	Repo     string
	RepoPath string
	WindowID string // tmux @N
	PaneID   string // tmux %N
	// Mode is empty only in a registration of a reused window: it keeps the
	// mode recorded for it.
	Mode    WindowMode
	Command string // "" runs the user's shell
	// Reused says, in a registration, that the window existed already: its
	// recorded command stays (a running window's command cannot change).
	Reused bool
	// Ended says how its agent ended ("" while it runs, or nothing was
	// seen), and ExitStatus with what status it exited (-1: not known).
	Ended      AgentEnd
	ExitStatus int
}

// EndText says how a window's agent ended, in words, or "" while it runs:
// "its agent exited with status 127 (command not found)", "its window was
// closed".
func (w Window) EndText() string {
	switch w.Ended {
	case AgentExited:
		return "its agent exited" + ExitText(w.ExitStatus)
	case WindowClosed:
		return "its window was closed"
	}
	return ""
}

// EndedByShutdown says whether the window's program was ended by the
// signal a shutdown sends every process (SIGHUP when its terminal goes,
// SIGTERM): at a reboot the agents' windows may die a moment before their
// tmux server, and they were running, not quit. Only where the server is
// gone too does a restart read it so; a dead pane on a server that runs
// stays as it is.
func (w Window) EndedByShutdown() bool {
	return w.Ended == AgentExited && (w.ExitStatus == 128+int(syscall.SIGHUP) || w.ExitStatus == 128+int(syscall.SIGTERM))
}

// ExitText is " with status N (what it means)", or "" when the status is
// not known (-1).
func ExitText(status int) string {
	if status < 0 {
		return ""
	}
	text := " with status " + strconv.Itoa(status)
	if m := ExitMeaning(status); m != "" {
		text += " (" + m + ")"
	}
	return text
}

// ExitMeaning is what a shell's exit status says beyond failure: 127 and
// 126 are the shell's own (the command was not found, or found but could
// not be run), 128+n a signal n. "" for the others.
func ExitMeaning(status int) string {
	switch {
	case status == 127:
		return "command not found"
	case status == 126:
		return "command found but not executable"
	case status > 128 && status < 128+65:
		return "ended by signal " + strconv.Itoa(status-128) + ", " + syscall.Signal(status-128).String()
	}
	return ""
}
