package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
)

// A task id, whatever State Hub calls it, is one segment under
// <prefix>/tasks/, reads back as itself, and is its key alone.
func TestTaskKeysStayUnderThePrefix(t *testing.T) {
	const prefix = "/tamq-coordination"
	ids := []string{"T-1", "../../etc", "..", ".", "a/b", "/", "//x", "%2F", "a%2Fb", "x\x00y", "sp ace", "ünï", "?q=1#f",
		"tasks/../../other", "\\..\\x", strings.Repeat("z", maxTaskID)}
	seen := map[string]string{}
	for _, id := range ids {
		key, err := taskKey(prefix, id)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		seg, ok := strings.CutPrefix(key, prefix+tasksDir)
		if !ok || seg == "" || strings.Contains(seg, "/") {
			t.Errorf("%q: key %q is not one segment under %s", id, key, prefix+tasksDir)
		}
		if back, ok := taskOfKey(prefix, key); !ok || back != id {
			t.Errorf("%q: key %q reads back as %q, %v", id, key, back, ok)
		}
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share key %q", id, other, key)
		}
		seen[key] = id
	}
	for _, id := range []string{"", strings.Repeat("z", maxTaskID+1)} {
		if _, err := taskKey(prefix, id); !errs.Is(err, errs.BadRequest) {
			t.Errorf("%d bytes: %v", len(id), err)
		}
	}
	// Keys not written by taskKey are not claims.
	for _, key := range []string{prefix + "/tasks/", prefix + "/tasks/a/b", prefix + "/tasks/a%2", prefix + "/tasks/a%41",
		prefix + "/doctor/h", "/other/tasks/a", prefix + "x/tasks/a"} {
		if id, ok := taskOfKey(prefix, key); ok {
			t.Errorf("%q read as the claim of %q", key, id)
		}
	}
}

func TestCredentials(t *testing.T) {
	ctx := context.Background()
	user, password, err := Credentials(ctx, []string{"sh", "-c", "echo 'engine:pa:ss'"})
	if err != nil || user != "engine" || password != "pa:ss" {
		t.Errorf("got %q %q %v", user, password, err)
	}
	for _, script := range []string{"echo nocolon", "echo ':pw'", "echo 'u:'", "printf 'u:p\\nmore\\n'", "echo 'u:secret-word'; exit 3"} {
		_, _, err := Credentials(ctx, []string{"sh", "-c", script})
		if !errs.Is(err, errs.PermissionDeny) {
			t.Errorf("%s: %v", script, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-word") || strings.Contains(err.Error(), "nocolon") {
			t.Errorf("%s: the error shows the output: %v", script, err)
		}
	}
	if _, _, err := Credentials(ctx, nil); !errs.Is(err, errs.ConfigInvalid) {
		t.Errorf("no command: %v", err)
	}
}

func TestConfigFrom(t *testing.T) {
	c := config.Cluster{EtcdEndpoints: []string{"http://a:2379"}, HostID: "h", Prefix: "/p", DialTimeoutSeconds: 3,
		CredentialCommand: []string{"pass", "etcd"}}
	got := ConfigFrom(c, "engine-1")
	if got.HostID != "h" || got.EngineID != "engine-1" || got.Prefix != "/p" || got.DialTimeout != 3*time.Second ||
		len(got.Endpoints) != 1 || len(got.CredentialCommand) != 2 {
		t.Errorf("%+v", got)
	}
}

// Open refuses no endpoints and bad TLS files before dialing anything.
func TestOpenRefusesWhatCannotWork(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, Config{}); !errs.Is(err, errs.ConfigInvalid) {
		t.Errorf("no endpoints: %v", err)
	}
	for _, cfg := range []Config{
		{Endpoints: []string{"http://127.0.0.1:1"}},
		{Endpoints: []string{"http://127.0.0.1:1"}, HostID: "h", Prefix: "rel"},
		{Endpoints: []string{"http://127.0.0.1:1"}, HostID: "h", Prefix: "/p/"},
	} {
		if _, err := Open(ctx, cfg); !errs.Is(err, errs.ConfigInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	_, err := Open(ctx, Config{Endpoints: []string{"https://127.0.0.1:1"}, HostID: "h", TLSCAFile: "/nonexistent/ca.pem"})
	if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "cluster.tls_ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
}

// Nothing listens: a claim fails as Unavailable, naming the endpoint,
// within its bound.
func TestUnreachableIsUnavailable(t *testing.T) {
	c, err := Open(context.Background(), Config{Endpoints: []string{"http://127.0.0.1:1"}, HostID: "h", DialTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, _, err = c.Claim(context.Background(), "T-1", Holder{LeaseID: "L1"}, 5*time.Second)
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "http://127.0.0.1:1") {
		t.Errorf("err %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// A caller that gives up (a shutdown) hears so, not that etcd is away.
func TestCancelledIsSaidSo(t *testing.T) {
	c, err := Open(context.Background(), Config{Endpoints: []string{"http://127.0.0.1:1"}, HostID: "h", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, _, err = c.Holder(ctx, "T-1")
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("err %v", err)
	}
}
