// Package door is the one policy both daemons keep at their sockets: who a
// caller is (a Caller, derived by each daemon from the connection's peer
// credentials, never from what a request says) and what each kind of caller
// may do (an Access per operation, in each daemon's handler table). tamq
// and coordination-engine derive callers their own way (tamq places a
// process in its windows; the engine asks tamq), and refuse by the same
// rules with the same words. It does no I/O.
package door

import (
	"context"
	"fmt"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Kind is who a caller is. The strings are what receipts record as `by`.
type Kind string

const (
	// Operator is a process of the user's outside every window tamq
	// opened, not under an agent: the person in the loop. A command the
	// person typed at the shell of a window whose own program is that
	// shell (a manual window) is the operator's too, with the window's
	// repo in Caller.Repo.
	Operator Kind = "operator"
	// Agent is a process in a repo's window (its pane's process or a
	// descendant): it speaks for that repo only.
	Agent Kind = "agent"
	// Tamq is tamq's service: the process listening on tamq's socket.
	Tamq Kind = "tamq"
	// Engine is coordination-engine's service: the process listening on
	// the engine's socket.
	Engine Kind = "engine"
	// Unverified is a process that cannot be placed: one that belongs near
	// a window but is not in a repo's agent pane (another pane of tamq's,
	// a job that left its window, an agent outside tamq's windows), or one
	// under tamq's tmux while tamq cannot say where. It may do only what
	// anyone may.
	Unverified Kind = "unverified"
)

// Caller is who made a request.
type Caller struct {
	Kind Kind
	// Repo is an agent's window's repo, or the window at whose shell the
	// operator typed the command.
	Repo string
	// Why says why an Unverified caller could not be placed, in words that
	// finish "you …".
	Why string
	// Down marks an Unverified caller that could not be placed because
	// tamq, which places processes, is not running: asked again later it
	// may well be placed, so the answer is "unavailable", not "refused".
	Down bool
}

func (c Caller) String() string {
	switch c.Kind {
	case Agent:
		return "the agent in " + c.Repo + "'s window"
	case Unverified:
		return "a process that cannot be placed"
	case Operator:
		if c.Repo != "" {
			return "the operator at the shell of " + c.Repo + "'s window"
		}
	}
	return string(c.Kind)
}

// Access is who may call an operation.
type Access int

const (
	// Anyone: nothing changes and nothing private is read (status, ping,
	// hello, changes, endpoints, whois).
	Anyone Access = iota
	// TamqOnly: tamq's service itself (the engine's attach, detach and
	// publish).
	TamqOnly
	// EngineOnly: coordination-engine's service itself (tamq's wake and
	// cancel_wake).
	EngineOnly
	// OperatorOnly: never from a window (wake, leases, receipts, explain,
	// purge, register, forget, restore, stop, …).
	OperatorOnly
	// Window: an agent, for its own repo's leases, tasks, messages and
	// history (each handler checks the repo with Owns), or the operator.
	Window
	// WindowOrTamq: Window, and tamq's service on its broker's behalf (the
	// engine's lease ack and renew).
	WindowOrTamq
)

// Policy holds what the refusals name: where each service listens.
type Policy struct {
	TamqSocket, EngineSocket string
}

// Allows says whether c may call op under access a, and why not.
func (p Policy) Allows(a Access, c Caller, op string) error {
	switch {
	case a == Anyone:
		return nil
	case a == TamqOnly && c.Kind != Tamq:
		return errs.New(errs.PermissionDeny, "only tamq's service may %s (the process listening on %s); you are %s", op, p.TamqSocket, c)
	case a == TamqOnly:
		return nil
	case a == EngineOnly && c.Kind != Engine:
		return errs.New(errs.PermissionDeny, "only coordination-engine's own process may %s (the process listening on %s); you are %s", op, p.EngineSocket, c).
			WithHint("ask the engine: `coordination-engine wake REPO`")
	case a == EngineOnly:
		return nil
	case c.Kind == Unverified && c.Down:
		return errs.New(errs.Unavailable, "tamq is not running, so it cannot tell which window you run in (%s)", c.Why).
			WithHint("start tamq (`tamq start --detach`) and run the command again")
	case c.Kind == Unverified:
		return errs.New(errs.PermissionDeny, "%s is refused: you %s", op, c.Why).
			WithHint("run it from a terminal outside tamq's windows and agents, or from the agent in a repo's window")
	case a == OperatorOnly && c.Kind != Operator:
		return errs.New(errs.PermissionDeny, "%s is the operator's; %s may not run it", op, c).
			WithHint(OperatorHint)
	case a == Window && c.Kind != Operator && c.Kind != Agent:
		return errs.New(errs.PermissionDeny, "%s is an agent's or the operator's; %s may not run it", op, c)
	case a == WindowOrTamq && c.Kind != Operator && c.Kind != Agent && c.Kind != Tamq:
		return errs.New(errs.PermissionDeny, "%s is an agent's, its broker's or the operator's; %s may not run it", op, c)
	}
	return nil
}

// OperatorHint says where the operator's commands run: what counts as
// outside is any terminal that is not an agent's (docs/security.md).
const OperatorHint = "run it from a terminal outside tamq's windows, or type it at the shell prompt of a window whose own program is your shell (tamq open without --command); never through an agent or a script it runs"

// Owns refuses an agent acting on another repo's lease, task, message or
// history: the operator may act on any, an agent on its own repo's only.
// what names the thing ("lease L1", "message M1").
func Owns(c Caller, what, repo string) error {
	if c.Kind != Agent || c.Repo == repo {
		return nil
	}
	return errs.New(errs.PermissionDeny, "%s belongs to %s; %s may act only on %s's", what, repo, c, c.Repo)
}

// Unplaced is what is known of a process that runs in no repo's agent
// pane (the pane's process and its descendants): where else it runs, and
// what it inherited.
type Unplaced struct {
	// UnderTamqTmux: it descends from a tmux server tamq opened windows on.
	UnderTamqTmux bool
	// Listed: that server's panes were listed (tamq runs); InPane and the
	// rest are known only then.
	Listed bool
	// InPane: it runs in one of that server's panes (any pane, marked or
	// not); PaneRepo is the repo the pane's window is marked for, if any,
	// and TamqSession says the pane is in the session tamq opens its
	// windows in.
	InPane      bool
	PaneRepo    string
	TamqSession bool
	// EnvRepo is TAMQ_REPO in its environment: it was started in (or from)
	// a repo's window. The environment is claimed, so it is only ever a
	// reason to refuse, never to act for that repo.
	EnvRepo string
	// AgentAbove names an agent it runs under (an ancestor that is a known
	// agent program, or an agent's mark in its environment).
	AgentAbove string
}

// Place is who a process no agent pane holds is: the operator, unless
// anything about it says it belongs near a window or an agent.
func Place(u Unplaced) Caller {
	un := func(why string, down bool) Caller { return Caller{Kind: Unverified, Why: why, Down: down} }
	switch {
	case u.UnderTamqTmux && !u.Listed:
		return un("run under a tmux server of tamq's windows", true)
	case u.PaneRepo != "":
		return un(fmt.Sprintf("run in another pane of %s's window, not its agent's", u.PaneRepo), false)
	case u.InPane && u.TamqSession:
		return un("run in a window of tamq's session that is no repo's", false)
	case u.UnderTamqTmux && !u.InPane:
		return un("run under a tmux server of tamq's windows, in none of its panes", false)
	case u.EnvRepo != "":
		return un(fmt.Sprintf("were started from %s's window and left it (a background job whose parent exited, or setsid)", u.EnvRepo), false)
	case u.AgentAbove != "":
		return un(fmt.Sprintf("run under %s outside tamq's windows: an agent there is not the operator", u.AgentAbove), false)
	}
	return Caller{Kind: Operator}
}

// EnvVars are the variables Marks reads from a process's environment.
var EnvVars = []string{"TAMQ_REPO", "CLAUDECODE", "GEMINI_CLI", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED"}

// Marks reads what an environment (of EnvVars) says of a process: the repo
// window it was started from, and the agent it runs under. Claude Code sets
// CLAUDECODE=1 for the commands it runs, Gemini CLI GEMINI_CLI=1, Codex
// CODEX_SANDBOX* in its sandbox.
func Marks(env map[string]string) (repo, agent string) {
	repo = env["TAMQ_REPO"]
	switch {
	case env["CLAUDECODE"] != "":
		agent = "Claude Code"
	case env["GEMINI_CLI"] != "":
		agent = "Gemini CLI"
	case env["CODEX_SANDBOX"] != "" || env["CODEX_SANDBOX_NETWORK_DISABLED"] != "":
		agent = "Codex"
	}
	return repo, agent
}

type callerKey struct{}

// WithCaller hands the caller a guard derived to the handler it guards.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is the caller of the request ctx belongs to; work a daemon does
// on its own (no request) is the operator's.
func CallerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{Kind: Operator}
}
