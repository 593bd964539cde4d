package config

import (
	"os/exec"
	"strings"
	"time"
)

// Notify is the engine's [notify] section: a command the engine runs when a
// task starts needing a person and when it stops (docs/notify.md). Only
// coordination-engine reads it. It is off while command is empty; then it
// stays all zero and out of `config show` and the version hash, so a config
// without it keeps the version it had before the section existed.
type Notify struct {
	// Command is an argv run without a shell: its first element an
	// absolute path or a program found on PATH.
	Command []string `toml:"command" json:"command,omitempty"`
	// TimeoutSeconds bounds one run; its process group is killed after.
	TimeoutSeconds int `toml:"timeout_seconds" json:"timeout_seconds,omitempty"`
}

// The bounds of [notify].
const (
	DefaultNotifyTimeout = 10 // seconds
	maxNotifyTimeout     = 300
	maxNotifyArgs        = 64
)

// On says whether the engine notifies: a command is set.
func (n Notify) On() bool { return len(n.Command) > 0 }

// Timeout bounds one run of the command.
func (n Notify) Timeout() time.Duration {
	if n.TimeoutSeconds == 0 {
		return DefaultNotifyTimeout * time.Second
	}
	return time.Duration(n.TimeoutSeconds) * time.Second
}

// notifyLookPath finds a program on PATH; tests replace it.
var notifyLookPath = exec.LookPath

// validate checks the argv when it is set: no empty argv or program name,
// and a program that exists now (an absolute path or one on PATH), so a
// typo is said at load and by doctor, not at the first task that needs
// someone.
func (n Notify) validate() error {
	if n.Command != nil && len(n.Command) == 0 {
		return bad("notify.command", "is empty; name a program and its arguments, or leave the key out")
	}
	if len(n.Command) > maxNotifyArgs {
		return bad("notify.command", "%d elements; at most %d", len(n.Command), maxNotifyArgs)
	}
	if d := n.TimeoutSeconds; d < 0 || d > maxNotifyTimeout {
		return bad("notify.timeout_seconds", "%d is out of range 1..%d", d, maxNotifyTimeout)
	}
	if !n.On() {
		return nil
	}
	prog := n.Command[0]
	switch {
	case strings.TrimSpace(prog) == "":
		return bad("notify.command", "the program name (first element) is empty")
	case strings.HasPrefix(prog, "/"):
		if _, err := notifyLookPath(prog); err != nil {
			return bad("notify.command", "%q is not an executable file", prog)
		}
	case strings.Contains(prog, "/"):
		return bad("notify.command", "%q must be an absolute path or a program name found on PATH", prog)
	default:
		if _, err := notifyLookPath(prog); err != nil {
			return bad("notify.command", "%q is not found on PATH; write its absolute path", prog)
		}
	}
	return nil
}

// IsZero says whether nothing of the section is set (omitzero); an empty
// command list counts as unset here, and validate refuses it.
func (n Notify) IsZero() bool { return len(n.Command) == 0 && n.TimeoutSeconds == 0 }
