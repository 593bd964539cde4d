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
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/trust"
)

// Config holds the settings of both programs. A program reads only the part
// its View names; the rest keeps its defaults and is neither shown nor hashed.
type Config struct {
	Coordination Coordination `toml:"coordination" json:"coordination"`
	StateHub     StateHub     `toml:"statehub" json:"statehub"`
	SQLite       SQLite       `toml:"sqlite" json:"sqlite"`
	Service      Service      `toml:"service" json:"service"`
	Delivery     Delivery     `toml:"delivery" json:"delivery"`
	Policy       Policy       `toml:"policy" json:"policy"`
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

// maxAgentPrograms bounds delivery.agent_programs: a list to read, not a
// registry.
const maxAgentPrograms = 64

// Coordination holds the values spec section 9.1 requires to be configurable,
// grouped by the program that reads them so each program's view can name its
// own. The fields are promoted: c.Coordination.MaxAttempts reads as before.
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
	MaxAttempts           int   `toml:"max_attempts" json:"max_attempts"`
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
	SafetyGatedMaxAttempts      int `toml:"safety_gated_max_attempts" json:"safety_gated_max_attempts"`
	// LeaseMissedRenewals is how many renewal intervals an acknowledged
	// lease may go without a renewal (or checkpoint) before it expires.
	LeaseMissedRenewals int `toml:"lease_missed_renewals" json:"lease_missed_renewals"`
	// ContinuationTemplates replace the built-in continuation templates of
	// a wake's prompt when not empty; a repository's own templates file
	// comes before them. Empty and unset are the same (omitempty), so
	// spelling out the default does not change the config version.
	ContinuationTemplates []string `toml:"continuation_templates" json:"continuation_templates,omitempty"`
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
	StateHub *StateHub `toml:"statehub" json:"statehub"`
	SQLite   *SQLite   `toml:"sqlite" json:"sqlite"`
	Service  *Service  `toml:"service" json:"service"`
	Delivery *Delivery `toml:"delivery" json:"delivery"`
	Policy   *Policy   `toml:"policy" json:"policy"`
}

type engineView struct {
	Coordination struct {
		*SharedCoordination
		*EngineCoordination
	} `toml:"coordination" json:"coordination"`
	StateHub *StateHub `toml:"statehub" json:"statehub"`
	SQLite   *SQLite   `toml:"sqlite" json:"sqlite"`
	Service  *Service  `toml:"service" json:"service"`
	Policy   *Policy   `toml:"policy" json:"policy"`
}

// View is the part of c that program p reads, for encoding (as JSON or
// TOML) or decoding into; it shares c's memory.
func (c *Config) View(p paths.Program) any {
	switch p {
	case paths.Tamq:
		v := &tamqView{StateHub: &c.StateHub, SQLite: &c.SQLite, Service: &c.Service, Delivery: &c.Delivery, Policy: &c.Policy}
		v.Coordination.SharedCoordination = &c.Coordination.SharedCoordination
		v.Coordination.TamqCoordination = &c.Coordination.TamqCoordination
		return v
	case paths.Engine:
		v := &engineView{StateHub: &c.StateHub, SQLite: &c.SQLite, Service: &c.Service, Policy: &c.Policy}
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

// StateHub says where State Hub is and how to obtain its credentials. The token
// itself never appears in configuration: credential_command is run when needed.
type StateHub struct {
	APIBase           string   `toml:"api_base" json:"api_base"`
	CredentialCommand []string `toml:"credential_command" json:"credential_command,omitempty"`
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
// environment set it: the Unix socket the reference State Hub listens on by
// default, in the runtime directory beside the programs' own sockets. A
// socket there is reachable by the user alone and its owner is checked; a
// loopback port, the old default, could be taken by any local user while
// State Hub was not running (docs/statehub-contract.md).
func DefaultStateHubAPIBase(p paths.Paths) string { return "unix://" + p.StateHubSocket }

// Default returns the configuration used when no file sets anything.
func Default() Config {
	return Config{
		Coordination: Coordination{
			SharedCoordination: SharedCoordination{
				WakeAckTimeoutSeconds: 30,
				RetryBackoffSeconds:   []int{5, 15, 60, 300},
				MaxAttempts:           4,
			},
			TamqCoordination: TamqCoordination{DeliveryAckMode: ackmode.Injected},
			EngineCoordination: EngineCoordination{
				StateHubPollIntervalSeconds: 15,
				LeaseRenewIntervalSeconds:   10,
				SafetyGatedMaxAttempts:      0,
				LeaseMissedRenewals:         3,
				RetentionDays:               90,
			},
		},
		// api_base depends on the paths: Load and Defaults set it.
		StateHub: StateHub{},
		SQLite:   SQLite{BusyTimeoutMS: 5000},
		Service:  Service{ShutdownGraceSeconds: 10},
		Delivery: Delivery{EnterPauseMS: 200, QuietMS: 150, MaxQuietWaitMS: 2000, BlockQuietMS: 3000, MaxBatch: 50},
		Policy: Policy{
			Profile:  policy.DefaultName,
			Profiles: map[string]policy.Profile{policy.DefaultName: policy.Default()},
		},
	}
}

// Loaded is a validated effective configuration and where it came from.
type Loaded struct {
	Config
	// File is the config file consulted; FileExists says whether it was there.
	File       string
	FileExists bool
	// Overrides lists values taken from the environment, as "key from VAR".
	Overrides []string
	// Version is the effective config version recorded in receipts: a hash
	// of the keys the program reads.
	Version string

	profileRef string
}

// Defaults is the configuration with every default and no file, for
// reports that go on when the file is invalid.
func Defaults(p paths.Paths) *Loaded {
	l := &Loaded{Config: Default(), File: p.ConfigFile}
	l.StateHub.APIBase = DefaultStateHubAPIBase(p)
	l.Version = l.Config.Version(p.Program)
	l.profileRef = l.Config.ProfileRef()
	return l
}

// ProfileRef is Config.ProfileRef computed once: it is recorded with every
// message, and hashing the profile each time is wasted work.
func (l *Loaded) ProfileRef() string {
	if l.profileRef == "" {
		l.profileRef = l.Config.ProfileRef()
	}
	return l.profileRef
}

// Load reads the program's config file (a missing default file means defaults),
// applies environment overrides and validates the result.
func Load(p paths.Paths) (*Loaded, error) {
	// The file names the command run for State Hub's token (as the user):
	// one another user could write is refused before a byte of it is used.
	data, err := trust.ReadFile(p.ConfigFile, "config file")
	exists := true
	switch {
	case errs.Is(err, errs.PermissionDeny):
		return nil, err
	case errors.Is(err, fs.ErrNotExist) && p.ConfigVar == "":
		data, exists = nil, false
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.New(errs.ConfigInvalid, "config file %s (from %s) does not exist", p.ConfigFile, p.ConfigVar).
			WithHint("create it, or unset %s to use %s's defaults", p.ConfigVar, p.Program)
	case err != nil:
		return nil, errs.New(errs.ConfigInvalid, "cannot read config file %s: %v", p.ConfigFile, pathErrCause(err))
	}
	return load(p, data, exists)
}

// load is Load after the file is read: the bytes are parsed, the
// environment applied and the result validated. Apart so the fuzz target
// runs what Load runs on a file's bytes, without a file.
func load(p paths.Paths, data []byte, exists bool) (*Loaded, error) {
	cfg, err := Parse(p.Program, p.ConfigFile, data)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Config: cfg, File: p.ConfigFile, FileExists: exists}
	if l.StateHub.APIBase == "" {
		l.StateHub.APIBase = DefaultStateHubAPIBase(p)
	}
	if p.StateHubAPIBase != "" {
		l.StateHub.APIBase = p.StateHubAPIBase
		l.Overrides = append(l.Overrides, "statehub.api_base from "+paths.StateHubAPIBaseVar)
	}
	if p.PolicyProfile != "" {
		l.Policy.Profile = p.PolicyProfile
		l.Overrides = append(l.Overrides, "policy.profile from "+p.PolicyProfileVar)
	}
	if err := l.Validate(); err != nil {
		return nil, errs.New(errs.ConfigInvalid, "%s", l.describe(err))
	}
	l.Version = l.Config.Version(p.Program)
	l.profileRef = l.Config.ProfileRef()
	return l, nil
}

// describe names where a bad value came from: the environment or the file.
func (l *Loaded) describe(err error) string {
	var fe *fieldError
	if errors.As(err, &fe) {
		for _, o := range l.Overrides {
			if key, variable, _ := strings.Cut(o, " from "); key == fe.key {
				return fmt.Sprintf("%s: %s", variable, fe.problem)
			}
		}
	}
	return fmt.Sprintf("config %s: %v", l.File, err)
}

func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse decodes program p's TOML over the defaults without validating. A
// [policy.profiles.X] table replaces the built-in profile of the same name
// whole, so what a profile allows is always visible in one place.
func Parse(p paths.Program, file string, data []byte) (Config, error) {
	cfg := Default()
	cfg.Policy.Profiles = nil
	err := decodeStrict(data, cfg.View(p))
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		// Keys p does not read are misspelt or the other program's. Decoding
		// against every key of both tells which: what fails there (a
		// misspelling, or a wrong type) is reported as it always was, and
		// what does not is the other program's. Each program has its own
		// file, so such a key is in the wrong one.
		all := Default()
		if err = decodeStrict(data, &all); err == nil {
			return Config{}, errs.New(errs.ConfigInvalid, "config %s: %s", file, othersKeys(p, strict))
		}
	}
	if err != nil {
		return Config{}, errs.New(errs.ConfigInvalid, "%s", decodeMessage(file, err))
	}
	if _, ok := cfg.Policy.Profiles[policy.DefaultName]; !ok {
		if cfg.Policy.Profiles == nil {
			cfg.Policy.Profiles = map[string]policy.Profile{}
		}
		cfg.Policy.Profiles[policy.DefaultName] = policy.Default()
	}
	return cfg, nil
}

func decodeStrict(data []byte, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// missingKeys names the keys a strict decode did not know, with their lines.
func missingKeys(strict *toml.StrictMissingError) string {
	keys := make([]string, 0, len(strict.Errors))
	for _, e := range strict.Errors {
		row, _ := e.Position()
		keys = append(keys, fmt.Sprintf("'%s' (line %d)", strings.Join(e.Key(), "."), row))
	}
	return strings.Join(keys, ", ")
}

// othersKeys says that the keys strict lists belong to the program other than p.
func othersKeys(p paths.Program, strict *toml.StrictMissingError) string {
	if len(strict.Errors) == 1 {
		return fmt.Sprintf("key %s is %s's; %s does not use it", missingKeys(strict), other(p), p)
	}
	return fmt.Sprintf("keys %s are %s's; %s does not use them", missingKeys(strict), other(p), p)
}

func decodeMessage(file string, err error) string {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		noun := "key"
		if len(strict.Errors) > 1 {
			noun = "keys"
		}
		return fmt.Sprintf("config %s: unknown %s %s", file, noun, missingKeys(strict))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := goTypeDetail().ReplaceAllString(strings.TrimPrefix(de.Error(), "toml: "), "a value of type $1")
		if key := strings.Join(de.Key(), "."); key != "" {
			msg = key + ": " + msg
		}
		return fmt.Sprintf("config %s: line %d, column %d: %s", file, row, col, msg)
	}
	// Type mismatches come as plain errors; strip the library's prefix.
	return fmt.Sprintf("config %s: %s", file, strings.TrimPrefix(err.Error(), "toml: "))
}

// goTypeDetail matches the Go struct field the TOML library names in type errors,
// which means nothing to someone editing the file.
// It is compiled on first use, since it is needed only for a broken file.
var goTypeDetail = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`struct field \S+ of type (\S+)`) })

// fieldError is a validation problem of one key.
type fieldError struct{ key, problem string }

func (e *fieldError) Error() string { return e.key + ": " + e.problem }

func bad(key, format string, args ...any) error {
	return &fieldError{key: key, problem: fmt.Sprintf(format, args...)}
}

// Validate checks every value; the error names the first offending key.
func (c *Config) Validate() error {
	co := c.Coordination
	positive := []struct {
		key   string
		value int
		max   int
	}{
		{"coordination.statehub_poll_interval_seconds", co.StateHubPollIntervalSeconds, 86400},
		{"coordination.wake_ack_timeout_seconds", co.WakeAckTimeoutSeconds, 86400},
		{"coordination.lease_renew_interval_seconds", co.LeaseRenewIntervalSeconds, 86400},
		{"coordination.lease_missed_renewals", co.LeaseMissedRenewals, 100},
		{"sqlite.busy_timeout_ms", c.SQLite.BusyTimeoutMS, 600000},
		{"service.shutdown_grace_seconds", c.Service.ShutdownGraceSeconds, 3600},
		{"delivery.block_quiet_ms", c.Delivery.BlockQuietMS, 60000},
	}
	for _, p := range positive {
		if p.value < 1 || p.value > p.max {
			return bad(p.key, "%d is out of range 1..%d", p.value, p.max)
		}
	}
	for _, d := range []struct {
		key   string
		value int
	}{{"delivery.enter_pause_ms", c.Delivery.EnterPauseMS}, {"delivery.quiet_ms", c.Delivery.QuietMS}, {"delivery.max_quiet_wait_ms", c.Delivery.MaxQuietWaitMS}} {
		if d.value < 0 || d.value > 60000 {
			return bad(d.key, "%d is out of range 0..60000", d.value)
		}
	}
	if b := c.Delivery.MaxBatch; b < 0 || b > MaxBatchLimit {
		return bad("delivery.max_batch", "%d is out of range 0..%d", b, MaxBatchLimit)
	}
	if err := checkAgentPrograms(c.Delivery.AgentPrograms); err != nil {
		return bad("delivery.agent_programs", "%v", err)
	}
	if len(co.RetryBackoffSeconds) == 0 {
		return bad("coordination.retry_backoff_seconds", "must list at least one delay")
	}
	for i, s := range co.RetryBackoffSeconds {
		if s < 1 || s > 86400 {
			return bad("coordination.retry_backoff_seconds", "entry %d is %d; each delay must be 1..86400 seconds", i+1, s)
		}
	}
	for _, a := range []struct {
		key   string
		value int
	}{{"coordination.max_attempts", co.MaxAttempts}, {"coordination.safety_gated_max_attempts", co.SafetyGatedMaxAttempts}} {
		if a.value < 0 || a.value > policy.MaxAttemptsLimit {
			return bad(a.key, "%d is out of range 0..%d", a.value, policy.MaxAttemptsLimit)
		}
	}
	if co.RetentionDays < 0 || co.RetentionDays > 36500 {
		return bad("coordination.retention_days", "%d is out of range 0..36500", co.RetentionDays)
	}
	if err := prompt.CheckTemplates(co.ContinuationTemplates); err != nil {
		return bad("coordination.continuation_templates", "%v", err)
	}
	if _, err := ackmode.Parse(string(co.DeliveryAckMode)); err != nil {
		return bad("coordination.delivery_ack_mode", "%q is not one of %s", co.DeliveryAckMode, strings.Join(ackmode.Names(), ", "))
	}
	if err := validateAPIBase(c.StateHub.APIBase); err != nil {
		return bad("statehub.api_base", "%v", err)
	}
	if len(c.StateHub.CredentialCommand) > 0 && c.StateHub.CredentialCommand[0] == "" {
		return bad("statehub.credential_command", "the program name (first element) is empty")
	}
	for _, name := range c.profileNames() {
		if err := policy.ValidateName(name); err != nil {
			return bad("policy.profiles", "%v", err)
		}
		if err := c.Policy.Profiles[name].Validate(); err != nil {
			return bad("policy.profiles."+name, "%v", err)
		}
	}
	if _, ok := c.Policy.Profiles[c.Policy.Profile]; !ok {
		return bad("policy.profile", "profile %q is not defined (defined: %s)", c.Policy.Profile, strings.Join(c.profileNames(), ", "))
	}
	return nil
}

// checkAgentPrograms accepts program names as a process shows its own: a
// file name (no directory, no blanks or control characters), not a path or
// a command line.
func checkAgentPrograms(names []string) error {
	if len(names) > maxAgentPrograms {
		return fmt.Errorf("%d names; at most %d", len(names), maxAgentPrograms)
	}
	for i, n := range names {
		switch {
		case n == "" || n == "." || n == "..":
			return fmt.Errorf("entry %d is %q; name a program, as \"aider\"", i+1, n)
		case len(n) > 255:
			return fmt.Errorf("entry %d is longer than 255 bytes", i+1)
		case strings.ContainsAny(n, "/ \t\r\n") || strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Errorf("entry %d (%q) must be a program's file name: no directory, no blanks", i+1, n)
		}
	}
	return nil
}

func (c *Config) profileNames() []string {
	names := make([]string, 0, len(c.Policy.Profiles))
	for n := range c.Policy.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// validateAPIBase accepts an absolute http(s) URL without embedded credentials
// (secrets never live in configuration, spec section 9.1), or unix:// and the
// absolute path of a socket.
func validateAPIBase(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme == "unix" {
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("%q must be unix:// and a socket's absolute path, as unix:///run/user/1000/statehub.sock", raw)
		}
		return nil
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q must be an absolute http:// or https:// URL, or unix:// and a socket's path", raw)
	}
	if u.User != nil {
		return fmt.Errorf("must not contain credentials; use statehub.credential_command")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not have a query or fragment", raw)
	}
	return nil
}

// ActiveProfile is the selected policy profile.
func (c *Config) ActiveProfile() policy.Profile { return c.Policy.Profiles[c.Policy.Profile] }

// ProfileRef is the "name@version" recorded with every message, lease and receipt.
func (c *Config) ProfileRef() string { return c.Policy.Profile + "@" + c.ActiveProfile().Version() }

// EffectiveSafetyGatedMaxAttempts is the smaller of the coordination setting and
// the profile's, so enabling retries of safety-gated work always takes an explicit
// policy (spec section 3) and no single setting can bypass it.
func (c *Config) EffectiveSafetyGatedMaxAttempts() int {
	return min(c.Coordination.SafetyGatedMaxAttempts, c.ActiveProfile().SafetyGatedMaxAttempts)
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
	norm.Policy.Profiles = map[string]policy.Profile{}
	for name, prof := range c.Policy.Profiles {
		prof.Allow = slices.Sorted(slices.Values(prof.Allow))
		prof.RequireHuman = slices.Sorted(slices.Values(prof.RequireHuman))
		norm.Policy.Profiles[name] = prof
	}
	b, err := json.Marshal(norm.View(p)) // maps marshal with sorted keys
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
