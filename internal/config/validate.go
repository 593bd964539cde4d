package config

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

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
		// The log stays bounded whatever the file says: at most 1 GiB a
		// file and 100 old files. At least one old file: a rotation that
		// kept none would empty the log of all it held at once.
		{"log.max_size_mb", c.Log.MaxSizeMB, MaxLogSizeMB},
		{"log.max_files", c.Log.MaxFiles, MaxLogFiles},
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
	if w := c.Log.RepeatWindowSeconds; w < 0 || w > 3600 {
		return bad("log.repeat_window_seconds", "%d is out of range 0..3600", w)
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
	}{{"coordination.max_attempts", co.MaxRetries}, {"coordination.safety_gated_max_attempts", co.SafetyGatedMaxRetries}} {
		if a.value < 0 || a.value > policy.MaxRetriesLimit {
			return bad(a.key, "%d is out of range 0..%d", a.value, policy.MaxRetriesLimit)
		}
	}
	if co.RetentionDays < 0 || co.RetentionDays > 36500 {
		return bad("coordination.retention_days", "%d is out of range 0..36500", co.RetentionDays)
	}
	if err := prompt.CheckTemplates(co.ContinuationTemplates); err != nil {
		return bad("coordination.continuation_templates", "%v", err)
	}
	if err := prompt.CheckDestination(co.PerspectiveDestination); err != nil {
		return bad("coordination.perspective_destination", "%v", err)
	}
	if _, err := ackmode.Parse(string(co.DeliveryAckMode)); err != nil {
		return bad("coordination.delivery_ack_mode", "%q is not one of %s", co.DeliveryAckMode, strings.Join(ackmode.Names(), ", "))
	}
	if err := validateAPIBase(c.StateHub.APIBase); err != nil {
		return bad("statehub.api_base", "%v", err)
	}
	if err := c.validateHub(); err != nil {
		return err
	}
	if len(c.StateHub.CredentialCommand) > 0 && c.StateHub.CredentialCommand[0] == "" {
		return bad("statehub.credential_command", "the program name (first element) is empty")
	}
	if err := c.Cluster.validate(); err != nil {
		return err
	}
	if err := c.Notify.validate(); err != nil {
		return err
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
		return fmt.Errorf("%q is not a URL", textsafe.RedactURL(raw))
	}
	if u.Scheme == "unix" {
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("%q must be unix:// and a socket's absolute path, as unix:///run/user/1000/statehub.sock", textsafe.RedactURL(raw))
		}
		return nil
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q must be an absolute http:// or https:// URL, or unix:// and a socket's path", textsafe.RedactURL(raw))
	}
	if u.User != nil {
		return fmt.Errorf("must not contain credentials; use statehub.credential_command")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not have a query or fragment", textsafe.RedactURL(raw))
	}
	return nil
}
