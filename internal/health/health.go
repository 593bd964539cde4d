// Package health is the one status model of both programs: the sections
// `tamq status` and `coordination-engine status` share (the process, its
// database, the gita registry), as their --json prints them. The daemon
// skeleton fills them (internal/daemon); each program adds its own sections.
package health

import "time"

// Service is the process and its socket.
type Service struct {
	Running       bool       `json:"running"`
	PID           int        `json:"pid,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	UptimeSeconds float64    `json:"uptime_seconds,omitempty"`
	ServerVersion string     `json:"server_version,omitempty"`
	Proto         string     `json:"proto,omitempty"`
	Socket        string     `json:"socket"`
	LogFile       string     `json:"log_file"`
	Orwell        bool       `json:"orwell"`
	PolicyProfile string     `json:"policy_profile,omitempty"`
	ConfigVersion string     `json:"config_version,omitempty"`
	Error         string     `json:"error,omitempty"`
}

// SQLite is the database file.
type SQLite struct {
	Path                string `json:"path"`
	Exists              bool   `json:"exists"`
	SchemaVersion       int    `json:"schema_version"`
	BinarySchemaVersion int    `json:"binary_schema_version"`
	SizeBytes           int64  `json:"size_bytes"`
	WALSizeBytes        int64  `json:"wal_size_bytes"`
	Error               string `json:"error,omitempty"`
}

// Registry is the gita registry.
type Registry struct {
	Path              string `json:"path"`
	Readable          bool   `json:"readable"`
	RepoCount         int    `json:"repo_count"`
	UnregisteredCount int    `json:"unregistered_count"`
	Error             string `json:"error,omitempty"`
}
