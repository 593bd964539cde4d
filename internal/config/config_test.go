package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/trust/trusttest"
)

// setup writes content (if not nil) to a config file and returns tamq's paths for it.
func setup(t *testing.T, content *string, extraEnv map[string]string) paths.Paths {
	t.Helper()
	return setupFor(t, paths.Tamq, content, extraEnv)
}

// setupFor is setup for the given program.
func setupFor(t *testing.T, program paths.Program, content *string, extraEnv map[string]string) paths.Paths {
	t.Helper()
	dir := t.TempDir()
	// A fixed runtime directory: the default statehub.api_base is a socket
	// there, and the fixed config versions below hash it.
	env := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "cfg"), "XDG_RUNTIME_DIR": "/run/user/1000"}
	for k, v := range extraEnv {
		env[k] = v
	}
	p, err := paths.Resolve(program, func(k string) string { return env[k] })
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
		!reflect.DeepEqual(co.RetryBackoffSeconds, []int{5, 15, 60, 300}) || co.MaxRetries != 4 ||
		co.SafetyGatedMaxRetries != 0 || co.DeliveryAckMode != "injected" {
		t.Errorf("coordination defaults: %+v", co)
	}
	if l.Delivery.MaxBatch != 50 || l.MaxBatch() != 50 {
		t.Errorf("delivery.max_batch %d", l.Delivery.MaxBatch)
	}
	if l.BusyTimeout() != 5*time.Second || l.ShutdownGrace() != 10*time.Second {
		t.Errorf("busy %v grace %v", l.BusyTimeout(), l.ShutdownGrace())
	}
	// The spec's default (its listener is checked before a byte is sent);
	// the reference State Hub's socket is named for the hints.
	if l.StateHub.APIBase != "http://127.0.0.1:8000" || l.Reference != "unix:///run/user/1000/statehub.sock" {
		t.Errorf("api_base %q, reference %q", l.StateHub.APIBase, l.Reference)
	}
	// A socket elsewhere is a valid api_base too.
	sock := "[statehub]\napi_base = \"unix:///srv/hub/statehub.sock\"\n"
	if l, err := Load(setup(t, &sock, nil)); err != nil || l.StateHub.APIBase != "unix:///srv/hub/statehub.sock" {
		t.Errorf("a socket of one's own: %v", err)
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

[delivery]
agent_programs = ["aider", "scriptedagent"]

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
	if !l.FileExists || l.Coordination.MaxRetries != 9 || l.Coordination.DeliveryAckMode != "acknowledged" {
		t.Errorf("file values not applied: %+v", l.Coordination)
	}
	if l.Coordination.WakeAckTimeoutSeconds != 30 {
		t.Error("an unset key lost its default")
	}
	if !slices.Equal(l.Delivery.AgentPrograms, []string{"aider", "scriptedagent"}) || len(Default().Delivery.AgentPrograms) != 0 {
		t.Errorf("delivery.agent_programs %q, by default %q", l.Delivery.AgentPrograms, Default().Delivery.AgentPrograms)
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
	// Keys only coordination-engine reads are checked in its file; the rest in tamq's.
	const engine = "engine "
	tests := []struct {
		name    string
		content string
		env     map[string]string
		want    string
	}{
		{"malformed toml", "[coordination\n", nil, "line 1"},
		{"unknown top key", "colour = 1\n", nil, "unknown key 'colour' (line 1)"},
		{"unknown nested key", "[coordination]\nmax_attempt = 3\n", nil, "unknown key 'coordination.max_attempt' (line 2; did you mean 'coordination.max_attempts'?)"},
		{"unknown key in the wrong table", "max_attempts = 3\n", nil, "unknown key 'max_attempts' (line 1; did you mean 'coordination.max_attempts'?)"},
		{"unknown key of a profile", "[policy.profiles.x]\nalow = []\n", nil, "unknown key 'policy.profiles.x.alow' (line 2; did you mean 'policy.profiles.x.allow'?)"},
		{"wrong type in a profile", "[policy.profiles.x]\nallow = \"repo_inspect\"\n", nil, "policy.profiles.x.allow: must be a list of"},
		{"unknown key far from any", "[coordination]\nzebra = 3\n", nil, "unknown key 'coordination.zebra' (line 2)"},
		{"two unknown keys", "a = 1\nb = 2\n", nil, "unknown keys 'a' (line 1), 'b' (line 2)"},
		{"wrong type", "[coordination]\nmax_attempts = \"four\"\n", nil, "line 2, column 16: coordination.max_attempts: must be a whole number, not a string"},
		{"wrong type of a named string", "[coordination]\ndelivery_ack_mode = 3\n", nil, "coordination.delivery_ack_mode: must be a quoted string, not an integer"},
		{"wrong type of a list", "[coordination]\nretry_backoff_seconds = 5\n", nil, "coordination.retry_backoff_seconds: must be a list of whole numbers, not an integer"},
		{"wrong type of a list item", "[coordination]\nretry_backoff_seconds = [5, \"a\"]\n", nil, "coordination.retry_backoff_seconds: must be a list of whole numbers; an item is a string"},
		{"wrong type of a table", "sqlite = 3\n", nil, "sqlite: must be a table, not an integer"},
		{"max_attempts high", "[coordination]\nmax_attempts = 10\n", nil, "coordination.max_attempts: 10 is out of range 0..9"},
		{"max_attempts negative", "[coordination]\nmax_attempts = -1\n", nil, "coordination.max_attempts: -1 is out of range 0..9"},
		{engine + "gated high", "[coordination]\nsafety_gated_max_attempts = 10\n", nil, "coordination.safety_gated_max_attempts: 10 is out of range 0..9"},
		{"profile gated high", "[policy.profiles.default]\nsafety_gated_max_attempts = 12\n", nil, "policy.profiles.default: safety_gated_max_attempts: 12"},
		{"backoff empty", "[coordination]\nretry_backoff_seconds = []\n", nil, "coordination.retry_backoff_seconds: must list at least one delay"},
		{"backoff zero", "[coordination]\nretry_backoff_seconds = [5, 0]\n", nil, "entry 2 is 0"},
		{"backoff negative", "[coordination]\nretry_backoff_seconds = [-5]\n", nil, "entry 1 is -5"},
		{"ack mode", "[coordination]\ndelivery_ack_mode = \"maybe\"\n", nil, `coordination.delivery_ack_mode: "maybe" is not one of injected, acknowledged`},
		{engine + "poll zero", "[coordination]\nstatehub_poll_interval_seconds = 0\n", nil, "coordination.statehub_poll_interval_seconds: 0 is out of range"},
		{"wake timeout", "[coordination]\nwake_ack_timeout_seconds = 0\n", nil, "coordination.wake_ack_timeout_seconds"},
		{engine + "template control", "[coordination]\ncontinuation_templates = [\"ok\", \"esc \\u001b[2J\"]\n", nil, "coordination.continuation_templates: template 2: it has the control or format character U+001B at byte 4"},
		{engine + "eleven templates", "[coordination]\ncontinuation_templates = [" + strings.Repeat("\"t\", ", 11) + "]\n", nil, "coordination.continuation_templates: 11 templates; the limit is 10"},
		{engine + "empty template", "[coordination]\ncontinuation_templates = [\"\"]\n", nil, "coordination.continuation_templates: template 1: it is empty"},
		{engine + "perspective destination control", "[coordination]\nperspective_destination = \"halls\\nforged\"\n", nil, "coordination.perspective_destination: it has the control or format character U+000A"},
		{engine + "perspective destination long", "[coordination]\nperspective_destination = \"" + strings.Repeat("d", 257) + "\"\n", nil, "coordination.perspective_destination: it is 257 bytes long; the limit is 256"},
		{engine + "renew", "[coordination]\nlease_renew_interval_seconds = -3\n", nil, "coordination.lease_renew_interval_seconds"},
		{"busy timeout", "[sqlite]\nbusy_timeout_ms = 0\n", nil, "sqlite.busy_timeout_ms: 0 is out of range"},
		{"grace", "[service]\nshutdown_grace_seconds = 0\n", nil, "service.shutdown_grace_seconds"},
		{"log size zero", "[log]\nmax_size_mb = 0\n", nil, "log.max_size_mb: 0 is out of range 1..1024"},
		{engine + "log size high", "[log]\nmax_size_mb = 1025\n", nil, "log.max_size_mb: 1025 is out of range 1..1024"},
		{"log files zero", "[log]\nmax_files = 0\n", nil, "log.max_files: 0 is out of range 1..100"},
		{engine + "log files high", "[log]\nmax_files = 101\n", nil, "log.max_files: 101 is out of range 1..100"},
		{"log window negative", "[log]\nrepeat_window_seconds = -1\n", nil, "log.repeat_window_seconds: -1 is out of range 0..3600"},
		{"log unknown key", "[log]\nmax_age_days = 3\n", nil, "unknown key 'log.max_age_days'"},
		{"max batch negative", "[delivery]\nmax_batch = -1\n", nil, "delivery.max_batch: -1 is out of range 0..1000"},
		{"max batch high", "[delivery]\nmax_batch = 1001\n", nil, "delivery.max_batch: 1001 is out of range 0..1000"},
		{"agent program path", "[delivery]\nagent_programs = [\"/usr/bin/aider\"]\n", nil, `delivery.agent_programs: entry 1 ("/usr/bin/aider") must be a program's file name`},
		{"agent program command", "[delivery]\nagent_programs = [\"aider\", \"aider --yes\"]\n", nil, "delivery.agent_programs: entry 2"},
		{"agent program empty", "[delivery]\nagent_programs = [\"\"]\n", nil, `delivery.agent_programs: entry 1 is ""`},
		{"api base scheme", "[statehub]\napi_base = \"ftp://x\"\n", nil, "statehub.api_base"},
		{"api base creds", "[statehub]\napi_base = \"http://u:secret@x\"\n", nil, "must not contain credentials"},
		{"api base relative socket", "[statehub]\napi_base = \"unix://statehub.sock\"\n", nil, "a socket's absolute path"},
		{"api base socket query", "[statehub]\napi_base = \"unix:///run/s.sock?x=1\"\n", nil, "a socket's absolute path"},
		{"credential command", "[statehub]\ncredential_command = [\"\"]\n", nil, "statehub.credential_command"},
		{"unknown profile", "[policy]\nprofile = \"nope\"\n", nil, `policy.profile: profile "nope" is not defined (defined: default)`},
		{"unknown category", "[policy.profiles.x]\nallow = [\"teleport\"]\n", nil, `policy.profiles.x: allow: unknown action category "teleport"`},
		{"bad profile name", "[policy.profiles.Bad]\n", nil, `invalid profile name "Bad"`},
		{"env profile", "", map[string]string{"TAMQ_POLICY_PROFILE": "ghost"}, `TAMQ_POLICY_PROFILE: profile "ghost" is not defined`},
		{"env api base", "", map[string]string{"STATEHUB_API_BASE": "not a url"}, "STATEHUB_API_BASE:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			program := paths.Tamq
			if strings.HasPrefix(tt.name, engine) {
				program = paths.Engine
			}
			p := setupFor(t, program, ptr(tt.content), tt.env)
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
	// A fixed value guards against accidental changes to the hash's input:
	// every receipt records it, so a change must be deliberate.
	if base != "a8eb8f6381fd" {
		t.Errorf("tamq's default config version is %s; was the hash's input changed?", base)
	}
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
	if def := Defaults(setup(t, nil, nil)); base != def.Version {
		t.Errorf("loaded defaults %s differ from Defaults() %s", base, def.Version)
	}
	for _, c := range []string{"[coordination]\nmax_attempts = 5\n", "[coordination]\nretry_backoff_seconds = [15, 5, 60, 300]\n", "[statehub]\napi_base = \"http://127.0.0.1:8001\"\n", "[delivery]\nquiet_ms = 151\n"} {
		if v := version(c); v == base {
			t.Errorf("changed config %q kept version %s", c, v)
		}
	}
}

func TestTOMLRoundTrip(t *testing.T) {
	cfg := Default()
	cfg.Coordination.MaxRetries = 7
	cfg.Coordination.DeliveryAckMode = ackmode.Acknowledged
	cfg.Coordination.LeaseRenewIntervalSeconds = 20
	for _, p := range []paths.Program{paths.Tamq, paths.Engine} {
		out, err := cfg.TOML(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(p, "show.toml", out)
		if err != nil {
			t.Fatalf("%s: Parse(TOML()) = %v\n%s", p, err, out)
		}
		if back.Version(p) != cfg.Version(p) {
			t.Errorf("%s: round trip changed the config:\n%s", p, out)
		}
	}
}

func TestEffectiveSafetyGatedMaxRetries(t *testing.T) {
	cfg := Default()
	cfg.Coordination.SafetyGatedMaxRetries = 3
	if cfg.EffectiveSafetyGatedMaxRetries() != 0 {
		t.Error("coordination setting alone enabled gated retries")
	}
	p := policy.Default()
	p.SafetyGatedMaxRetries = 2
	cfg.Policy.Profiles["default"] = p
	if cfg.EffectiveSafetyGatedMaxRetries() != 2 {
		t.Errorf("got %d, want 2", cfg.EffectiveSafetyGatedMaxRetries())
	}
}

func TestContinuationTemplates(t *testing.T) {
	content := "[coordination]\ncontinuation_templates = [\"run the tests;\", \"stop.\"]\n"
	l, err := Load(setupFor(t, paths.Engine, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Coordination.ContinuationTemplates; !reflect.DeepEqual(got, []string{"run the tests;", "stop."}) {
		t.Errorf("templates %q", got)
	}
	def := Default()
	if l.Version == def.Version(paths.Engine) {
		t.Error("templates did not change the config version")
	}
	if def.Coordination.ContinuationTemplates != nil {
		t.Error("the default is not empty (the built-in templates)")
	}
}

// Each program has its own file: a key only the other program reads is
// refused, naming the key, its line and whose it is, and a shared key is
// accepted by both.
func TestProgramsRefuseEachOthersKeys(t *testing.T) {
	tests := []struct {
		program paths.Program
		content string
		want    string
	}{
		{paths.Engine, "[delivery]\nquiet_ms = 10\n", "key 'delivery' (line 1) is tamq's; coordination-engine does not use it"},
		{paths.Engine, "delivery.quiet_ms = 10\n", "is tamq's; coordination-engine does not use it"},
		{paths.Engine, "[coordination]\nmax_attempts = 3\ndelivery_ack_mode = \"acknowledged\"\n", "key 'coordination.delivery_ack_mode' (line 3) is tamq's; coordination-engine does not use it"},
		{paths.Tamq, "[coordination]\nstatehub_poll_interval_seconds = 5\n", "key 'coordination.statehub_poll_interval_seconds' (line 2) is coordination-engine's; tamq does not use it"},
		{paths.Tamq, "[coordination]\nlease_renew_interval_seconds = 5\nsafety_gated_max_attempts = 1\n",
			"keys 'coordination.lease_renew_interval_seconds' (line 2), 'coordination.safety_gated_max_attempts' (line 3) are coordination-engine's; tamq does not use them"},
		{paths.Tamq, "[coordination]\ncontinuation_templates = [\"stop.\"]\n", "key 'coordination.continuation_templates' (line 2) is coordination-engine's; tamq does not use it"},
		// A misspelling is reported as one, before the other program's keys.
		{paths.Tamq, "[coordination]\nlease_renew_interval_seconds = 5\nmax_attempt = 3\n", "unknown key 'coordination.max_attempt' (line 3; did you mean 'coordination.max_attempts'?)"},
	}
	for _, tt := range tests {
		t.Run(string(tt.program)+" "+tt.content, func(t *testing.T) {
			p := setupFor(t, tt.program, ptr(tt.content), nil)
			_, err := Load(p)
			if !errs.Is(err, errs.ConfigInvalid) {
				t.Fatalf("err = %v, want config_invalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, p.ConfigFile) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming %s and containing %q", msg, p.ConfigFile, tt.want)
			}
		})
	}

	shared := `
[coordination]
wake_ack_timeout_seconds = 20
retry_backoff_seconds = [1, 2]
max_attempts = 5
[statehub]
api_base = "http://127.0.0.1:8001"
credential_command = ["pass", "show", "statehub"]
[sqlite]
busy_timeout_ms = 100
[service]
shutdown_grace_seconds = 3
[policy]
profile = "strict"
[policy.profiles.strict]
allow = ["statehub_read"]
`
	for _, program := range []paths.Program{paths.Tamq, paths.Engine} {
		l, err := Load(setupFor(t, program, &shared, nil))
		if err != nil {
			t.Fatalf("%s refused the shared keys: %v", program, err)
		}
		if l.Coordination.MaxRetries != 5 || l.SQLite.BusyTimeoutMS != 100 || l.Policy.Profile != "strict" {
			t.Errorf("%s: shared values not applied: %+v", program, l.Config)
		}
	}
}

// A program's version hashes the keys it reads and no others.
func TestVersionPerProgram(t *testing.T) {
	def := Default()
	tamq, engine := def.Version(paths.Tamq), def.Version(paths.Engine)
	if engine != "6d79ecc9aba4" {
		t.Errorf("coordination-engine's default config version is %s; was the hash's input changed?", engine)
	}
	if tamq == engine {
		t.Error("the programs' default versions are equal though they read different keys")
	}
	changes := []struct {
		name         string
		change       func(*Config)
		tamq, engine bool // whose version changes
	}{
		{"delivery.quiet_ms", func(c *Config) { c.Delivery.QuietMS++ }, true, false},
		{"delivery.block_quiet_ms", func(c *Config) { c.Delivery.BlockQuietMS++ }, true, false},
		{"delivery.max_batch", func(c *Config) { c.Delivery.MaxBatch = 1 }, true, false},
		{"delivery.agent_programs", func(c *Config) { c.Delivery.AgentPrograms = []string{"aider"} }, true, false},
		{"delivery.agent_programs empty", func(c *Config) { c.Delivery.AgentPrograms = []string{} }, false, false},
		{"coordination.delivery_ack_mode", func(c *Config) { c.Coordination.DeliveryAckMode = ackmode.Acknowledged }, true, false},
		{"coordination.statehub_poll_interval_seconds", func(c *Config) { c.Coordination.StateHubPollIntervalSeconds++ }, false, true},
		{"coordination.lease_renew_interval_seconds", func(c *Config) { c.Coordination.LeaseRenewIntervalSeconds++ }, false, true},
		{"coordination.safety_gated_max_attempts", func(c *Config) { c.Coordination.SafetyGatedMaxRetries++ }, false, true},
		{"coordination.wake_ack_timeout_seconds", func(c *Config) { c.Coordination.WakeAckTimeoutSeconds++ }, true, true},
		{"coordination.max_attempts", func(c *Config) { c.Coordination.MaxRetries++ }, true, true},
		{"coordination.continuation_templates", func(c *Config) { c.Coordination.ContinuationTemplates = []string{"stop."} }, false, true},
		{"coordination.continuation_templates empty", func(c *Config) { c.Coordination.ContinuationTemplates = []string{} }, false, false},
		{"coordination.perspective_destination", func(c *Config) { c.Coordination.PerspectiveDestination = "~/halls/helix.md" }, false, true},
		{"sqlite.busy_timeout_ms", func(c *Config) { c.SQLite.BusyTimeoutMS++ }, true, true},
		{"statehub.credential_command", func(c *Config) { c.StateHub.CredentialCommand = []string{"pass"} }, true, true},
		{"policy.profile", func(c *Config) { c.Policy.Profile = "other"; c.Policy.Profiles["other"] = policy.Default() }, true, true},
		// How the log is kept changes nothing either program decides.
		{"log", func(c *Config) { c.Log = Log{MaxSizeMB: 1, MaxFiles: 1, RepeatWindowSeconds: 0} }, false, false},
	}
	for _, ch := range changes {
		c := Default()
		ch.change(&c)
		if got := c.Version(paths.Tamq) != tamq; got != ch.tamq {
			t.Errorf("%s: tamq's version changed = %v, want %v", ch.name, got, ch.tamq)
		}
		if got := c.Version(paths.Engine) != engine; got != ch.engine {
			t.Errorf("%s: coordination-engine's version changed = %v, want %v", ch.name, got, ch.engine)
		}
	}
}

// config show prints what a program reads: its own keys and the shared ones.
func TestTOMLShowsOwnKeys(t *testing.T) {
	def := Default()
	for _, tt := range []struct {
		program       paths.Program
		want, notWant []string
	}{
		{paths.Tamq,
			[]string{"[delivery]", "quiet_ms = 150", "delivery_ack_mode = 'injected'", "max_attempts = 4", "wake_ack_timeout_seconds = 30", "busy_timeout_ms", "shutdown_grace_seconds", "api_base", "[policy.profiles.default]",
				"[log]\nmax_size_mb = 10\nmax_files = 5\nrepeat_window_seconds = 60\n"},
			[]string{"statehub_poll_interval_seconds", "lease_renew_interval_seconds"}},
		{paths.Engine,
			[]string{"statehub_poll_interval_seconds = 15", "lease_renew_interval_seconds = 10", "max_attempts = 4", "wake_ack_timeout_seconds = 30", "busy_timeout_ms", "shutdown_grace_seconds", "api_base", "[policy.profiles.default]",
				"[log]\nmax_size_mb = 10\nmax_files = 5\nrepeat_window_seconds = 60\n"},
			[]string{"[delivery]", "quiet_ms", "delivery_ack_mode"}},
	} {
		out, err := def.TOML(tt.program)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: %q missing from\n%s", tt.program, w, out)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: %q in\n%s", tt.program, w, out)
			}
		}
		// A profile has a safety_gated_max_attempts of its own; the
		// coordination one is the engine's.
		_, coordination, _ := strings.Cut(string(out), "[coordination]\n")
		coordination, _, _ = strings.Cut(coordination, "\n[")
		if got := strings.Contains(coordination, "safety_gated_max_attempts"); got != (tt.program == paths.Engine) {
			t.Errorf("%s: coordination.safety_gated_max_attempts shown = %v in\n%s", tt.program, got, coordination)
		}
	}
}

// A config file names the command run for State Hub's token: one that
// another user can write, or replace, is refused for both programs (the
// e2e script trust shows its credential_command then never runs).
func TestConfigOthersCanWriteIsRefused(t *testing.T) {
	for _, program := range []paths.Program{paths.Tamq, paths.Engine} {
		t.Run(string(program), func(t *testing.T) {
			layout := func(t *testing.T) string {
				p := setupFor(t, program, ptr("[statehub]\napi_base = \"http://127.0.0.1:9\"\ncredential_command = [\"touch\", \"/nonexistent/marker\"]\n"), nil)
				if err := os.Chmod(filepath.Dir(p.ConfigFile), 0o755); err != nil {
					t.Fatal(err)
				}
				return p.ConfigFile
			}
			trusttest.Run(t, layout, func(file string) error {
				l, err := Load(paths.Paths{Program: program, ConfigFile: file})
				if err == nil && !l.HasCredentialCommand() {
					t.Errorf("accepted without its credential_command")
				}
				return err
			})
		})
	}
}
