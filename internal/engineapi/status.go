package engineapi

import (
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/health"
)

// StatusReport is the result of the status op and the document
// `coordination-engine status --json` prints. Sections are separate so one
// unhealthy part does not hide the others.
type StatusReport struct {
	Healthy   bool             `json:"healthy"`
	Service   ServiceStatus    `json:"service"`
	SQLite    SQLiteStatus     `json:"sqlite"`
	Registry  RegistryStatus   `json:"registry"`
	StateHub  StateHubStatus   `json:"statehub"`
	Tamq      TamqStatus       `json:"tamq"`
	Endpoints []EndpointStatus `json:"endpoints"`
	Leases    LeaseCounts      `json:"leases"`
	// Waiting is the work that waits for a window, an agent or the repo's
	// agent to be free: no gate, woken as soon as that changes.
	Waiting WaitingStatus `json:"waiting"`
	// Tasks counts the tasks of the last observation by where they stand
	// (needs_you, working, retry, waiting, ready, done: see OpTasks).
	Tasks TaskCounts `json:"tasks"`
	// Cluster is the cross-host claim store ([cluster]); nil when none is
	// configured.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
}

// ClusterStatus is this engine's part in a cluster of hosts: its host id,
// etcd's endpoints, how many claims it keeps alive, and etcd's last
// failure ("" while it answers).
type ClusterStatus struct {
	HostID    string   `json:"host_id"`
	Endpoints []string `json:"etcd_endpoints"`
	Claims    int      `json:"claims_held"`
	Error     string   `json:"error,omitempty"`
	// Others counts the tasks other hosts hold, by host, as the last read
	// of every claim (one range read per look) saw them at ReadAt.
	Others map[string]int `json:"held_by_others,omitempty"`
	ReadAt *time.Time     `json:"claims_read_at,omitempty"`
}

// WaitingStatus counts the waiting triggers by what they wait for, and
// lists the oldest of them.
type WaitingStatus struct {
	Counts   map[string]int   `json:"counts"`
	Triggers []WaitingTrigger `json:"triggers"`
	Error    string           `json:"error,omitempty"`
}

// WaitingTrigger is one trigger that waits (pending, or its lease's next
// attempt postponed), and what for, in a code and in words.
type WaitingTrigger struct {
	TriggerID  string    `json:"trigger_id"`
	TaskID     string    `json:"task_id,omitempty"`
	SourceID   string    `json:"source_id"`
	TargetRepo string    `json:"target_repo"`
	LeaseID    string    `json:"lease_id,omitempty"` // when a lease's next attempt waits
	Waiting    string    `json:"waiting"`
	WaitingFor string    `json:"waiting_for"`
	Since      time.Time `json:"since"`
}

// ServiceStatus is the process and its socket (the one status model of both
// programs: internal/health).
type ServiceStatus = health.Service

// SQLiteStatus is the database file.
type SQLiteStatus = health.SQLite

// RegistryStatus is the gita registry.
type RegistryStatus = health.Registry

// StateHubStatus is the State Hub connection: its kind, reachability
// (probed), the observer's last and next look, its event stream, the
// tracker's request budget and what it watches, and the receipt outbox.
type StateHubStatus struct {
	// Kind is the kind of State Hub ([statehub] kind): contract, github.
	Kind    string `json:"kind"`
	APIBase string `json:"api_base"`
	// APIBaseFrom says where api_base came from: the environment, the
	// config file, or the default (config.Loaded.APIBaseOrigin).
	APIBaseFrom           string `json:"api_base_from,omitempty"`
	Reachable             bool   `json:"reachable"`
	CredentialsConfigured bool   `json:"credentials_configured"`
	// Paused: State Hub refused the credentials; observation waits and
	// receipts stay pending until they work.
	Paused   bool       `json:"paused"`
	LastPoll *time.Time `json:"last_poll,omitempty"`
	// UnreachableSince is the first failed look since the last good one
	// (LastPoll): from then on the standings are LastPoll's, and the loop
	// wakes no one new. Nil while State Hub answers.
	UnreachableSince *time.Time `json:"unreachable_since,omitempty"`
	Polls            int        `json:"polls"`
	ObserveError     string     `json:"observe_error,omitempty"`
	EventsConnected  bool       `json:"events_connected"`
	// EventsOffered is false once the server said it has no event stream.
	EventsOffered       bool       `json:"events_offered"`
	UnpublishedReceipts int        `json:"unpublished_receipts"`
	LastPublish         *time.Time `json:"last_publish,omitempty"`
	PublishError        string     `json:"publish_error,omitempty"`
	Error               string     `json:"error,omitempty"`
	// NextLook is when the observer looks next unless something kicks it;
	// RetryAt, when State Hub asked for no requests before then (a rate
	// limit), and RetryReason why.
	NextLook    *time.Time `json:"next_look,omitempty"`
	RetryAt     *time.Time `json:"retry_at,omitempty"`
	RetryReason string     `json:"retry_reason,omitempty"`
	// Budget is the tracker's request budget as it last said it (GitHub's
	// rate limit); nil when it has none.
	Budget *RateBudget `json:"budget,omitempty"`
	// Requests made since the engine started, and how many of them the
	// tracker answered "not modified" (free, for GitHub).
	Requests    int64 `json:"requests,omitempty"`
	NotModified int64 `json:"not_modified,omitempty"`
	// Watched are the repositories the tracker is read in (GitHub: each
	// gita repo's GitHub repository), NotWatched the repos left out and why.
	Watched    []WatchedRepo `json:"watched,omitempty"`
	NotWatched []WatchedRepo `json:"not_watched,omitempty"`
	// Receipts is where receipts go: "published" to State Hub, or "local"
	// (kept in the engine's database; GitHub is not a log).
	Receipts string `json:"receipts,omitempty"`
}

// RateBudget is a tracker's request budget: Remaining of Limit until Reset.
type RateBudget struct {
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// WatchedRepo is a gita repo as the tracker is read for it: where (GitHub:
// owner/name), its page, or why it is not read.
type WatchedRepo struct {
	Repo    string `json:"repo"`
	Where   string `json:"where,omitempty"`
	Link    string `json:"link,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Elsewhere: its work is not in this tracker (no GitHub origin); not
	// a problem to fix.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// TamqStatus is the engine's way into terminals: tamq's socket.
type TamqStatus struct {
	Socket    string `json:"socket"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// EndpointStatus is one tamq endpoint as the engine knows it.
type EndpointStatus struct {
	CoordinationEndpointID string         `json:"coordination_endpoint_id"`
	TamqEndpointID         string         `json:"tamq_endpoint_id"`
	TmuxSession            string         `json:"tmux_session,omitempty"`
	TmuxSocket             string         `json:"tmux_socket,omitempty"`
	State                  string         `json:"state"` // attached | detached
	Proto                  string         `json:"proto"`
	Capabilities           []string       `json:"capabilities"`
	AttachedAt             time.Time      `json:"attached_at"`
	Windows                []AttachWindow `json:"windows"`
}

// LeaseCounts counts leases by state and says when the next one is due
// (an expiry or a retry).
type LeaseCounts struct {
	Counts  map[string]int `json:"counts"`
	NextDue *time.Time     `json:"next_due,omitempty"`
	// AtDialog are the live leases whose agent waits at a dialog, as
	// tamq's broker said at its last renewal: a person is needed there.
	AtDialog []LeaseAtDialog `json:"at_dialog,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// LeaseAtDialog is a live lease held while its agent waits for a person:
// the window (repo) and what shows there.
type LeaseAtDialog struct {
	LeaseID string `json:"lease_id"`
	Dialog  string `json:"dialog"`
}

// PausedWhy says why observation paused (Paused), in words: the credential
// command gave no token (a `gh` not installed), so nothing was refused, or
// State Hub refused the token it gave.
func (h StateHubStatus) PausedWhy() string {
	if strings.HasPrefix(h.ObserveError, "statehub.credential_command") {
		return "statehub.credential_command gave no token"
	}
	return "State Hub refused the credentials"
}
