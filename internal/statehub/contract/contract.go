// Package contract holds the State Hub contract's objects (docs/statehub-contract.md)
// as they travel in JSON: pure types, so the engine's domain can read them
// without linking an HTTP client.
package contract

import "time"

// Workplan statuses and task statuses.
var (
	WorkplanStatuses = []string{"draft", "active", "ready", "paused", "done", "cancelled"}
	TaskStatuses     = []string{"todo", "ready", "in_progress", "blocked", "done", "cancelled"}
)

// Note is an intervention note on a workplan or task.
type Note struct {
	ID             string    `json:"id"`
	Text           string    `json:"text"`
	RequestsReview bool      `json:"requests_review"`
	CreatedAt      time.Time `json:"created_at"`
}

// ProposedAction is an action a task proposes, by policy category.
type ProposedAction struct {
	Category string `json:"category"`
	Summary  string `json:"summary"`
}

// Task is one task of a workplan.
type Task struct {
	ID                string           `json:"id"`
	Title             string           `json:"title"`
	Status            string           `json:"status"`
	Revision          string           `json:"revision"`
	Repo              string           `json:"repo"`
	Agent             string           `json:"agent,omitempty"`
	DependsOn         []string         `json:"depends_on"`
	Priority          int              `json:"priority"`
	NeedsHuman        bool             `json:"needs_human"`
	InterventionNotes []Note           `json:"intervention_notes"`
	ProposedActions   []ProposedAction `json:"proposed_actions"`
	SecretsRequired   bool             `json:"secrets_required"`
}

// Workplan is a repo's plan of tasks.
type Workplan struct {
	ID                string `json:"id"`
	Repo              string `json:"repo"`
	Status            string `json:"status"`
	Revision          string `json:"revision"`
	NeedsHuman        bool   `json:"needs_human"`
	InterventionNotes []Note `json:"intervention_notes"`
	Tasks             []Task `json:"tasks"`
}

// Message is a coordination message as State Hub lists it; its body stays
// in State Hub (MessageWithBody has it).
type Message struct {
	ID             string    `json:"id"`
	Revision       string    `json:"revision"`
	ToRepo         string    `json:"to_repo"`
	ToAgent        string    `json:"to_agent,omitempty"`
	From           string    `json:"from"`
	Subject        string    `json:"subject"`
	RequestsAction bool      `json:"requests_action"`
	Read           bool      `json:"read"`
	CreatedAt      time.Time `json:"created_at"`
}

// MaxMessageBody is the largest message body the contract allows, in bytes
// of UTF-8.
const MaxMessageBody = 64 << 10

// MessageWithBody is what GET /v1/messages/{id} answers: the message and its
// body. The engine reads a body only when an agent asks for it, and never
// keeps it.
type MessageWithBody struct {
	Message
	Body string `json:"body"`
}

// TaskUpdate is what an agent states about its task through the engine
// (PATCH /v1/tasks/{id}): a status and, optionally, a one-line note.
type TaskUpdate struct {
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Checkpoint is the spec's checkpoint as State Hub keeps it.
type Checkpoint struct {
	ID            string    `json:"id"`
	Repo          string    `json:"repo"`
	LeaseID       string    `json:"lease_id"`
	TaskID        string    `json:"task_id,omitempty"`
	Summary       string    `json:"summary"`
	FilesChanged  []string  `json:"files_changed"`
	NextAction    string    `json:"next_action,omitempty"`
	BlockedReason string    `json:"blocked_reason,omitempty"`
	RecordedAt    time.Time `json:"recorded_at"`
}

// MaxProgressBatch is the most receipts one POST /v1/progress carries.
const MaxProgressBatch = 500

// Receipt is a sanitized receipt as State Hub receives it in POST
// /v1/progress (spec section 7): ids, kind, status, reason, attempt and
// times; never prompt text, message bodies, terminal output or credentials.
// Its ID is stable across restarts ("<source>:<instance>:<row id>"), so a
// batch sent again after a failure is stored once.
type Receipt struct {
	ID     string `json:"id"`
	Source string `json:"source"` // coordination-engine | tamq
	// Host is the machine the program runs on (its cluster host id, else
	// its hostname): several hosts may publish to one State Hub.
	Host      string `json:"host,omitempty"`
	Kind      string `json:"kind"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
	TriggerID string `json:"trigger_id,omitempty"`
	// TaskID and Repo are the task and repo the receipt is about, when it
	// is about one: what a tracker files it under.
	TaskID                 string         `json:"task_id,omitempty"`
	Repo                   string         `json:"repo,omitempty"`
	LeaseID                string         `json:"lease_id,omitempty"`
	LocalMessageID         string         `json:"local_message_id,omitempty"`
	Attempt                int            `json:"attempt,omitempty"`
	NextRetryAt            *time.Time     `json:"next_retry_at,omitempty"`
	CoordinationEndpointID string         `json:"coordination_endpoint_id,omitempty"`
	PolicyProfile          string         `json:"policy_profile,omitempty"`
	ConfigVersion          string         `json:"config_version,omitempty"`
	At                     time.Time      `json:"at"`
	Detail                 map[string]any `json:"detail,omitempty"`
}
