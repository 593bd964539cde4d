package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/prompt"
)

// FuzzLoad reads arbitrary bytes as each program's config file, through
// what Load does after reading the file. Nothing panics; a refusal is
// config_invalid on one line naming the file; a config that loads has every
// value in its range (checked here again, apart from Validate), and what
// `config show` prints of it loads back to the same config version.
func FuzzLoad(f *testing.F) {
	for _, in := range []string{
		"",
		"[coordination]\nmax_attempts = 9\nretry_backoff_seconds = [1, 2]\ndelivery_ack_mode = \"acknowledged\"\n\n" +
			"[statehub]\napi_base = \"https://hub.example:8443/api\"\ncredential_command = [\"pass\", \"show\", \"statehub\"]\n\n" +
			"[policy]\nprofile = \"strict\"\n[policy.profiles.strict]\nallow = [\"statehub_read\"]\nrequire_human = [\"secrets\"]\n",
		"[policy.profiles.default]\nallow = [\"statehub_read\"]\n",
		"[coordination\n", "colour = 1\n", "[coordination]\nmax_attempt = 3\n", "a = 1\nb = 2\n",
		"[coordination]\nmax_attempts = \"four\"\n", "[coordination]\nmax_attempts = 10\n",
		"[coordination]\nmax_attempts = -1\n", "[coordination]\nsafety_gated_max_attempts = 10\n",
		"[policy.profiles.default]\nsafety_gated_max_attempts = 12\n", "[coordination]\nretry_backoff_seconds = []\n",
		"[coordination]\nretry_backoff_seconds = [5, 0]\n", "[coordination]\nretry_backoff_seconds = [-5]\n",
		"[coordination]\ndelivery_ack_mode = \"maybe\"\n", "[coordination]\nstatehub_poll_interval_seconds = 0\n",
		"[coordination]\nwake_ack_timeout_seconds = 0\n",
		"[coordination]\ncontinuation_templates = [\"ok\", \"esc \\u001b[2J\"]\n",
		"[coordination]\ncontinuation_templates = [\"run the tests;\", \"stop.\"]\n",
		"[coordination]\ncontinuation_templates = [\"\"]\n", "[coordination]\nlease_renew_interval_seconds = -3\n",
		"[sqlite]\nbusy_timeout_ms = 0\n", "[service]\nshutdown_grace_seconds = 0\n",
		"[log]\nmax_size_mb = 0\n", "[log]\nmax_files = 101\nrepeat_window_seconds = 3600\n",
		"[statehub]\napi_base = \"ftp://x\"\n", "[statehub]\napi_base = \"http://u:secret@x\"\n",
		"[statehub]\ncredential_command = [\"\"]\n", "[policy]\nprofile = \"nope\"\n",
		"[policy.profiles.x]\nallow = [\"teleport\"]\n", "[policy.profiles.Bad]\n",
		"[delivery]\nquiet_ms = 10\n", "delivery.quiet_ms = 10\n",
		"[delivery]\nenter_pause_ms = 0\nquiet_ms = 60000\nmax_quiet_wait_ms = 1\nblock_quiet_ms = 60000\n",
		"[statehub]\ncredential_command = [\"a\\u007f\", \"\\u2028\"]\n",
		"[coordination]\nmax_attempts = 9223372036854775807\n",
		"[cluster]\netcd_endpoints = [\"https://etcd-1:2379\", \"https://etcd-2:2379\"]\nhost_id = \"h1\"\nprefix = \"/p\"\n" +
			"tls_ca_file = \"/ca.pem\"\ntls_cert_file = \"/c.pem\"\ntls_key_file = \"/k.pem\"\ncredential_command = [\"pass\", \"etcd\"]\ndial_timeout_seconds = 9\n",
		"[cluster]\netcd_endpoints = [\"http://127.0.0.1:2379\"]\n", "[cluster]\nprefix = \"/only\"\n",
		"[cluster]\netcd_endpoints = [\"127.0.0.1:2379\"]\n", "[cluster]\netcd_endpoints = []\n",
		"[statehub]\nkind = \"github\"\ncredential_command = [\"gh\", \"auth\", \"token\"]\n" +
			"[statehub.github]\nlabel = \"bot\"\nrepos = { a = \"o/a\" }\ncomment_on = [\"lease.stopped\"]\n",
		"[statehub]\nkind = \"github\"\napi_base = \"http://10.0.0.1/api/v3\"\n", "[statehub]\nkind = \"jira\"\n",
		"[statehub.github]\nlabel = \"x\"\n", "[statehub]\nkind = \"github\"\n[statehub.github]\nrepos = { a = \"-o/a\" }\n",
	} {
		f.Add([]byte(in), false)
		f.Add([]byte(in), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, engine bool) {
		p := paths.Paths{Program: paths.Tamq, ConfigFile: "/x/tamq/config.toml"}
		if engine {
			p = paths.Paths{Program: paths.Engine, ConfigFile: "/x/coordination-engine/config.toml"}
		}
		l, err := load(p, data, true)
		if err != nil {
			msg := err.Error()
			if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(msg, p.ConfigFile) || strings.Contains(msg, "\n") {
				t.Fatalf("refusal %q (%s) should be config_invalid on one line naming the file", msg, errs.CodeOf(err))
			}
			return
		}
		checkRanges(t, &l.Config)
		shown, err := l.TOML(p.Program)
		if err != nil {
			t.Fatalf("config show cannot print it: %v", err)
		}
		again, err := load(p, shown, true)
		if err != nil {
			t.Fatalf("what config show prints does not load: %v\n%s", err, shown)
		}
		if again.Version != l.Version {
			t.Fatalf("config version %s after config show, %s before\n%s", again.Version, l.Version, shown)
		}
	})
}

// checkRanges holds a loaded config to the ranges docs/configuration.md
// gives, one by one.
func checkRanges(t *testing.T, c *Config) {
	t.Helper()
	co := c.Coordination
	in := func(key string, v, lo, hi int) {
		if v < lo || v > hi {
			t.Fatalf("%s = %d accepted, outside %d..%d", key, v, lo, hi)
		}
	}
	in("coordination.statehub_poll_interval_seconds", co.StateHubPollIntervalSeconds, 1, 86400)
	in("coordination.wake_ack_timeout_seconds", co.WakeAckTimeoutSeconds, 1, 86400)
	in("coordination.lease_renew_interval_seconds", co.LeaseRenewIntervalSeconds, 1, 86400)
	in("coordination.lease_missed_renewals", co.LeaseMissedRenewals, 1, 100)
	in("coordination.max_attempts", co.MaxRetries, 0, policy.MaxRetriesLimit)
	in("coordination.safety_gated_max_attempts", co.SafetyGatedMaxRetries, 0, policy.MaxRetriesLimit)
	in("sqlite.busy_timeout_ms", c.SQLite.BusyTimeoutMS, 1, 600000)
	in("service.shutdown_grace_seconds", c.Service.ShutdownGraceSeconds, 1, 3600)
	in("delivery.block_quiet_ms", c.Delivery.BlockQuietMS, 1, 60000)
	in("log.max_size_mb", c.Log.MaxSizeMB, 1, 1024)
	in("log.max_files", c.Log.MaxFiles, 1, 100)
	in("log.repeat_window_seconds", c.Log.RepeatWindowSeconds, 0, 3600)
	in("delivery.enter_pause_ms", c.Delivery.EnterPauseMS, 0, 60000)
	in("delivery.quiet_ms", c.Delivery.QuietMS, 0, 60000)
	in("delivery.max_quiet_wait_ms", c.Delivery.MaxQuietWaitMS, 0, 60000)
	in("cluster.dial_timeout_seconds", c.Cluster.DialTimeoutSeconds, 0, 300)
	if c.ClusterOn() && (c.Cluster.DialTimeoutSeconds < 1 || c.Cluster.HostID == "" || !strings.HasPrefix(c.Cluster.Prefix, "/")) {
		t.Fatalf("cluster on without its defaults: %+v", c.Cluster)
	}
	in("coordination.retry_backoff_seconds entries", len(co.RetryBackoffSeconds), 1, 1<<20)
	for _, s := range co.RetryBackoffSeconds {
		in("coordination.retry_backoff_seconds", s, 1, 86400)
	}
	for n := range 12 {
		if d := c.RetryBackoff(n); d < time.Second || d > 86400*time.Second {
			t.Fatalf("RetryBackoff(%d) = %v", n, d)
		}
	}
	in("effective safety-gated attempts", c.EffectiveSafetyGatedMaxRetries(), 0, policy.MaxRetriesLimit)
	if err := prompt.CheckTemplates(co.ContinuationTemplates); err != nil {
		t.Fatalf("templates accepted: %v", err)
	}
	if _, err := ackmode.Parse(string(co.DeliveryAckMode)); err != nil {
		t.Fatalf("ack mode accepted: %v", err)
	}
	if err := validateAPIBase(c.StateHub.APIBase); err != nil {
		t.Fatalf("api_base accepted: %v", err)
	}
	if cc := c.StateHub.CredentialCommand; len(cc) > 0 && cc[0] == "" {
		t.Fatalf("credential_command without a program accepted")
	}
	if _, ok := c.Policy.Profiles[c.Policy.Profile]; !ok {
		t.Fatalf("profile %q accepted undefined", c.Policy.Profile)
	}
	if _, ok := c.Policy.Profiles[policy.DefaultName]; !ok {
		t.Fatalf("no %s profile", policy.DefaultName)
	}
	for name, prof := range c.Policy.Profiles {
		if policy.ValidateName(name) != nil {
			t.Fatalf("profile name %q accepted", name)
		}
		for _, cat := range slices.Concat(prof.Allow, prof.RequireHuman) {
			if !slices.Contains(policy.Known, cat) {
				t.Fatalf("profile %s: category %q accepted", name, cat)
			}
		}
		in("policy.profiles."+name+".safety_gated_max_attempts", prof.SafetyGatedMaxRetries, 0, policy.MaxRetriesLimit)
	}
}
