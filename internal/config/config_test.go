package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
)

// setup writes content (if not nil) to a config file and returns tamq's paths for it.
func setup(t *testing.T, content *string, extraEnv map[string]string) paths.Paths {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "cfg")}
	for k, v := range extraEnv {
		env[k] = v
	}
	p, err := paths.Resolve(paths.Tamq, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if content != nil {
		if err := os.MkdirAll(filepath.Dir(p.ConfigFile), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.ConfigFile, []byte(*content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func ptr(s string) *string { return &s }

func TestDefaults(t *testing.T) {
	l, err := Load(setup(t, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if l.FileExists {
		t.Error("FileExists for a missing file")
	}
	co := l.Coordination
	if co.StateHubPollIntervalSeconds != 15 || co.WakeAckTimeoutSeconds != 30 || co.LeaseRenewIntervalSeconds != 10 ||
		!reflect.DeepEqual(co.RetryBackoffSeconds, []int{5, 15, 60, 300}) || co.MaxAttempts != 4 ||
		co.SafetyGatedMaxAttempts != 0 || co.DeliveryAckMode != "injected" {
		t.Errorf("coordination defaults: %+v", co)
	}
	if l.BusyTimeout() != 5*time.Second || l.ShutdownGrace() != 10*time.Second {
		t.Errorf("busy %v grace %v", l.BusyTimeout(), l.ShutdownGrace())
	}
	if l.StateHub.APIBase != "http://127.0.0.1:8000" {
		t.Errorf("api_base %q", l.StateHub.APIBase)
	}
	if l.Policy.Profile != "default" || !reflect.DeepEqual(l.ActiveProfile(), policy.Default()) {
		t.Errorf("policy %+v", l.Policy)
	}
	if !strings.HasPrefix(l.ProfileRef(), "default@") {
		t.Errorf("ProfileRef %q", l.ProfileRef())
	}
	if len(l.Version) != 12 {
		t.Errorf("Version %q", l.Version)
	}
}

func TestFileValuesAndEnvOverrides(t *testing.T) {
	content := `
[coordination]
max_attempts = 9
retry_backoff_seconds = [1, 2]
delivery_ack_mode = "acknowledged"

[statehub]
api_base = "https://hub.example:8443/api"
credential_command = ["pass", "show", "statehub"]

[policy]
profile = "strict"
[policy.profiles.strict]
allow = ["statehub_read"]
require_human = ["secrets"]
`
	l, err := Load(setup(t, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !l.FileExists || l.Coordination.MaxAttempts != 9 || l.Coordination.DeliveryAckMode != "acknowledged" {
		t.Errorf("file values not applied: %+v", l.Coordination)
	}
	if l.Coordination.WakeAckTimeoutSeconds != 30 {
		t.Error("an unset key lost its default")
	}
	if l.RetryBackoff(1) != time.Second || l.RetryBackoff(2) != 2*time.Second || l.RetryBackoff(7) != 2*time.Second {
		t.Error("RetryBackoff does not follow the list and repeat its last entry")
	}
	if _, ok := l.Policy.Profiles["default"]; !ok {
		t.Error("built-in default profile missing beside a user profile")
	}
	if !strings.HasPrefix(l.ProfileRef(), "strict@") {
		t.Errorf("ProfileRef %q", l.ProfileRef())
	}
	if !l.HasCredentialCommand() {
		t.Error("HasCredentialCommand is false with a command configured")
	}

	l2, err := Load(setup(t, &content, map[string]string{
		"STATEHUB_API_BASE": "http://10.0.0.1:9", "TAMQ_POLICY_PROFILE": "default",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if l2.StateHub.APIBase != "http://10.0.0.1:9" || l2.Policy.Profile != "default" {
		t.Errorf("env overrides not applied: %q %q", l2.StateHub.APIBase, l2.Policy.Profile)
	}
	if len(l2.Overrides) != 2 || l2.Version == l.Version {
		t.Errorf("overrides %v, versions %s %s", l2.Overrides, l.Version, l2.Version)
	}
}

func TestUserDefaultProfileReplacesBuiltIn(t *testing.T) {
	content := "[policy.profiles.default]\nallow = [\"statehub_read\"]\n"
	l, err := Load(setup(t, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.ActiveProfile(); !reflect.DeepEqual(got.Allow, []policy.Category{"statehub_read"}) || len(got.RequireHuman) != 0 {
		t.Errorf("profile %+v", got)
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		env     map[string]string
		want    string
	}{
		{"malformed toml", "[coordination\n", nil, "line 1"},
		{"unknown top key", "colour = 1\n", nil, "unknown key 'colour' (line 1)"},
		{"unknown nested key", "[coordination]\nmax_attempt = 3\n", nil, "unknown key 'coordination.max_attempt' (line 2)"},
		{"two unknown keys", "a = 1\nb = 2\n", nil, "unknown keys 'a' (line 1), 'b' (line 2)"},
		{"wrong type", "[coordination]\nmax_attempts = \"four\"\n", nil, "max_attempts"},
		{"max_attempts high", "[coordination]\nmax_attempts = 10\n", nil, "coordination.max_attempts: 10 is out of range 0..9"},
		{"max_attempts negative", "[coordination]\nmax_attempts = -1\n", nil, "coordination.max_attempts: -1 is out of range 0..9"},
		{"gated high", "[coordination]\nsafety_gated_max_attempts = 10\n", nil, "coordination.safety_gated_max_attempts: 10 is out of range 0..9"},
		{"profile gated high", "[policy.profiles.default]\nsafety_gated_max_attempts = 12\n", nil, "policy.profiles.default: safety_gated_max_attempts: 12"},
		{"backoff empty", "[coordination]\nretry_backoff_seconds = []\n", nil, "coordination.retry_backoff_seconds: must list at least one delay"},
		{"backoff zero", "[coordination]\nretry_backoff_seconds = [5, 0]\n", nil, "entry 2 is 0"},
		{"backoff negative", "[coordination]\nretry_backoff_seconds = [-5]\n", nil, "entry 1 is -5"},
		{"ack mode", "[coordination]\ndelivery_ack_mode = \"maybe\"\n", nil, `coordination.delivery_ack_mode: "maybe" is not one of injected, acknowledged`},
		{"poll zero", "[coordination]\nstatehub_poll_interval_seconds = 0\n", nil, "coordination.statehub_poll_interval_seconds: 0 is out of range"},
		{"wake timeout", "[coordination]\nwake_ack_timeout_seconds = 0\n", nil, "coordination.wake_ack_timeout_seconds"},
		{"renew", "[coordination]\nlease_renew_interval_seconds = -3\n", nil, "coordination.lease_renew_interval_seconds"},
		{"busy timeout", "[sqlite]\nbusy_timeout_ms = 0\n", nil, "sqlite.busy_timeout_ms: 0 is out of range"},
		{"grace", "[service]\nshutdown_grace_seconds = 0\n", nil, "service.shutdown_grace_seconds"},
		{"api base scheme", "[statehub]\napi_base = \"ftp://x\"\n", nil, "statehub.api_base"},
		{"api base creds", "[statehub]\napi_base = \"http://u:secret@x\"\n", nil, "must not contain credentials"},
		{"credential command", "[statehub]\ncredential_command = [\"\"]\n", nil, "statehub.credential_command"},
		{"unknown profile", "[policy]\nprofile = \"nope\"\n", nil, `policy.profile: profile "nope" is not defined (defined: default)`},
		{"unknown category", "[policy.profiles.x]\nallow = [\"teleport\"]\n", nil, `policy.profiles.x: allow: unknown action category "teleport"`},
		{"bad profile name", "[policy.profiles.Bad]\n", nil, `invalid profile name "Bad"`},
		{"env profile", "", map[string]string{"TAMQ_POLICY_PROFILE": "ghost"}, `TAMQ_POLICY_PROFILE: profile "ghost" is not defined`},
		{"env api base", "", map[string]string{"STATEHUB_API_BASE": "not a url"}, "STATEHUB_API_BASE:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := setup(t, ptr(tt.content), tt.env)
			_, err := Load(p)
			if !errs.Is(err, errs.ConfigInvalid) {
				t.Fatalf("err = %v, want config_invalid", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if tt.env == nil && !strings.Contains(msg, p.ConfigFile) {
				t.Errorf("error %q does not name the file", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestMissingExplicitFileAndUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	p := setup(t, nil, map[string]string{"TAMQ_CONFIG": filepath.Join(dir, "missing.toml")})
	if _, err := Load(p); !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "from TAMQ_CONFIG") {
		t.Errorf("missing explicit file: %v", err)
	}
	// A directory where the file should be cannot be read, even by root.
	p = setup(t, nil, map[string]string{"TAMQ_CONFIG": dir})
	if _, err := Load(p); !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), dir) {
		t.Errorf("unreadable file: %v", err)
	}
}

func TestVersionStability(t *testing.T) {
	version := func(content string) string {
		t.Helper()
		l, err := Load(setup(t, &content, nil))
		if err != nil {
			t.Fatal(err)
		}
		return l.Version
	}
	base := version("")
	same := []string{
		"# only a comment\n",
		"[coordination]\nmax_attempts = 4\nretry_backoff_seconds = [5, 15, 60, 300]\n",
		// The built-in default profile written out, categories in another order.
		`[policy.profiles.default]
allow = ["transient_retry", "statehub_read", "repo_inspect", "repo_edit", "local_checks", "state_updates", "coordination_messages", "tmux_wake"]
require_human = ["secrets", "destructive", "live_external", "scope_change", "ambiguous_ownership", "external_publish", "financial", "legal"]
`,
	}
	for _, c := range same {
		if v := version(c); v != base {
			t.Errorf("equal config %q hashed %s, want %s", c, v, base)
		}
	}
	// A fixed value guards against accidental changes to the hash's input.
	def := Default()
	if base != def.Version() {
		t.Errorf("loaded defaults %s differ from Default() %s", base, def.Version())
	}
	for _, c := range []string{"[coordination]\nmax_attempts = 5\n", "[coordination]\nretry_backoff_seconds = [15, 5, 60, 300]\n", "[statehub]\napi_base = \"http://127.0.0.1:8001\"\n"} {
		if v := version(c); v == base {
			t.Errorf("changed config %q kept version %s", c, v)
		}
	}
}

func TestTOMLRoundTrip(t *testing.T) {
	cfg := Default()
	cfg.Coordination.MaxAttempts = 7
	out, err := cfg.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("show.toml", out)
	if err != nil {
		t.Fatalf("Parse(TOML()) = %v\n%s", err, out)
	}
	if back.Version() != cfg.Version() {
		t.Errorf("round trip changed the config:\n%s", out)
	}
}

func TestEffectiveSafetyGatedMaxAttempts(t *testing.T) {
	cfg := Default()
	cfg.Coordination.SafetyGatedMaxAttempts = 3
	if cfg.EffectiveSafetyGatedMaxAttempts() != 0 {
		t.Error("coordination setting alone enabled gated retries")
	}
	p := policy.Default()
	p.SafetyGatedMaxAttempts = 2
	cfg.Policy.Profiles["default"] = p
	if cfg.EffectiveSafetyGatedMaxAttempts() != 2 {
		t.Errorf("got %d, want 2", cfg.EffectiveSafetyGatedMaxAttempts())
	}
}
