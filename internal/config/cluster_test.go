package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// An engine config without [cluster] has the section off and keeps the
// version and `config show` it had before the section existed.
func TestClusterOffByDefault(t *testing.T) {
	l, err := Load(setupFor(t, paths.Engine, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if l.ClusterOn() || !l.Cluster.IsZero() {
		t.Errorf("cluster on by default: %+v", l.Cluster)
	}
	out, err := l.TOML(paths.Engine)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "cluster") {
		t.Errorf("config show prints an unset [cluster]:\n%s", out)
	}
	empty := "[cluster]\netcd_endpoints = []\n"
	l2, err := Load(setupFor(t, paths.Engine, &empty, nil))
	if err != nil {
		t.Fatal(err)
	}
	if l2.ClusterOn() || l2.Version != l.Version {
		t.Errorf("an empty endpoint list: on %v, version %s want %s", l2.ClusterOn(), l2.Version, l.Version)
	}
}

func TestClusterDefaultsAndValues(t *testing.T) {
	osHostname = func() (string, error) { return "build-7", nil }
	t.Cleanup(func() { osHostname = defaultHostname })

	on := "[cluster]\netcd_endpoints = [\"http://10.0.0.1:2379\", \"http://10.0.0.2:2379\"]\n"
	l, err := Load(setupFor(t, paths.Engine, &on, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{EtcdEndpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, HostID: "build-7",
		Prefix: "/tamq-coordination", DialTimeoutSeconds: 5}
	if !l.ClusterOn() || !reflect.DeepEqual(l.Cluster, want) || l.Cluster.DialTimeout() != 5*time.Second || l.Cluster.TLS() {
		t.Errorf("cluster %+v\nwant %+v", l.Cluster, want)
	}
	def, _ := Load(setupFor(t, paths.Engine, nil, nil))
	if l.Version == def.Version {
		t.Error("turning the cluster on kept the config version")
	}
	// What config show prints is valid as it stands, with the defaults spelt out.
	out, err := l.TOML(paths.Engine)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "host_id = 'build-7'") || !strings.Contains(string(out), "prefix = '/tamq-coordination'") {
		t.Errorf("config show:\n%s", out)
	}
	back, err := Parse(paths.Engine, "shown", out)
	if len(back.Cluster.CredentialCommand) == 0 {
		back.Cluster.CredentialCommand = nil // shown as [], read back empty
	}
	if err != nil || !reflect.DeepEqual(back.Cluster, l.Cluster) {
		t.Errorf("round trip: %v\n%+v", err, back.Cluster)
	}

	full := `[cluster]
etcd_endpoints = ["https://etcd-1:2379"]
host_id = "rack2-a"
prefix = "/fleet/eu"
tls_ca_file = "/etc/etcd/ca.pem"
tls_cert_file = "/etc/etcd/client.pem"
tls_key_file = "/etc/etcd/client-key.pem"
credential_command = ["pass", "show", "etcd/engine"]
dial_timeout_seconds = 2
`
	l, err = Load(setupFor(t, paths.Engine, &full, nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Cluster; c.HostID != "rack2-a" || c.Prefix != "/fleet/eu" || c.DialTimeout() != 2*time.Second || !c.TLS() ||
		!reflect.DeepEqual(c.CredentialCommand, []string{"pass", "show", "etcd/engine"}) {
		t.Errorf("cluster %+v", c)
	}
}

var defaultHostname = osHostname

// A host whose name cannot be read must name itself.
func TestClusterHostnameUnknown(t *testing.T) {
	osHostname = func() (string, error) { return "", errors.New("no uts") }
	t.Cleanup(func() { osHostname = defaultHostname })
	on := "[cluster]\netcd_endpoints = [\"http://127.0.0.1:2379\"]\n"
	_, err := Load(setupFor(t, paths.Engine, &on, nil))
	if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "cluster.host_id: is empty") {
		t.Errorf("err %v", err)
	}
}

func TestClusterValidation(t *testing.T) {
	const ep = "etcd_endpoints = [\"http://127.0.0.1:2379\"]\n"
	tests := []struct{ name, content, want string }{
		{"no scheme", "etcd_endpoints = [\"127.0.0.1:2379\"]\n", `cluster.etcd_endpoints: entry 1: "127.0.0.1:2379" must be http://host:port, https://host:port or unix:///path`},
		{"no port", "etcd_endpoints = [\"http://etcd\"]\n", "has no port"},
		// The refusal does not repeat the password it refuses.
		{"credentials", "etcd_endpoints = [\"http://root:pw@etcd:2379\"]\n", `"http://REDACTED@etcd:2379" must not contain credentials; use cluster.credential_command`},
		{"a token in the query", "etcd_endpoints = [\"http://etcd:2379/?token=pw\"]\n", `"http://etcd:2379/?token=REDACTED" must be only a scheme, host and port`},
		{"path", "etcd_endpoints = [\"http://etcd:2379/v3\"]\n", "only a scheme, host and port"},
		{"mixed", "etcd_endpoints = [\"http://a:2379\", \"https://b:2379\"]\n", "mixes http:// and https://"},
		{"tls over http", ep + "tls_ca_file = \"/etc/ca.pem\"\n", "tls_* files are set but the endpoints are http://"},
		{"cert without key", "etcd_endpoints = [\"https://a:2379\"]\ntls_cert_file = \"/etc/c.pem\"\n", "cluster.tls_cert_file: tls_cert_file and tls_key_file go together"},
		{"relative ca", "etcd_endpoints = [\"https://a:2379\"]\ntls_ca_file = \"ca.pem\"\n", `cluster.tls_ca_file: "ca.pem" must be an absolute path`},
		{"prefix relative", ep + "prefix = \"tamq\"\n", `cluster.prefix: "tamq" must start with /`},
		{"prefix root", ep + "prefix = \"/\"\n", `cluster.prefix: "/" must start with / and name something`},
		{"prefix slash", ep + "prefix = \"/tamq/\"\n", `cluster.prefix: "/tamq/" must not end with /`},
		{"prefix blank", ep + "prefix = \"/ta mq\"\n", "must not hold blanks"},
		{"prefix set while off", "prefix = \"x\"\n", "cluster.prefix"},
		{"host blank", ep + "host_id = \"a b\"\n", `cluster.host_id: "a b" must not hold blanks`},
		{"host slash", ep + "host_id = \"a/b\"\n", "cluster.host_id"},
		{"dial high", ep + "dial_timeout_seconds = 301\n", "cluster.dial_timeout_seconds: 301 is out of range 1..300"},
		{"dial negative", ep + "dial_timeout_seconds = -1\n", "cluster.dial_timeout_seconds: -1"},
		{"credential empty", ep + "credential_command = [\"\"]\n", "cluster.credential_command: the program name (first element) is empty"},
		{"unknown key", ep + "password = \"x\"\n", "unknown key 'cluster.password'"},
		{"relative socket", "etcd_endpoints = [\"unix://etcd.sock\"]\n", "must be unix:// and a socket's absolute path"},
		{"tls over a socket", "etcd_endpoints = [\"unix:///run/etcd.sock\"]\ntls_ca_file = \"/etc/ca.pem\"\n", "the endpoints are unix://"},
		{"socket and https", "etcd_endpoints = [\"unix:///run/etcd.sock\", \"https://a:2379\"]\n", "mixes unix:// and https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := "[cluster]\n" + tt.content
			p := setupFor(t, paths.Engine, &content, nil)
			_, err := Load(p)
			if !errs.Is(err, errs.ConfigInvalid) {
				t.Fatalf("err = %v, want config_invalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, p.ConfigFile) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line naming the file and %q", msg, tt.want)
			}
		})
	}
}

// Security issue 37: etcd's password goes to another machine over https
// only. http:// to a host that is not this machine, with credential_command
// set, is refused by config validation, naming the entry and what to do;
// the same endpoint without credentials, http:// to this machine, https://
// and a socket are accepted.
func TestClusterPasswordNeverCrossesTheNetworkInClear(t *testing.T) {
	const creds = "credential_command = [\"pass\", \"show\", \"etcd\"]\n"
	for _, endpoints := range []string{`"http://10.0.0.5:2379"`, `"http://127.0.0.1:2379", "http://etcd-2.example:2379"`, `"http://[2001:db8::1]:2379"`} {
		content := "[cluster]\netcd_endpoints = [" + endpoints + "]\n" + creds
		p := setupFor(t, paths.Engine, &content, nil)
		_, err := Load(p)
		if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "which is not this machine, and cluster.credential_command is set") ||
			!strings.Contains(err.Error(), "the etcd password would cross the network in clear; use https://") {
			t.Errorf("%s: %v", endpoints, err)
		}
	}
	for _, ok := range []string{
		"etcd_endpoints = [\"http://10.0.0.5:2379\"]\n",
		"etcd_endpoints = [\"http://127.0.0.1:2379\", \"http://localhost:2379\", \"http://[::1]:2379\"]\n" + creds,
		"etcd_endpoints = [\"https://10.0.0.5:2379\"]\ntls_ca_file = \"/etc/ca.pem\"\n" + creds,
		"etcd_endpoints = [\"unix:///run/etcd/etcd.sock\"]\n" + creds,
	} {
		content := "[cluster]\n" + ok
		if _, err := Load(setupFor(t, paths.Engine, &content, nil)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// [cluster] is the engine's: tamq refuses it as the other program's key.
func TestTamqRefusesCluster(t *testing.T) {
	content := "[cluster]\netcd_endpoints = [\"http://127.0.0.1:2379\"]\n"
	_, err := Load(setupFor(t, paths.Tamq, &content, nil))
	if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "coordination-engine's") {
		t.Errorf("err %v", err)
	}
}
