package tamqapi

import (
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
)

// OpWake is coordination-engine's way into a terminal: it asks tamq to queue
// a continuation prompt for the agent of one repo window (spec section 5).
// The idempotency key is (LeaseID, Attempt): the identical request again
// returns the original message; the same key with another request is a
// conflict error. Only coordination-engine calls it (see docs/coordination.md).
const OpWake = "wake"

// Wake capabilities: what tamq could do for a wake.
const (
	// WakeResumed: the window's agent runs; the prompt is queued for it.
	WakeResumed = "resumed"
	// WakeStarted: the window's agent had exited and tamq started the same
	// command again in the same window (only with
	// coordination.wake_restarts_agent); the prompt is queued for it.
	WakeStarted = "started"
	// WakeUnavailable: no window can take the prompt (no live window hosts
	// the repo, it was opened in manual mode, its agent exited); nothing was
	// queued. Reason says which.
	WakeUnavailable = "unavailable"
)

// WakeTrigger is the WorkerTrigger of spec section 2 as the wake carries it.
type WakeTrigger struct {
	ID             string    `json:"id"`
	Source         string    `json:"source"`
	SourceID       string    `json:"source_id"`
	SourceRevision string    `json:"source_revision"`
	TargetRepo     string    `json:"target_repo"`
	TargetAgent    string    `json:"target_agent,omitempty"`
	Reason         string    `json:"reason"`
	ObservedAt     time.Time `json:"observed_at"`
}

// WakeCheckpoint is the latest checkpoint of the lease, when there is one.
type WakeCheckpoint struct {
	LeaseID       string    `json:"lease_id"`
	TaskID        string    `json:"task_id,omitempty"`
	Summary       string    `json:"summary"`
	FilesChanged  []string  `json:"files_changed,omitempty"`
	NextAction    string    `json:"next_action,omitempty"`
	BlockedReason string    `json:"blocked_reason,omitempty"`
	RecordedAt    time.Time `json:"recorded_at"`
}

// WakeRequest asks tamq to wake the agent of TargetRepo with Prompt.
type WakeRequest struct {
	LeaseID     string `json:"lease_id"`
	Attempt     int    `json:"attempt"`
	TargetRepo  string `json:"target_repo"`
	TargetAgent string `json:"target_agent,omitempty"`
	// EndpointID is the tamq endpoint (tmux-amq-<pid>) to use; required when
	// several live endpoints host the repo.
	EndpointID string `json:"endpoint_id,omitempty"`
	// CoordinationEndpointID is what the engine granted that endpoint at
	// attach; it is stored with the message.
	CoordinationEndpointID string          `json:"coordination_endpoint_id,omitempty"`
	Trigger                WakeTrigger     `json:"trigger"`
	Checkpoint             *WakeCheckpoint `json:"checkpoint,omitempty"`
	// Prompt is for an agent tamq's broker reads: the broker acknowledges
	// and renews the lease for it. AgentPrompt, when set, is the same
	// prompt for an agent the broker cannot read (no screen rules, no
	// status reports), telling it to acknowledge and renew itself; tamq
	// queues the one that fits the window's agent.
	Prompt      string `json:"prompt"`
	AgentPrompt string `json:"agent_prompt,omitempty"`
}

// Who acknowledges and renews a wake's lease, as WakeAck.Acks says.
const (
	// AcksBroker: the window's broker reads its agent and acknowledges
	// and renews for it (the prompt said so).
	AcksBroker = "broker"
	// AcksAgent: the broker cannot read the agent; its prompt told it to
	// acknowledge and renew itself.
	AcksAgent = "agent"
)

// WakeAck is tamq's answer. SessionID is the tamq endpoint that took the
// prompt; MessageID the queued message (empty when unavailable).
type WakeAck struct {
	LeaseID    string    `json:"lease_id"`
	Attempt    int       `json:"attempt"`
	SessionID  string    `json:"session_id"`
	AcceptedAt time.Time `json:"accepted_at"`
	Capability string    `json:"capability"`
	MessageID  string    `json:"message_id,omitempty"`
	// Duplicate says the request repeated one already accepted: nothing new
	// was queued and MessageID is the original message.
	Duplicate bool   `json:"duplicate,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Acks says who acknowledges and renews the lease (AcksBroker,
	// AcksAgent), by the prompt queued; empty when nothing was queued or
	// the wake repeated one already queued.
	Acks string `json:"acks,omitempty"`
	// Wait, when unavailable, says in one word what the engine waits for
	// (WaitNoWindow, WaitManual, WaitNoAgent); Reason says it in words.
	Wait string `json:"wait,omitempty"`
}

// What an unavailable wake waits for: the words of coordination-engine's
// waiting triggers (lease.Wait), which it takes back as they are.
const (
	WaitNoWindow = string(lease.WaitNoWindow)
	WaitManual   = string(lease.WaitManual)
	WaitNoAgent  = string(lease.WaitNoAgent)
	WaitDialog   = string(lease.WaitDialog)
	WaitBusy     = string(lease.WaitBusy)
)

// OpWakeHeld asks whether the wake of one attempt was ever written, and if
// not, what holds it: coordination-engine asks at the attempt's ack
// deadline, so that a wake that never reached the agent (held behind a
// dialog, in a window without an agent, on an endpoint that is gone) waits
// instead of spending the attempt.
const OpWakeHeld = "wake_held"

// WakeHeldArgs names the wake: its lease and attempt.
type WakeHeldArgs struct {
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt"`
}

// WakeHeldResult says what became of the wake. Held: it was never written
// and waits for what Wait names (WaitDialog, WaitNoAgent or WaitBusy, an
// agent not at its prompt: it goes in when that clears; WaitNoWindow: its
// endpoint or window is gone, or it was dropped with a forgotten endpoint,
// and nothing will write it: the engine sends the work elsewhere; "": it is
// being written, or is about to be, to a window that can take it). Not
// held: written at least once, or unknown to tamq. Reason says it in words; for a
// dialog it names only the window ("a dialog is open in the window of
// net-kingdom"): what the dialog asks is screen text, which never leaves
// tamq this way.
type WakeHeldResult struct {
	MessageID string `json:"message_id,omitempty"`
	State     string `json:"state,omitempty"`
	Held      bool   `json:"held"`
	Wait      string `json:"wait,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// OpCancelWake cancels the wakes of a lease that are not written yet, or
// that wait for an ack tamq would present again: coordination-engine sends
// it when an attempt ends (the lease completed, stopped, ran out, or a newer
// attempt was offered), so no stale prompt is ever typed. Each cancelled
// message ends in state cancelled with the reason.
const OpCancelWake = "cancel_wake"

// CancelWakeArgs names the lease and the last attempt to cancel (every
// earlier one too; 0: all of them), and why.
type CancelWakeArgs struct {
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt,omitempty"`
	Reason  string `json:"reason"`
}

// CancelWakeResult says how many messages were cancelled.
type CancelWakeResult struct {
	Cancelled int `json:"cancelled"`
}

// CoordinationStatus is tamq's link to coordination-engine, in tamq status.
type CoordinationStatus struct {
	// Attached says the engine accepted tamq's endpoints at the last attach
	// and answered since.
	Attached bool   `json:"attached"`
	Socket   string `json:"socket"`
	Proto    string `json:"proto,omitempty"`
	// Capabilities are what the engine offered at attach.
	Capabilities []string `json:"capabilities,omitempty"`
	// Endpoints are the coordination endpoint ids granted, by tamq endpoint.
	Endpoints  map[string]string `json:"endpoints,omitempty"`
	AttachedAt *time.Time        `json:"attached_at,omitempty"`
	// Refused lists windows the engine would not accept, with why.
	Refused []AttachRefusal `json:"refused,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// AttachRefusal is one window the engine refused at attach.
type AttachRefusal struct {
	EndpointID string `json:"endpoint_id"`
	Repo       string `json:"repo"`
	Reason     string `json:"reason"`
}
