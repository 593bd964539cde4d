// Package engineapi is coordination-engine's service API: its operations and their
// argument and result types, as they travel over the socket protocol
// (internal/unixrpc). tamq's service (attach), the agent commands and the
// operator commands reach the engine through internal/engineclient. See
// docs/coordination.md.
package engineapi

import (
	"time"

	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// The engine's operations, beside the lifecycle ones every service answers.
const (
	OpStatus     = "status"
	OpAttach     = "attach"
	OpDetach     = "detach"
	OpWake       = "wake"
	OpLeaseAck   = "lease_ack"
	OpLeaseRenew = "lease_renew"
	OpRelease    = "lease_release"
	OpCheckpoint = "checkpoint"
	OpLeases     = "leases"
	OpReceipts   = "receipts"
	// OpPublish hands tamq's receipts to the engine, which posts them to
	// State Hub with its own credentials (tamq publishes them itself while
	// no engine is attached).
	OpPublish = "publish"
	// OpPurge deletes the history older than a cutoff (the operator's).
	OpPurge = "purge"
	// OpExplain tells why a task was or was not woken.
	OpExplain = "explain"
	// OpLeaseCurrent asks whether an attempt of a lease is still the one
	// to work on: tamq asks before it writes a wake into a terminal, so a
	// prompt whose lease ended is never typed.
	OpLeaseCurrent = "lease_current"
)

// Capabilities the engine offers at attach, and tamq's.
const (
	CapLeases   = "leases"   // the engine holds coordination leases and wakes through OpWake of tamq
	CapReceipts = "receipts" // the engine keeps receipts with the coordination endpoint id
	CapWake     = "wake"     // tamq takes wakes (its wake operation)
)

// Window modes: whether the engine may wake a window's agent.
const (
	ModeTrigger = "trigger"
	ModeManual  = "manual"
)

// AttachWindow is one repo window tamq hosts.
type AttachWindow struct {
	Repo    string `json:"repo"`
	Path    string `json:"path"`              // the directory the window runs in
	Command string `json:"command,omitempty"` // the agent command; "" is the user's shell
	Mode    string `json:"mode"`              // trigger | manual
	// AgentRunning says whether an agent is the window's foreground program
	// now (a window whose agent exited, or that shows a shell, has none):
	// the engine waits for one before it offers a lease for the repo. nil
	// is unknown (a tamq that does not say), taken as running.
	AgentRunning *bool `json:"agent_running,omitempty"`
}

// AttachArgs is tamq's handshake for one endpoint (one tmux server): its
// id, tmux session and windows, the protocol version it speaks and what it
// offers.
type AttachArgs struct {
	EndpointID   string         `json:"endpoint_id"` // tmux-amq-<tmux server pid>
	TmuxSession  string         `json:"tmux_session"`
	TmuxSocket   string         `json:"tmux_socket"`
	Proto        string         `json:"proto"`
	Capabilities []string       `json:"capabilities"`
	Windows      []AttachWindow `json:"windows"`
}

// AttachRefusal is a window the engine did not accept, with why.
type AttachRefusal struct {
	Repo   string `json:"repo"`
	Reason string `json:"reason"`
}

// AttachResult grants the endpoint its coordination endpoint id. Accepted
// lists the repos registered for it; Refused the others.
type AttachResult struct {
	CoordinationEndpointID string          `json:"coordination_endpoint_id"`
	Proto                  string          `json:"proto"`
	Capabilities           []string        `json:"capabilities"`
	Accepted               []string        `json:"accepted"`
	Refused                []AttachRefusal `json:"refused,omitempty"`
}

// DetachArgs says an endpoint stops (tamq's service stops or its tmux
// server is gone).
type DetachArgs struct {
	EndpointID string `json:"endpoint_id"`
	Reason     string `json:"reason,omitempty"`
}

// WakeArgs is the operator's manual trigger (coordination-engine wake).
type WakeArgs struct {
	Repo string `json:"repo"`
	Task string `json:"task,omitempty"`
	// EndpointID is a tamq endpoint id (tmux-amq-<pid>) or a coordination
	// endpoint id; required when several endpoints host the repo.
	EndpointID string `json:"endpoint_id,omitempty"`
	// Force adds a lease for the repo while another of its leases lives
	// (its agent then has two pieces of work at once).
	Force bool `json:"force,omitempty"`
	// OverrideGate is the gate of the task the operator means to wake
	// through (human, secret, destructive, policy, …); it is recorded, with
	// who asked, in a gate.overridden receipt. Only the operator may.
	OverrideGate string `json:"override_gate,omitempty"`
}

// WakeResult is what became of a manual trigger: the lease it took (and the
// wake's outcome), the live lease of the task it named (Existing: nothing
// new was taken or sent), the gate that stopped it, or why it waits.
type WakeResult struct {
	Trigger  Trigger `json:"trigger"`
	Lease    *Lease  `json:"lease,omitempty"`
	Existing bool    `json:"existing,omitempty"`
	// Stopped names the gate when the trigger was stopped (no lease, no wake).
	Stopped string `json:"stopped,omitempty"`
	// Waiting names what the trigger waits for (no_window, no_agent, ...):
	// it is woken as soon as that changes.
	Waiting string `json:"waiting,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// LeaseArgs names a lease for ack and renew, and the attempt the agent
// works on (the prompt's commands name it; 0: not said).
type LeaseArgs struct {
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt,omitempty"`
	// Dialog, on a renewal by tamq's broker, says the agent waits at a
	// dialog: the window and what shows ("beta: the agent asks permission").
	Dialog string `json:"dialog,omitempty"`
}

// LeaseCurrentResult says whether the attempt asked about is the lease's
// current one, still to be worked on; Reason says why not.
type LeaseCurrentResult struct {
	Current bool   `json:"current"`
	State   string `json:"state,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Results of a release.
const (
	ResultCompleted = "completed"
	ResultFailed    = "failed"
	ResultBlocked   = "blocked"
)

// ReleaseArgs ends a lease with a result; Reason says why (failed, blocked).
type ReleaseArgs struct {
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt,omitempty"`
	Result  string `json:"result"`
	Reason  string `json:"reason,omitempty"`
}

// CheckpointArgs records a checkpoint (spec section 6) on a lease.
type CheckpointArgs struct {
	LeaseID       string   `json:"lease_id"`
	Attempt       int      `json:"attempt,omitempty"`
	TaskID        string   `json:"task_id,omitempty"`
	Summary       string   `json:"summary"`
	FilesChanged  []string `json:"files_changed,omitempty"`
	NextAction    string   `json:"next_action,omitempty"`
	BlockedReason string   `json:"blocked_reason,omitempty"`
}

// Trigger is a WorkerTrigger (spec section 2) and what became of it.
type Trigger struct {
	ID             string     `json:"id"`
	Source         string     `json:"source"`
	SourceID       string     `json:"source_id"`
	SourceRevision string     `json:"source_revision"`
	TargetRepo     string     `json:"target_repo"`
	TargetAgent    string     `json:"target_agent,omitempty"`
	Reason         string     `json:"reason"`
	State          string     `json:"state"`
	GateReason     string     `json:"gate_reason,omitempty"`
	TaskID         string     `json:"task_id,omitempty"`
	WorkplanID     string     `json:"workplan_id,omitempty"`
	GateChecks     int        `json:"gate_checks,omitempty"`
	NextCheckAt    *time.Time `json:"next_check_at,omitempty"`
	// Waiting is what the trigger (or its lease's next attempt) waits for,
	// WaitingFor the same in words: "window busy with T-3".
	Waiting    string    `json:"waiting,omitempty"`
	WaitingFor string    `json:"waiting_for,omitempty"`
	ObservedAt time.Time `json:"observed_at"`
	// WokenBy says who asked for the wake: "operator" for a
	// coordination-engine wake, else State Hub.
	WokenBy string `json:"woken_by,omitempty"`
}

// Lease is a WorkerLease (spec section 4).
type Lease struct {
	LeaseID                string     `json:"lease_id"`
	TriggerID              string     `json:"trigger_id"`
	Owner                  string     `json:"owner"`
	TargetRepo             string     `json:"target_repo"`
	TargetAgent            string     `json:"target_agent,omitempty"`
	State                  string     `json:"state"`
	Attempt                int        `json:"attempt"`
	MaxAttempts            int        `json:"max_attempts"`
	AcquiredAt             time.Time  `json:"acquired_at"`
	ExpiresAt              time.Time  `json:"expires_at"`
	NextRetryAt            *time.Time `json:"next_retry_at,omitempty"`
	LastCheckpointAt       *time.Time `json:"last_checkpoint_at,omitempty"`
	CoordinationEndpointID string     `json:"coordination_endpoint_id,omitempty"`
	// LocalLeaseID is tamq's message id of the wake (the local message id).
	LocalLeaseID  string    `json:"local_lease_id,omitempty"`
	WakeOutcome   string    `json:"wake_outcome,omitempty"` // resumed | started | unavailable | "" before the wake
	StopReason    string    `json:"stop_reason,omitempty"`
	Released      string    `json:"released,omitempty"` // the result the agent released it with
	PolicyProfile string    `json:"policy_profile"`
	ConfigVersion string    `json:"config_version"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Withheld lists, in the answer to a release or a checkpoint, the
	// texts the engine kept as WithheldText: they looked like secrets.
	Withheld []Withheld `json:"withheld,omitempty"`
	// AckedBy is who acknowledged the current attempt (broker: tamq saw
	// its agent take the prompt; agent: its own command), AckedAt when.
	AckedBy string     `json:"acked_by,omitempty"`
	AckedAt *time.Time `json:"acked_at,omitempty"`
	// TaskID is the task of the lease's trigger, in the lease listing.
	TaskID string `json:"task_id,omitempty"`
}

// LeasesArgs filters the lease listing.
type LeasesArgs struct {
	State string `json:"state,omitempty"`
	Limit int    `json:"limit,omitempty"`
	// Offset skips that many of the newest (the client pages).
	Offset int `json:"offset,omitempty"`
}

// LeasesResult lists leases, newest first. More says the answer was cut to
// fit one protocol frame: the next page starts at Offset+len(Leases).
type LeasesResult struct {
	Leases []Lease `json:"leases"`
	More   bool    `json:"more,omitempty"`
	// Offline: the engine is not running; read from its database as last
	// written.
	Offline bool `json:"offline,omitempty"`
}

// ReceiptsArgs filters the receipt listing.
type ReceiptsArgs struct {
	LeaseID   string `json:"lease_id,omitempty"`
	TriggerID string `json:"trigger_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	// BeforeID asks for the page before that receipt (the client pages).
	BeforeID int64 `json:"before_id,omitempty"`
}

// Receipt is one sanitized receipt (spec section 7): the one receipt
// model, as the engine's receipts listing carries it (times in UTC).
type Receipt = receipt.Receipt

// ReceiptsResult lists receipts, oldest first. More says the answer was
// cut to fit one protocol frame: older ones remain (before the first).
type ReceiptsResult struct {
	Receipts []Receipt `json:"receipts"`
	More     bool      `json:"more,omitempty"`
	// Offline: the engine is not running; read from its database as last
	// written.
	Offline bool `json:"offline,omitempty"`
}

// PublishArgs carries tamq's receipts to State Hub through the engine: at
// most contract.MaxProgressBatch, each with its stable id and source "tamq".
type PublishArgs struct {
	Receipts []contract.Receipt `json:"receipts"`
}

// PublishResult is State Hub's answer: how many receipts were new to it.
type PublishResult struct {
	Accepted int `json:"accepted"`
}

// ExplainArgs names the task to explain.
type ExplainArgs struct {
	Task string `json:"task"`
}

// ExplainDep is one dependency of the task as last observed.
type ExplainDep struct {
	ID     string `json:"id"`
	Status string `json:"status,omitempty"`
	Repo   string `json:"repo,omitempty"`
	Found  bool   `json:"found"`
	Done   bool   `json:"done"`
}

// ExplainWake is one wake sent for an attempt, with tamq's answer.
type ExplainWake struct {
	Attempt   int       `json:"attempt"`
	Status    string    `json:"status"` // resumed | started | unavailable | failed
	MessageID string    `json:"message_id,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
}

// ExplainLease is a lease of one of the task's triggers, with its wakes.
type ExplainLease struct {
	Lease
	Wakes []ExplainWake `json:"wakes"`
}

// ExplainTrigger is one trigger about the task, with its leases.
type ExplainTrigger struct {
	Trigger
	// Why is the reason its gate gave (from its receipt).
	Why    string         `json:"why,omitempty"`
	Leases []ExplainLease `json:"leases"`
}

// ExplainResult tells why a task was or was not woken, from the engine's
// last observation of State Hub and its own receipts.
type ExplainResult struct {
	Task string `json:"task"`
	// URL is where a person reads the task (a GitHub issue's page).
	URL string `json:"url,omitempty"`
	// Observed: the last observation had the task; the fields below up to
	// Gate are from it.
	Observed       bool         `json:"observed"`
	ObservedAt     *time.Time   `json:"observed_at,omitempty"`
	Status         string       `json:"status,omitempty"`
	Revision       string       `json:"revision,omitempty"`
	Repo           string       `json:"repo,omitempty"`
	Workplan       string       `json:"workplan,omitempty"`
	WorkplanStatus string       `json:"workplan_status,omitempty"`
	Priority       int          `json:"priority"`
	Dependencies   []ExplainDep `json:"dependencies"`
	// Dependents are the observed tasks that depend on this one.
	Dependents []ExplainDep `json:"dependents"`
	Actionable bool         `json:"actionable"`
	Waiting    string       `json:"waiting,omitempty"`
	Gate       string       `json:"gate,omitempty"`
	GateReason string       `json:"gate_reason,omitempty"`
	// Skipped says why the engine skips the task (TaskStanding.Skipped).
	Skipped string `json:"skipped,omitempty"`
	// HeldBy is the host whose claim holds the task ([cluster]: another
	// host's agent is on it), Held the same in words, as tasks says it.
	HeldBy string `json:"held_by,omitempty"`
	Held   string `json:"held,omitempty"`
	// Triggers are the engine's triggers about the task, oldest first.
	Triggers []ExplainTrigger `json:"triggers"`
	// NextRetry is when the task is next tried: a lease's next attempt or
	// a gated trigger's next check.
	NextRetry *time.Time `json:"next_retry,omitempty"`
	// Verdict says in one sentence where the task stands.
	Verdict string `json:"verdict"`
	// Offline: the engine is not running; this was read from its database
	// as last written, without an observation of State Hub.
	Offline bool `json:"offline,omitempty"`
	// Timeline is the task's story, oldest first (see timeline.go).
	Timeline []TimelineEntry `json:"timeline"`
}

// PurgeArgs ask to delete the engine's history older than Before (a dry
// run counts it and deletes nothing).
type PurgeArgs struct {
	Before time.Time `json:"before"`
	DryRun bool      `json:"dry_run"`
}

// PurgeResult counts what a purge deleted, or would.
type PurgeResult struct {
	Before      time.Time `json:"before"`
	DryRun      bool      `json:"dry_run"`
	Receipts    int       `json:"receipts"`
	Checkpoints int       `json:"checkpoints"`
	Leases      int       `json:"leases"`
	Triggers    int       `json:"triggers"`
}
