// Package lease is coordination-engine's domain: triggers (spec section 2),
// the coordination leases that wake an agent for one (section 4), the
// checkpoints an agent records on its lease (section 6) and the tamq
// endpoints that host the agents. It does no I/O and knows neither SQL nor
// the wire: the store maps its rows to these types, the service drives the
// rules with a clock, and every rule is a pure function of a lease, a time
// and a Timing.
package lease

import (
	"time"
)

// Who acted on a lease, as receipts record it: tamq's broker, which runs
// the agent and saw it take the prompt and work (tamq's service calls for
// it); the agent's own command in its window; the operator, from outside
// every window; tamq's service for itself.
const (
	ByBroker   = "broker"
	ByAgent    = "agent"
	ByOperator = "operator"
	ByTamq     = "tamq"
)

// Owner is the one owner a lease can have.
const Owner = "coordination-engine"

// State is where a lease is in its life.
type State string

const (
	// Offered: the lease was taken and the agent is being woken; it waits
	// for the agent's ack until its ack deadline.
	Offered State = "offered"
	// Acknowledged: the agent took the lease and must renew it.
	Acknowledged State = "acknowledged"
	// Running: the agent renewed the lease at least once.
	Running State = "running"
	// Checkpointed: the agent recorded a checkpoint; it works on.
	Checkpointed State = "checkpointed"
	// Completed: the agent released the lease with its work done.
	Completed State = "completed"
	// RetryWait: the attempt ended (expired or failed); the next attempt
	// is offered at next_retry_at.
	RetryWait State = "retry_wait"
	// Stopped: no further attempt is made (blocked, or attempts used up).
	Stopped State = "stopped"
)

// Live reports whether the lease still holds its trigger: every state but
// completed and stopped. A trigger has at most one live lease.
func (s State) Live() bool { return s != Completed && s != Stopped }

// held reports whether the agent holds the lease: it acknowledged it and the
// attempt has not ended.
func (s State) held() bool { return s == Acknowledged || s == Running || s == Checkpointed }

// Source is where a trigger was observed.
type Source string

const (
	SourceWorkplan   Source = "workplan"
	SourceTask       Source = "task"
	SourceMessage    Source = "message"
	SourceCheckpoint Source = "checkpoint"
)

// Reason is why a trigger wants the agent woken.
type Reason string

const (
	TaskActionable      Reason = "task_actionable"
	DependencySatisfied Reason = "dependency_satisfied"
	InboxMessage        Reason = "inbox_message"
	RetryDue            Reason = "retry_due"
	CheckpointResume    Reason = "checkpoint_resume"
)

// TriggerState is what became of a trigger.
type TriggerState string

const (
	// TriggerPending: observed, not yet gated or leased.
	TriggerPending TriggerState = "pending"
	// TriggerLeased: a lease was offered for it.
	TriggerLeased TriggerState = "leased"
	// TriggerGated: a gate holds it (reserved for gates that may open).
	TriggerGated TriggerState = "gated"
	// TriggerCompleted: its lease completed.
	TriggerCompleted TriggerState = "completed"
	// TriggerStopped: a gate stopped it, or its lease stopped.
	TriggerStopped TriggerState = "stopped"
	// TriggerSuperseded: a newer revision of the same source replaced it.
	TriggerSuperseded TriggerState = "superseded"
)

// BlockedReason says why an agent cannot go on without someone else.
type BlockedReason string

const (
	BlockedHuman       BlockedReason = "human"
	BlockedSecret      BlockedReason = "secret"
	BlockedDestructive BlockedReason = "destructive"
	BlockedPolicy      BlockedReason = "policy"
	BlockedDependency  BlockedReason = "dependency"
	BlockedUnavailable BlockedReason = "unavailable"
)

// WakeOutcome is what tamq could do for a wake (its capability).
type WakeOutcome string

const (
	// WakeResumed: the window's agent runs; the prompt was queued for it.
	WakeResumed WakeOutcome = "resumed"
	// WakeStarted: tamq started the window's agent again for the prompt.
	WakeStarted WakeOutcome = "started"
	// WakeUnavailable: no window could take the prompt; nothing was
	// queued. The lease stays offered and expires at its ack deadline,
	// so the normal retry path tries again.
	WakeUnavailable WakeOutcome = "unavailable"
)

// Meaning says in words what a wake's outcome means, for the reason of its
// "wake.sent" receipt. The wire word "resumed" alone reads as "resumed from a
// checkpoint"; it means only that the agent was already running in its window
// and the prompt was queued for it.
func (o WakeOutcome) Meaning() string {
	switch o {
	case WakeResumed:
		return "prompt queued for the agent already running in its window"
	case WakeStarted:
		return "agent started again in its window, prompt queued for it"
	}
	return ""
}

// Result is how an agent ends its lease.
type Result string

const (
	ResultCompleted Result = "completed"
	ResultFailed    Result = "failed"
	ResultBlocked   Result = "blocked"
)

// EndpointState is whether a tamq endpoint is attached to the engine.
type EndpointState string

const (
	Attached EndpointState = "attached"
	Detached EndpointState = "detached"
)

// WindowMode is whether the engine may wake a window's agent.
type WindowMode string

const (
	// ModeTrigger: the engine may wake the agent.
	ModeTrigger WindowMode = "trigger"
	// ModeManual: only people and other agents write to it.
	ModeManual WindowMode = "manual"
)

// The value sets of the enums, in the order the schema lists them: the
// schema's CHECK constraints are tested against these.
var (
	States         = []State{Offered, Acknowledged, Running, Checkpointed, Completed, RetryWait, Stopped}
	Sources        = []Source{SourceWorkplan, SourceTask, SourceMessage, SourceCheckpoint}
	Reasons        = []Reason{TaskActionable, DependencySatisfied, InboxMessage, RetryDue, CheckpointResume}
	TriggerStates  = []TriggerState{TriggerPending, TriggerLeased, TriggerGated, TriggerCompleted, TriggerStopped, TriggerSuperseded}
	BlockedReasons = []BlockedReason{BlockedHuman, BlockedSecret, BlockedDestructive, BlockedPolicy, BlockedDependency, BlockedUnavailable}
	WakeOutcomes   = []WakeOutcome{WakeResumed, WakeStarted, WakeUnavailable}
	Results        = []Result{ResultCompleted, ResultFailed, ResultBlocked}
	EndpointStates = []EndpointState{Attached, Detached}
	WindowModes    = []WindowMode{ModeTrigger, ModeManual}
)

// Trigger is a WorkerTrigger: something observed that wants the agent of a
// repo woken. (Source, SourceID, SourceRevision, TargetRepo) is its key:
// repeated observations of the same revision collapse to one trigger.
type Trigger struct {
	ID             string
	Source         Source
	SourceID       string
	SourceRevision string
	TargetRepo     string
	TargetAgent    string // "" for the repo's agent, whoever it is
	TaskID         string // the task the wake is about, when known
	// WorkplanID, Title and Sender are what the prompt names: the task's
	// workplan and title, or a message's subject and sender. A title is
	// stored only after the prompt it makes was scanned for secrets.
	WorkplanID string
	Title      string
	Sender     string
	Reason     Reason
	State      TriggerState
	GateReason string // the gate that stopped or holds it
	// GateChecks counts the times a gate was checked again for a gated
	// trigger; NextCheckAt is when it is checked next.
	GateChecks  int
	NextCheckAt time.Time
	// Wait is why a pending trigger (or the next attempt of its lease)
	// waits: no window, no agent, the window busy, ...; WaitDetail says it
	// in words ("window busy with T-3"). Waiting is not a gate: the trigger
	// is judged again whenever that may have changed.
	Wait       Wait
	WaitDetail string
	// Resume is the checkpoint a checkpoint_resume trigger resumes from:
	// the next prompt carries it.
	Resume     *Checkpoint
	ObservedAt time.Time
	UpdatedAt  time.Time
}

// Wait is why a trigger waits rather than wakes now.
type Wait string

const (
	// WaitNoWindow: no attached tamq window hosts the repo.
	WaitNoWindow Wait = "no_window"
	// WaitTamq: no tamq is attached (stopped, restarting, or not answering).
	WaitTamq Wait = "tamq_unreachable"
	// WaitManual: the repo's window was opened in manual mode.
	WaitManual Wait = "manual_mode"
	// WaitNoAgent: the window runs no agent now (it exited, or a shell or
	// another program is in the foreground).
	WaitNoAgent Wait = "no_agent"
	// WaitDialog: the window's agent shows a dialog (a permission
	// question), and tamq holds the wake until a person answers it.
	WaitDialog Wait = "dialog"
	// WaitBusy: the repo's agent works on another lease (one at a time),
	// or, for an offered attempt whose wake tamq holds, the agent is busy
	// in its window (not at its prompt): the wake goes in when it is.
	WaitBusy Wait = "window_busy"
	// WaitTaskLeased: another trigger of the same task holds a live lease.
	WaitTaskLeased Wait = "task_leased"
	// WaitNotActionable: the task of a lease's next attempt is not
	// actionable now (a dependency reopened, its workplan paused).
	WaitNotActionable Wait = "not_actionable"
	// WaitHeldElsewhere: another host's engine holds the work's claim in
	// the cluster ([cluster]); its WaitDetail names the host and lease.
	WaitHeldElsewhere Wait = "held_by_host"
	// WaitCluster: the cluster's store (etcd) does not answer, so no new
	// claim can be taken.
	WaitCluster Wait = "cluster_unreachable"
)

// Waits are the values of Wait.
var Waits = []Wait{WaitNoWindow, WaitTamq, WaitManual, WaitNoAgent, WaitDialog, WaitBusy, WaitTaskLeased, WaitNotActionable, WaitHeldElsewhere, WaitCluster}

// Lease is a WorkerLease: the engine's claim that one agent works on one
// trigger, over one or more attempts under the same lease id. Zero times
// are unset.
type Lease struct {
	ID          string
	TriggerID   string
	Owner       string
	TargetRepo  string
	TargetAgent string
	State       State
	// Attempt is the current attempt, from 1. MaxRetries is how many
	// retries may follow the first attempt (Attempts is all of them); it is
	// fixed when the lease is offered, so a changed configuration never
	// changes a lease under way.
	Attempt    int
	MaxRetries int
	// AcquiredAt is when the current attempt was offered.
	AcquiredAt time.Time
	// ExpiresAt is the deadline of the current attempt: the ack deadline
	// while offered, the renewal deadline while held.
	ExpiresAt        time.Time
	NextRetryAt      time.Time // set in retry_wait only
	LastCheckpointAt time.Time
	// CoordinationEndpointID is the endpoint (as the engine granted it) the
	// wake goes to; TamqEndpointID is tamq's id of it (tmux-amq-<pid>), as
	// the last wake reported it.
	CoordinationEndpointID string
	TamqEndpointID         string
	// LocalLeaseID is tamq's message id of the current attempt's wake.
	LocalLeaseID string
	// WakeOutcome is what tamq did for the current attempt's wake; "" until
	// the wake was answered.
	WakeOutcome WakeOutcome
	StopReason  string
	// Released is the result the agent released the lease with (the last
	// release, a failed one included); "" when it never did. A lease that
	// ended by release leaves history, not a request: a checkpoint naming
	// it resumes nothing.
	Released Result
	// AckedBy is who acknowledged the current attempt (ByBroker, ByAgent)
	// and AckedAt when; "" and zero until it is. A new attempt clears them.
	AckedBy       string
	AckedAt       time.Time
	PolicyProfile string // name@version
	ConfigVersion string
	UpdatedAt     time.Time
}

// Checkpoint is what an agent records of its progress on a lease: enough
// for the next wake to resume from. Its summary is content: it goes into
// the next prompt and never into a receipt.
type Checkpoint struct {
	// SourceID is State Hub's id of a checkpoint an agent posted there;
	// "" for one given to the engine directly. It is recorded once.
	SourceID      string
	LeaseID       string
	TaskID        string
	Summary       string
	FilesChanged  []string
	NextAction    string
	BlockedReason BlockedReason // "" when not blocked
	RecordedAt    time.Time
	// Attempt is the lease's attempt it was recorded in; 0 when unknown
	// (recorded before the engine kept it, its receipt purged).
	Attempt int
}

// Endpoint is a tamq endpoint (one tmux server) attached to the engine,
// with the repo windows it hosts.
type Endpoint struct {
	// ID is the coordination endpoint id the engine granted ("ce-<uuid>");
	// it survives tamq restarts on the same tmux server.
	ID             string
	TamqEndpointID string // tmux-amq-<tmux server pid>
	TmuxSocket     string
	TmuxSession    string
	Proto          string
	Capabilities   []string
	State          EndpointState
	AttachedAt     time.Time
	UpdatedAt      time.Time
	Windows        []Window
}

// Window is one repo window of an endpoint.
type Window struct {
	Repo    string
	Path    string // the directory the window runs in
	Command string // the agent command; "" is the user's shell
	Mode    WindowMode
	// NoAgent: tamq says no agent runs in the window now.
	NoAgent bool
}

// Hosts reports whether the endpoint has a window for repo.
func (e Endpoint) Hosts(repo string) bool {
	for _, w := range e.Windows {
		if w.Repo == repo {
			return true
		}
	}
	return false
}

// Timing is what the lease rules need from configuration
// (coordination.wake_ack_timeout_seconds, lease_renew_interval_seconds,
// lease_missed_renewals, retry_backoff_seconds, max_attempts).
type Timing struct {
	// AckTimeout is how long an offered lease waits for the agent's ack.
	AckTimeout time.Duration
	// RenewInterval is how often a held lease is expected to be renewed;
	// MissedRenewals how many intervals may pass without a renewal (or a
	// checkpoint) before it expires.
	RenewInterval  time.Duration
	MissedRenewals int
	// Backoff is the wait before the retry after attempt n: Backoff[n-1],
	// the last entry for every attempt beyond the list.
	Backoff []time.Duration
	// MaxRetries is how many retries a new lease may make after its first
	// attempt (0: none): coordination.max_attempts.
	MaxRetries int
}

// HoldFor is how long a held lease lives after a renewal: RenewInterval
// times MissedRenewals (at least one interval).
func (t Timing) HoldFor() time.Duration {
	return t.RenewInterval * time.Duration(max(t.MissedRenewals, 1))
}

// backoff is the wait after attempt n ended (n from 1).
func (t Timing) backoff(n int) time.Duration {
	if len(t.Backoff) == 0 {
		return 0
	}
	return t.Backoff[min(max(n, 1)-1, len(t.Backoff)-1)]
}

// Attempts is how many attempts the lease may have in all: the first and
// its retries. It is what every person and agent is told ("attempt 2 of
// 5") and what the wire's max_attempts carries.
func (l Lease) Attempts() int { return 1 + l.MaxRetries }
