// Package config loads, validates and describes the TOML configuration of tamq
// and coordination-engine: the runtime values of spec section 9.1, storage and
// service settings, the State Hub address and the policy profiles of section 6.1.
// Each program has its own file and reads only its own keys and the shared ones
// (docs/configuration.md has the table). Decoding is strict, so a misspelt key,
// or the other program's key, is an error rather than a silent default.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
)

// Config holds the settings of both programs. A program reads only the part
// its View names; the rest keeps its defaults and is neither shown nor hashed.
type Config struct {
	Coordination Coordination `toml:"coordination" json:"coordination"`
	StateHub     StateHub     `toml:"statehub" json:"statehub"`
	SQLite       SQLite       `toml:"sqlite" json:"sqlite"`
	Service      Service      `toml:"service" json:"service"`
	Delivery     Delivery     `toml:"delivery" json:"delivery"`
	Log          Log          `toml:"log" json:"log"`
	Policy       Policy       `toml:"policy" json:"policy"`
	// Cluster is off (all zero) unless a file sets it; omitzero keeps an
	// unset section out of `config show` and the version hash, so a config
	// without it keeps the version it had before the section existed.
	Cluster Cluster `toml:"cluster,omitzero" json:"cluster,omitzero"`
	// Notify is off (all zero) unless a file sets it, as Cluster.
	Notify Notify `toml:"notify,omitzero" json:"notify,omitzero"`
}

// Delivery holds how tamq writes into terminals. Only tamq reads it.
type Delivery struct {
	// EnterPauseMS separates the pasted text from the Enter that submits it:
	// agents treat an Enter that arrives with a paste as a newline
	// (docs/delivery.md).
	EnterPauseMS int `toml:"enter_pause_ms" json:"enter_pause_ms"`
	// A broker delivers when the agent's output has been quiet for QuietMS
	// and the operator is not mid-line, or after MaxQuietWaitMS regardless.
	QuietMS        int `toml:"quiet_ms" json:"quiet_ms"`
	MaxQuietWaitMS int `toml:"max_quiet_wait_ms" json:"max_quiet_wait_ms"`
	// BlockQuietMS closes a To: block the agent is printing once its output
	// has been quiet this long, so an open block never swallows the prompt
	// and whatever the terminal shows next.
	BlockQuietMS int `toml:"block_quiet_ms" json:"block_quiet_ms"`
	// MaxBatch is how many messages waiting for one window may go in one
	// paste with one Enter (docs/delivery.md); 0 or 1 delivers one at a time.
	MaxBatch int `toml:"max_batch" json:"max_batch"`
	// AgentPrograms are program names that count as agents beside the
	// known ones (claude, codex, gemini): a window delivers into, and routes
	// the To: lines of, a program of one of these names when it is the
	// terminal's foreground program, started by hand in a shell or not.
	// Empty by default; omitted from the version hash while empty, so the
	// default version is what it was before the key existed.
	AgentPrograms []string `toml:"agent_programs" json:"agent_programs,omitempty"`
}

// Log holds how a detached daemon keeps its log file (both programs read
// it, each for its own file): rotated by size, a few old files kept, and
// a warning that repeats written once per window with a count. It changes
// nothing either program decides, so it is left out of the config version
// (Version).
type Log struct {
	// MaxSizeMB is the size, in MiB, at which the log file is rotated.
	MaxSizeMB int `toml:"max_size_mb" json:"max_size_mb"`
	// MaxFiles is how many rotated files are kept besides the current one:
	// the log takes at most (MaxFiles+1) × MaxSizeMB.
	MaxFiles int `toml:"max_files" json:"max_files"`
	// RepeatWindowSeconds is the window within which a warning or error
	// that repeats (same level, message and the attributes that name what
	// it is about) is written once, then once more with its count; 0
	// writes every one.
	RepeatWindowSeconds int `toml:"repeat_window_seconds" json:"repeat_window_seconds"`
}

// The bounds of [log]: a file of at most 1 GiB, at most 100 old ones.
const (
	MaxLogSizeMB = 1024
	MaxLogFiles  = 100
)

// maxAgentPrograms bounds delivery.agent_programs: a list to read, not a
// registry.
const maxAgentPrograms = 64

// Coordination holds the values spec section 9.1 requires to be configurable,
// grouped by the program that reads them so each program's view can name its
// own. The fields are promoted: c.Coordination.MaxRetries reads as before.
type Coordination struct {
	SharedCoordination
	TamqCoordination
	EngineCoordination
}

// SharedCoordination is the part of [coordination] both programs read: tamq
// for its deliveries (the ack deadline of acknowledged mode, redelivery
// backoff and attempts), the engine for its leases.
type SharedCoordination struct {
	WakeAckTimeoutSeconds int   `toml:"wake_ack_timeout_seconds" json:"wake_ack_timeout_seconds"`
	RetryBackoffSeconds   []int `toml:"retry_backoff_seconds" json:"retry_backoff_seconds"`
	// MaxRetries is how many times a delivery (tamq) or a lease (the
	// engine) may be tried again after its first attempt: 1+MaxRetries
	// attempts in all. Its key keeps the spec's name, max_attempts.
	MaxRetries int `toml:"max_attempts" json:"max_attempts"`
}

// TamqCoordination is the part of [coordination] only tamq reads.
type TamqCoordination struct {
	// DeliveryAckMode is the mode of a message sent without one.
	DeliveryAckMode ackmode.Mode `toml:"delivery_ack_mode" json:"delivery_ack_mode"`
	// WakeRestartsAgent lets a wake start the window's recorded command
	// again, in the same window, when it had exited (capability "started").
	// Off by default: a wake then answers "unavailable" for such a window.
	WakeRestartsAgent bool `toml:"wake_restarts_agent" json:"wake_restarts_agent"`
}

// EngineCoordination is the part of [coordination] only coordination-engine
// reads: it polls State Hub, renews leases and gates safety-gated work.
type EngineCoordination struct {
	StateHubPollIntervalSeconds int `toml:"statehub_poll_interval_seconds" json:"statehub_poll_interval_seconds"`
	LeaseRenewIntervalSeconds   int `toml:"lease_renew_interval_seconds" json:"lease_renew_interval_seconds"`
	// SafetyGatedMaxRetries is the retries of safety-gated work (key:
	// the spec's safety_gated_max_attempts).
	SafetyGatedMaxRetries int `toml:"safety_gated_max_attempts" json:"safety_gated_max_attempts"`
	// LeaseMissedRenewals is how many renewal intervals an acknowledged
	// lease may go without a renewal (or checkpoint) before it expires.
	LeaseMissedRenewals int `toml:"lease_missed_renewals" json:"lease_missed_renewals"`
	// ContinuationTemplates replace the built-in continuation templates of
	// a wake's prompt when not empty; a repository's own templates file
	// comes before them. Empty and unset are the same (omitempty), so
	// spelling out the default does not change the config version.
	ContinuationTemplates []string `toml:"continuation_templates" json:"continuation_templates,omitempty"`
	// PerspectiveDestination is the hall-of-helix destination the fourth
	// built-in template names (spec section 6): where an agent with no safe
	// work left writes its perspective entry. Unset (omitempty: the config
	// version stays as before), the template says where else to put it.
	PerspectiveDestination string `toml:"perspective_destination" json:"perspective_destination,omitempty"`
	// RetentionDays is how long the engine keeps history nothing decides
	// by any more (published receipts, ended leases and their checkpoints,
	// replaced triggers); 0 keeps it for good. See `coordination-engine
	// purge`.
	RetentionDays int `toml:"retention_days" json:"retention_days"`
}

// tamqView and engineView are the keys each program reads, in the order
// `config show` prints them. They point into a Config, so decoding a file
// into a view fills the Config and reports every other key as unknown, and
// encoding a view shows and hashes that program's keys and no others.
type tamqView struct {
	Coordination struct {
		*SharedCoordination
		*TamqCoordination
	} `toml:"coordination" json:"coordination"`
	StateHub struct {
		*SharedStateHub
	} `toml:"statehub" json:"statehub"`
	SQLite   *SQLite   `toml:"sqlite" json:"sqlite"`
	Service  *Service  `toml:"service" json:"service"`
	Delivery *Delivery `toml:"delivery" json:"delivery"`
	// Log is nil when Version hashes the view (omitempty leaves it out).
	Log    *Log    `toml:"log" json:"log,omitempty"`
	Policy *Policy `toml:"policy" json:"policy"`
}

type engineView struct {
	Coordination struct {
		*SharedCoordination
		*EngineCoordination
	} `toml:"coordination" json:"coordination"`
	StateHub struct {
		*SharedStateHub
		*EngineStateHub
	} `toml:"statehub" json:"statehub"`
	SQLite  *SQLite  `toml:"sqlite" json:"sqlite"`
	Service *Service `toml:"service" json:"service"`
	Log     *Log     `toml:"log" json:"log,omitempty"` // as tamqView's
	Policy  *Policy  `toml:"policy" json:"policy"`
	Cluster *Cluster `toml:"cluster,omitzero" json:"cluster,omitzero"`
	Notify  *Notify  `toml:"notify,omitzero" json:"notify,omitzero"`
}

// View is the part of c that program p reads, for encoding (as JSON or
// TOML) or decoding into; it shares c's memory.
func (c *Config) View(p paths.Program) any {
	switch p {
	case paths.Tamq:
		v := &tamqView{SQLite: &c.SQLite, Service: &c.Service, Delivery: &c.Delivery, Log: &c.Log, Policy: &c.Policy}
		v.StateHub.SharedStateHub = &c.StateHub.SharedStateHub
		v.Coordination.SharedCoordination = &c.Coordination.SharedCoordination
		v.Coordination.TamqCoordination = &c.Coordination.TamqCoordination
		return v
	case paths.Engine:
		v := &engineView{SQLite: &c.SQLite, Service: &c.Service, Log: &c.Log, Policy: &c.Policy, Cluster: &c.Cluster, Notify: &c.Notify}
		v.StateHub.SharedStateHub = &c.StateHub.SharedStateHub
		v.StateHub.EngineStateHub = &c.StateHub.EngineStateHub
		v.Coordination.SharedCoordination = &c.Coordination.SharedCoordination
		v.Coordination.EngineCoordination = &c.Coordination.EngineCoordination
		return v
	}
	// paths.Resolve accepts no other program, so this is a bug.
	panic(fmt.Sprintf("config: unknown program %q", p))
}

// other is the program whose keys p refuses.
func other(p paths.Program) paths.Program {
	if p == paths.Tamq {
		return paths.Engine
	}
	return paths.Tamq
}

// StateHub says which tracker is State Hub, where it is and how to obtain
// its credentials. The token itself never appears in configuration:
// credential_command is run when needed. Both programs read the shared
// part; the settings of a kind of tracker are the engine's alone.
type StateHub struct {
	SharedStateHub
	EngineStateHub
}

// SharedStateHub is the part of [statehub] both programs read.
type SharedStateHub struct {
	// Kind is the kind of tracker (KindContract, KindGitHub, KindBeads): the engine
	// reads it through that kind's driver; tamq, for a kind other than the
	// contract, leaves State Hub to the engine (its receipts go through the
	// engine only). The contract, the default, is left out of the version
	// hash, so a config that does not name it keeps its version.
	Kind              string   `toml:"kind" json:"kind,omitempty"`
	APIBase           string   `toml:"api_base" json:"api_base"`
	CredentialCommand []string `toml:"credential_command" json:"credential_command,omitempty"`
}

// EngineStateHub is the part of [statehub] only coordination-engine reads:
// the settings of its kind of tracker. A section of another kind than the
// one in use is refused, so a forgotten kind is said rather than ignored.
type EngineStateHub struct {
	GitHub GitHub `toml:"github,omitzero" json:"github,omitzero"`
	Beads  Beads  `toml:"beads,omitzero" json:"beads,omitzero"`
}

// The kinds of State Hub.
const (
	KindContract = "contract"
	KindGitHub   = "github"
	KindBeads    = "beads"
)

// Kinds are the kinds of State Hub this build has drivers for.
var Kinds = []string{KindContract, KindGitHub, KindBeads}

// HubKind is the kind of State Hub in use.
func (s SharedStateHub) HubKind() string {
	if s.Kind == "" {
		return KindContract
	}
	return s.Kind
}

// SQLite holds storage settings.
type SQLite struct {
	BusyTimeoutMS int `toml:"busy_timeout_ms" json:"busy_timeout_ms"`
}

// Service holds daemon settings.
type Service struct {
	ShutdownGraceSeconds int `toml:"shutdown_grace_seconds" json:"shutdown_grace_seconds"`
}

// Policy selects a profile and defines the available ones.
type Policy struct {
	Profile  string                    `toml:"profile" json:"profile"`
	Profiles map[string]policy.Profile `toml:"profiles" json:"profiles"`
}

// DefaultStateHubAPIBase is statehub.api_base when neither config nor
// environment set it: the spec's default (section 9). A loopback port may
// be taken by any local user while State Hub is not running, so before a
// byte is sent the listening socket must be the user's own (internal/trust,
// docs/statehub-contract.md). The reference State Hub listens on a Unix
// socket by default (ReferenceStateHubAPIBase), which the programs are
// pointed at.
const DefaultStateHubAPIBase = "http://127.0.0.1:8000"

// ReferenceStateHubAPIBase is where the reference State Hub
// (coordination-engine dev-statehub) listens by default: statehub.sock in
// the runtime directory, beside the programs' own sockets, reachable by
// the user alone.
func ReferenceStateHubAPIBase(p paths.Paths) string { return "unix://" + p.StateHubSocket }

// Default returns the configuration used when no file sets anything.
func Default() Config {
	return Config{
		Coordination: Coordination{
			SharedCoordination: SharedCoordination{
				WakeAckTimeoutSeconds: 30,
				RetryBackoffSeconds:   []int{5, 15, 60, 300},
				MaxRetries:            4,
			},
			TamqCoordination: TamqCoordination{DeliveryAckMode: ackmode.Injected},
			EngineCoordination: EngineCoordination{
				StateHubPollIntervalSeconds: 15,
				LeaseRenewIntervalSeconds:   10,
				SafetyGatedMaxRetries:       0,
				LeaseMissedRenewals:         3,
				RetentionDays:               90,
			},
		},
		// api_base depends on the paths and the kind: Load and Defaults set it.
		StateHub: StateHub{SharedStateHub: SharedStateHub{Kind: KindContract}},
		SQLite:   SQLite{BusyTimeoutMS: 5000},
		Service:  Service{ShutdownGraceSeconds: 10},
		Delivery: Delivery{EnterPauseMS: 200, QuietMS: 150, MaxQuietWaitMS: 2000, BlockQuietMS: 3000, MaxBatch: 50},
		Log:      Log{MaxSizeMB: 10, MaxFiles: 5, RepeatWindowSeconds: 60},
		Policy: Policy{
			Profile:  policy.DefaultName,
			Profiles: map[string]policy.Profile{policy.DefaultName: policy.Default()},
		},
	}
}

// ActiveProfile is the selected policy profile.
func (c *Config) ActiveProfile() policy.Profile { return c.Policy.Profiles[c.Policy.Profile] }

// ProfileRef is the "name@version" recorded with every message, lease and receipt.
func (c *Config) ProfileRef() string { return c.Policy.Profile + "@" + c.ActiveProfile().Version() }

// EffectiveSafetyGatedMaxRetries is the smaller of the coordination setting and
// the profile's, so enabling retries of safety-gated work always takes an explicit
// policy (spec section 3) and no single setting can bypass it.
func (c *Config) EffectiveSafetyGatedMaxRetries() int {
	return min(c.Coordination.SafetyGatedMaxRetries, c.ActiveProfile().SafetyGatedMaxRetries)
}

// RetryBackoff is the delay before attempt n+1 after attempt n (1-based) failed;
// past the end of the list the last delay repeats.
func (c *Config) RetryBackoff(attempt int) time.Duration {
	list := c.Coordination.RetryBackoffSeconds
	i := min(max(attempt, 1), len(list)) - 1
	return time.Duration(list[i]) * time.Second
}

// BusyTimeout is SQLite's busy timeout.
func (c *Config) BusyTimeout() time.Duration {
	return time.Duration(c.SQLite.BusyTimeoutMS) * time.Millisecond
}

// EnterPause is the pause between a paste and its Enter.
func (c *Config) EnterPause() time.Duration {
	return time.Duration(c.Delivery.EnterPauseMS) * time.Millisecond
}

// MaxBatchLimit bounds delivery.max_batch: the paste's size limit (8 KiB)
// allows no more than a few hundred short messages anyway.
const MaxBatchLimit = 1000

// MaxBatch is how many messages one delivery may take, at least one.
func (c *Config) MaxBatch() int { return max(c.Delivery.MaxBatch, 1) }

// LogMaxBytes is the size at which a daemon's log file is rotated.
func (c *Config) LogMaxBytes() int64 { return int64(c.Log.MaxSizeMB) << 20 }

// RepeatWindow is the window of the log's repeated warnings; 0: none.
func (c *Config) RepeatWindow() time.Duration {
	return time.Duration(c.Log.RepeatWindowSeconds) * time.Second
}

// ShutdownGrace bounds how long a service takes to stop.
func (c *Config) ShutdownGrace() time.Duration {
	return time.Duration(c.Service.ShutdownGraceSeconds) * time.Second
}

// Version is a short, stable hash of the normalized effective configuration of
// program p, of the keys p reads and no others: equal configurations hash
// equal however the file was written (order, comments, values spelt out that
// equal the defaults), and a key only the other program reads cannot change it.
func (c *Config) Version(p paths.Program) string {
	norm := *c
	if norm.StateHub.Kind == KindContract {
		norm.StateHub.Kind = "" // the default, left out as before the key existed
	}
	norm.Policy.Profiles = map[string]policy.Profile{}
	for name, prof := range c.Policy.Profiles {
		prof.Allow = slices.Sorted(slices.Values(prof.Allow))
		prof.RequireHuman = slices.Sorted(slices.Values(prof.RequireHuman))
		norm.Policy.Profiles[name] = prof
	}
	// How the log is kept changes nothing the program decides (and left
	// out, a config from before [log] keeps its version).
	view := norm.View(p)
	switch v := view.(type) {
	case *tamqView:
		v.Log = nil
	case *engineView:
		v.Log = nil
	}
	b, err := json.Marshal(view) // maps marshal with sorted keys
	if err != nil {
		panic(err) // only ints, strings and slices of them: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// HasCredentialCommand reports whether State Hub credentials can be obtained.
func (c *Config) HasCredentialCommand() bool { return len(c.StateHub.CredentialCommand) > 0 }

// TOML renders program p's keys as a TOML document that Parse accepts for p.
func (c *Config) TOML(p paths.Program) ([]byte, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(c.View(p)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
