package engineapi

import "time"

// OpCheckpoints lists the checkpoints the engine recorded (the operator's;
// they stay local, never published).
const OpCheckpoints = "checkpoints"

// CheckpointsArgs filters the checkpoint listing.
type CheckpointsArgs struct {
	TaskID  string `json:"task_id,omitempty"`
	LeaseID string `json:"lease_id,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	// Offset skips that many of the newest (the client pages).
	Offset int `json:"offset,omitempty"`
}

// Checkpoint is one checkpoint an agent recorded on a lease. Its texts are
// the agent's words: a reader escapes them before it prints them.
type Checkpoint struct {
	LeaseID string `json:"lease_id"`
	TaskID  string `json:"task_id,omitempty"`
	// Attempt is the lease's attempt it was recorded in; 0 when unknown.
	Attempt       int       `json:"attempt,omitempty"`
	RecordedAt    time.Time `json:"recorded_at"`
	Summary       string    `json:"summary"`
	NextAction    string    `json:"next_action,omitempty"`
	FilesChanged  []string  `json:"files_changed"`
	BlockedReason string    `json:"blocked_reason,omitempty"`
	// FilesOmitted counts the changed files left out at the end of
	// FilesChanged: the largest checkpoint an agent may record (100 long
	// file names) would not fit one protocol frame.
	FilesOmitted int `json:"files_omitted,omitempty"`
	// StateHubID is State Hub's id of a checkpoint the agent posted there.
	StateHubID string `json:"statehub_id,omitempty"`
}

// CheckpointsResult lists checkpoints, newest first. More says the answer
// was cut to fit one protocol frame: the next page starts at
// Offset+len(Checkpoints).
type CheckpointsResult struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
	More        bool         `json:"more,omitempty"`
	// Offline: the engine is not running; read from its database as last
	// written.
	Offline bool `json:"offline,omitempty"`
}
