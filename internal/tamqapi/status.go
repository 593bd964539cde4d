package tamqapi

import (
	"time"

	"github.com/tmux-amq/tamq/internal/health"
)

// StatusReport is the result of the status op and the document `tamq status
// --json` prints (docs/status.md). Sections are separate so one unhealthy part
// does not hide the others.
type StatusReport struct {
	Healthy  bool           `json:"healthy"`
	Config   ConfigStatus   `json:"config"`
	Service  ServiceStatus  `json:"service"`
	SQLite   SQLiteStatus   `json:"sqlite"`
	Registry RegistryStatus `json:"registry"`
	StateHub StateHubStatus `json:"statehub"`
	Queue    QueueStatus    `json:"queue"`
	Leases   LeaseStatus    `json:"leases"`
	// Coordination is the link to coordination-engine (tamq works without it).
	Coordination CoordinationStatus `json:"coordination"`
	// Endpoints are the tmux servers tamq delivers into, with their windows.
	Endpoints []Endpoint `json:"endpoints"`
}

// ServiceStatus is the process and its socket (the one status model of both
// programs: internal/health).
type ServiceStatus = health.Service

// ConfigStatus is the config file as it is now. The service reads it at
// start: a file changed since then takes effect at the next start.
type ConfigStatus struct {
	File    string `json:"file"`
	Version string `json:"version,omitempty"` // of the file now; "" when it is invalid
	// Stale says the running service uses another version (the file changed
	// since it started; restart the service to apply it).
	Stale bool   `json:"stale,omitempty"`
	Error string `json:"error,omitempty"`
}

// SQLiteStatus is the database file.
type SQLiteStatus = health.SQLite

// RegistryStatus is the gita registry.
type RegistryStatus = health.Registry

// StateHubStatus is the State Hub connection. tamq works without it.
type StateHubStatus struct {
	// Kind is the kind of State Hub ([statehub] kind). For any but the
	// contract, State Hub is coordination-engine's to read: tamq neither
	// probes it nor posts to it, and its receipts go through the engine.
	Kind    string `json:"kind"`
	APIBase string `json:"api_base"`
	// APIBaseFrom says where api_base came from: the environment, the
	// config file, or the default (config.Loaded.APIBaseOrigin).
	APIBaseFrom           string `json:"api_base_from,omitempty"`
	Reachable             bool   `json:"reachable"`
	CredentialsConfigured bool   `json:"credentials_configured"`
	// UnpublishedReceipts counts the receipts State Hub does not have yet.
	// The service publishes them; they wait while State Hub cannot be
	// reached, which is not a problem for tamq.
	UnpublishedReceipts int `json:"unpublished_receipts"`
	// Publishing is how the service publishes them; absent when it is down.
	Publishing *PublishStatus `json:"publishing,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// How receipts go to State Hub.
const (
	ViaEngine = "engine" // attached: coordination-engine posts them with its credentials
	ViaDirect = "direct" // tamq posts them itself, with statehub.credential_command
)

// PublishStatus is the receipt publisher: the way the next batch goes, its
// last success and, while it fails, why.
type PublishStatus struct {
	Via           string     `json:"via"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	// LastError is why the last attempt failed; absent once one succeeds.
	// It never holds the token.
	LastError string `json:"last_error,omitempty"`
	// Paused: State Hub refused the credentials (or the credential command
	// failed); the receipts stay pending and are tried again, slowly.
	Paused bool `json:"paused"`
}

// QueueStatus counts messages by state.
type QueueStatus struct {
	Counts          map[string]int `json:"counts"`
	OldestPendingAt *time.Time     `json:"oldest_pending_at,omitempty"`
	HistoryMessages int            `json:"history_messages"`
	HistoryBytes    int64          `json:"history_bytes"`
	Error           string         `json:"error,omitempty"`
}

// LeaseStatus counts local delivery leases (claims of messages being written).
type LeaseStatus struct {
	ActiveDeliveryLeases  int    `json:"active_delivery_leases"`
	ExpiredDeliveryLeases int    `json:"expired_delivery_leases"`
	Error                 string `json:"error,omitempty"`
}
