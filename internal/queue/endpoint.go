package queue

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

// The value sets of the enums, in the order the schema lists them: the
// schema's CHECK constraints are tested against these.
var (
	States         = []State{Queued, Delivering, Injected, AwaitingAck, Acknowledged, Failed, Cancelled, Held}
	SenderKinds    = []SenderKind{FromWorker, FromOperator, FromCoordination, FromReplay}
	EndpointStates = []EndpointState{Connected, Disconnected}
	WindowModes    = []WindowMode{Trigger, Manual}
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
}
