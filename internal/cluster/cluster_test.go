package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

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

// What a host resumes from: only the checkpoint the record of the work's
// last claim vouches for, on that record's etcd lease, naming the same
// task, host, lease and repo, the repo being the new claim's work's too.
func TestTrustResume(t *testing.T) {
	prev := Previous{HostID: "host-a", LeaseID: "LA", Repo: "alpha", RecordLease: 77, KeyLease: 77}
	ours := Holder{HostID: "host-b", LeaseID: "LB", Repo: "alpha", Previous: prev}
	value := func(task, repo, host, lease string) []byte {
		return []byte(fmt.Sprintf(`{"task_id":%q,"repo":%q,"host_id":%q,"lease_id":%q,"checkpoint":{"Summary":"s"}}`, task, repo, host, lease))
	}
	good := value("T-1", "alpha", "host-a", "LA")
	r, err := trustResume("T-1", "alpha", ours, &mvccpb.KeyValue{Value: good, Lease: 77})
	if err != nil || string(r.Data) != `{"Summary":"s"}` || r.HostID != "host-a" || r.LeaseID != "LA" || r.Repo != "alpha" {
		t.Fatalf("the good one: %+v %v", r, err)
	}
	with := func(f func(*Holder)) Holder { h := ours; f(&h); return h }
	for _, c := range []struct {
		name       string
		task, repo string
		ours       Holder
		value      []byte
		lease      int64
		want       string
	}{
		{"record without a lease", "T-1", "alpha", with(func(h *Holder) { h.Previous.KeyLease = 0 }), good, 77, "record of its last claim has no etcd lease"},
		{"record on another lease", "T-1", "alpha", with(func(h *Holder) { h.Previous.KeyLease = 78 }), good, 77, "was attached to 4e"},
		{"record without a lease id", "T-1", "alpha", with(func(h *Holder) { h.Previous.LeaseID = "" }), good, 77, "names no lease"},
		{"checkpoint without a lease", "T-1", "alpha", ours, good, 0, "the checkpoint has no etcd lease"},
		{"checkpoint on another lease", "T-1", "alpha", ours, good, 78, "not to the last claim's"},
		{"not a checkpoint", "T-1", "alpha", ours, []byte(`"x"`), 77, "not one the engine shares"},
		{"no checkpoint inside", "T-1", "alpha", ours, []byte(`{"task_id":"T-1","repo":"alpha","host_id":"host-a","lease_id":"LA"}`), 77, "not one the engine shares"},
		{"wrong task", "T-1", "alpha", ours, value("T-2", "alpha", "host-a", "LA"), 77, `of task "T-2"`},
		{"wrong host", "T-1", "alpha", ours, value("T-1", "alpha", "host-x", "LA"), 77, `names host "host-x"`},
		{"lease mismatch", "T-1", "alpha", ours, value("T-1", "alpha", "host-a", "LZ"), 77, `lease "LZ"`},
		{"checkpoint of another repo", "T-1", "alpha", ours, value("T-1", "beta", "host-a", "LA"), 77, `repo "beta"`},
		{"record of another repo", "T-1", "alpha", with(func(h *Holder) { h.Previous.Repo = "beta" }), good, 77, `its claim's: "beta"`},
		{"work of another repo", "T-1", "beta", ours, good, 77, `the work is "beta"'s`},
		{"claim of another repo", "T-1", "alpha", with(func(h *Holder) { h.Repo = "beta" }), good, 77, "repo"},
	} {
		r, err := trustResume(c.task, c.repo, c.ours, &mvccpb.KeyValue{Value: c.value, Lease: c.lease})
		if !errors.Is(err, ErrUntrusted) || !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), c.want) || r.Data != nil {
			t.Errorf("%s: %+v %v, want %q", c.name, r, err, c.want)
		}
	}
}

// A checkpoint key names its host and task, each one segment, and reads
// back as them; nothing else reads as one.
func TestCheckpointKeys(t *testing.T) {
	const prefix = "/p"
	for _, c := range [][2]string{{"host-a", "T-1"}, {"h/x", "a/b"}, {"%", "../.."}} {
		key, err := checkpointKey(prefix, c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		if h, task, ok := checkpointOfKey(prefix, key); !ok || h != c[0] || task != c[1] {
			t.Errorf("%q reads back as %q %q %v", key, h, task, ok)
		}
	}
	for _, key := range []string{"/p/hosts/h/checkpoints/", "/p/hosts//checkpoints/T", "/p/hosts/h/checkpoints/a/b", "/p/checkpoints/T", "/p/hosts/h/doctor"} {
		if h, task, ok := checkpointOfKey(prefix, key); ok {
			t.Errorf("%q read as the checkpoint of %q %q", key, h, task)
		}
	}
	if _, err := checkpointKey(prefix, "", "T"); !errs.Is(err, errs.BadRequest) {
		t.Errorf("no host: %v", err)
	}
}

// Endpoints the dialer knows: http(s) with a host, a socket's absolute path.
func TestCheckEndpoints(t *testing.T) {
	if err := checkEndpoints([]string{"http://a:1", "https://b:2", "unix:///run/etcd.sock"}); err != nil {
		t.Error(err)
	}
	for _, ep := range []string{"unix://rel.sock", "tcp://a:1", "a:1", "http://"} {
		if err := checkEndpoints([]string{ep}); !errs.Is(err, errs.ConfigInvalid) {
			t.Errorf("%s: %v", ep, err)
		}
	}
}
