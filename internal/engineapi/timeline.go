package engineapi

import "time"

// The kinds of a timeline entry of explain: what happened to the task, in
// the words a person reading its story looks for.
const (
	// TimelineObserved is the engine's last look at State Hub: the task's
	// status and revision then (only while the engine runs).
	TimelineObserved = "observed"
	// TimelineJudged is a trigger the engine created from what State Hub
	// showed, with its reason and the revision it is about.
	TimelineJudged = "judged"
	// TimelineManualWake is a trigger the operator created with
	// coordination-engine wake.
	TimelineManualWake = "manual_wake"
	// TimelineGateOverridden is the operator waking the task through a gate.
	TimelineGateOverridden = "gate_overridden"
	// TimelineGated is a trigger held at a gate, checked again later.
	TimelineGated = "gated"
	// TimelineWaiting is a trigger (or its lease's next attempt) waiting:
	// for a window, an agent, another lease of the task.
	TimelineWaiting = "waiting"
	// TimelineSuperseded is a trigger a newer revision replaced.
	TimelineSuperseded = "superseded"
	// TimelineLeased is a lease offered, or offered again for a retry.
	TimelineLeased = "leased"
	// TimelineWoken is a wake tamq took (its message id) or could not place.
	TimelineWoken = "woken"
	// TimelineWakeFailed is a wake that did not reach tamq.
	TimelineWakeFailed = "wake_failed"
	// TimelineAcked is the lease acknowledged, by the broker or the agent.
	TimelineAcked = "acked"
	// TimelineRenewed is a renewal: the first one (the only one with a
	// receipt) and, while the lease lives, the latest.
	TimelineRenewed = "renewed"
	// TimelineCheckpoint is a checkpoint recorded on the lease.
	TimelineCheckpoint = "checkpoint"
	// TimelineReleased is the agent's release, with its result.
	TimelineReleased = "released"
	// TimelineRetryWait is an attempt that ran out or was withdrawn: the
	// lease waits for its next attempt until Until.
	TimelineRetryWait = "retry_wait"
	// TimelineStopped is a trigger stopped at a gate, or a lease stopped
	// for good, with why.
	TimelineStopped = "stopped"
)

// TimelineEntry is one event in a task's story, oldest first in
// ExplainResult.Timeline. Text says it in one line; the other fields are
// the same facts for programs, each present when the event has it.
type TimelineEntry struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
	// Manual marks what an operator's coordination-engine wake caused.
	Manual    bool   `json:"manual,omitempty"`
	TriggerID string `json:"trigger_id,omitempty"`
	LeaseID   string `json:"lease_id,omitempty"`
	// Revision is State Hub's revision of the task (observed, judged).
	Revision string `json:"revision,omitempty"`
	// Status is the task's status in State Hub (observed) or tamq's answer
	// to a wake (resumed, started, unavailable).
	Status      string `json:"status,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	// By is who acted: broker, agent, operator or statehub; ByRepo the
	// repo of an agent's window.
	By        string `json:"by,omitempty"`
	ByRepo    string `json:"by_repo,omitempty"`
	Gate      string `json:"gate,omitempty"`
	Reason    string `json:"reason,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// Result is a release's: completed, failed or blocked.
	Result string `json:"result,omitempty"`
	// Until is when a held trigger is checked again, a lease's next attempt
	// is due, or (renewed) how long the lease holds.
	Until *time.Time `json:"until,omitempty"`
	// Summary is a checkpoint's summary as the engine's database holds it
	// (local only: receipts never carry it); FilesChanged counts its files.
	Summary      string `json:"summary,omitempty"`
	FilesChanged int    `json:"files_changed,omitempty"`
}
