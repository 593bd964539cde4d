package clustercheck_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/clustertest/etcdtest"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/doctor/clustercheck"
	"github.com/tmux-amq/tamq/internal/testutil"
)

const file = "/home/me/.config/coordination-engine/config.toml"

func section(endpoints []string) config.Cluster {
	return config.Cluster{EtcdEndpoints: endpoints, HostID: "host-a", Prefix: "/tamq-doctor", DialTimeoutSeconds: 2}
}

func byName(checks []doctor.Check) map[string]doctor.Check {
	m := map[string]doctor.Check{}
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

func TestChecksPassOnAHealthyCluster(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth("root-pw", "engine", "right-pw", "/tamq-doctor")
	s := section(c.Endpoints())
	s.CredentialCommand = []string{"sh", "-c", "echo engine:right-pw"}
	checks := clustercheck.Run(context.Background(), s, file, "engine-1", 30*time.Second)
	got := byName(checks)
	for _, name := range []string{"cluster", "cluster-auth", "cluster-clock", "cluster-prefix"} {
		if ch, ok := got[name]; !ok || ch.Status != doctor.OK {
			t.Errorf("%s: %+v", name, ch)
		}
	}
	if d := got["cluster-clock"].Detail; !strings.Contains(d, "to within") {
		t.Errorf("clock: %s", d)
	}
	if d := got["cluster-prefix"].Detail; !strings.Contains(d, "0 claims held under /tamq-doctor") {
		t.Errorf("prefix: %s", d)
	}
	t.Log(got["cluster-clock"].Detail)
}

// Security issue 37: an etcd with its auth off never checks the
// credentials the engine is given, and takes claims and checkpoints from
// anyone who reaches it. With cluster.credential_command set, the auth
// check fails; without, it warns.
func TestAuthOffFailsWhenCredentialsAreConfigured(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := section(c.Endpoints())
	s.CredentialCommand = []string{"sh", "-c", "echo engine:some-pw"}
	got := byName(clustercheck.Run(context.Background(), s, file, "engine-1", 30*time.Second))
	if ch := got["cluster-auth"]; ch.Status != doctor.Fail || !strings.Contains(ch.Detail, "has its auth off") ||
		!strings.Contains(ch.Detail, "plant checkpoints") || !strings.Contains(ch.Fix, "auth enable") || strings.Contains(ch.Detail, "some-pw") {
		t.Errorf("auth off, with credentials: %+v", ch)
	}
	got = byName(clustercheck.Run(context.Background(), section(c.Endpoints()), file, "engine-1", 30*time.Second))
	if ch := got["cluster-auth"]; ch.Status != doctor.Warn || !strings.Contains(ch.Detail, "etcd's auth is off") {
		t.Errorf("auth off, without credentials: %+v", ch)
	}
}

// leased writes value at key attached to a new etcd lease, as the engine
// writes its keys; "%d" in value becomes the lease's id.
func leased(t *testing.T, c *etcdtest.Cluster, key, value string) {
	t.Helper()
	cli := c.Client("", "")
	ctx := context.Background()
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(value, "%d") {
		value = fmt.Sprintf(value, g.ID)
	}
	if _, err := cli.Put(ctx, key, value, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
}

// Claims of two hosts are counted per host; keys that are not claims warn.
func TestPrefixCountsClaimsAndWarnsOfStrangers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	for key, value := range map[string]string{
		"/tamq-doctor/tasks/T-1": `{"host_id":"host-a","lease_id":"L1","etcd_lease":%d}`,
		"/tamq-doctor/tasks/T-2": `{"host_id":"host-b","lease_id":"L2","etcd_lease":%d}`,
		"/tamq-doctor/tasks/T-3": `{"host_id":"host-b","lease_id":"L3","etcd_lease":%d}`,
		"/tamq-doctor/tasks/bad": `not json`,
	} {
		leased(t, c, key, value)
	}
	cli := c.Client("", "")
	for key, value := range map[string]string{
		"/tamq-doctor/config/x":         `someone else's`,
		"/tamq-doctorate/unseen":        `outside the prefix`,
		"/tamq-doctor/checkpoints/T-9":  `{}`,
		"/tamq-doctor/hosts/h-1/doctor": `{}`,
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	got := byName(clustercheck.Run(ctx, section(c.Endpoints()), file, "engine-1", 30*time.Second))
	p := got["cluster-prefix"]
	if p.Status != doctor.Warn || !strings.Contains(p.Detail, "3 claims held under /tamq-doctor (host-a 1, host-b 2)") ||
		!strings.Contains(p.Detail, "1 claim keys without a holder (tasks bad)") ||
		!strings.Contains(p.Detail, "1 keys of an older engine, no longer read (/tamq-doctor/checkpoints/T-9)") ||
		!strings.Contains(p.Detail, "1 keys that are not the engine's (/tamq-doctor/config/x)") || p.Fix == "" {
		t.Errorf("prefix: %+v", p)
	}
}

// Security issue 37: a claim key written by hand (`etcdctl put`, no etcd
// lease) would never run out; the engine passes it over, and the doctor
// fails on it, naming the key. So it does on a checkpoint without a lease,
// and on one that names another host than the sub-prefix it is under.
func TestKeysWithoutALeaseFail(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	if _, err := c.Client("", "").Put(ctx, "/tamq-doctor/tasks/T-1", `{"host_id":"host-x","lease_id":"L1","etcd_lease":7}`); err != nil {
		t.Fatal(err)
	}
	got := byName(clustercheck.Run(ctx, section(c.Endpoints()), file, "engine-1", 30*time.Second))
	if p := got["cluster-prefix"]; p.Status != doctor.Fail || !strings.Contains(p.Detail, "1 keys without an etcd lease") ||
		!strings.Contains(p.Detail, "/tamq-doctor/tasks/T-1") || !strings.Contains(p.Fix, "etcdctl del") {
		t.Errorf("a claim without a lease: %+v", p)
	}

	c2 := etcdtest.Start(t, 1)
	if _, err := c2.Client("", "").Put(ctx, "/tamq-doctor/hosts/host-b/checkpoints/T-2",
		`{"task_id":"T-2","repo":"alpha","host_id":"host-b","lease_id":"L2","checkpoint":{}}`); err != nil {
		t.Fatal(err)
	}
	leased(t, c2, "/tamq-doctor/hosts/host-b/checkpoints/T-3", `{"task_id":"T-3","repo":"alpha","host_id":"host-a","lease_id":"L3","checkpoint":{}}`)
	got = byName(clustercheck.Run(ctx, section(c2.Endpoints()), file, "engine-1", 30*time.Second))
	if p := got["cluster-prefix"]; p.Status != doctor.Fail || !strings.Contains(p.Detail, "2 checkpoints shared") ||
		!strings.Contains(p.Detail, "1 keys without an etcd lease, which the engine never writes and passes over (/tamq-doctor/hosts/host-b/checkpoints/T-2)") ||
		!strings.Contains(p.Detail, "1 checkpoints that name another host or task than their key (/tamq-doctor/hosts/host-b/checkpoints/T-3)") {
		t.Errorf("checkpoints without a lease or under another host: %+v", p)
	}
}

func TestChecksFailWhenUnreachable(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	start := time.Now()
	checks := clustercheck.Run(context.Background(), section([]string{endpoint}), file, "engine-1", 30*time.Second)
	if len(checks) != 1 || checks[0].Name != "cluster" || checks[0].Status != doctor.Fail ||
		!strings.Contains(checks[0].Detail, endpoint) || !strings.Contains(checks[0].Fix, "cluster.etcd_endpoints") {
		t.Errorf("checks %+v", checks)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with a 2 s bound", d)
	}
}

// One of three members down warns; claims still go on.
func TestOneMemberDownWarns(t *testing.T) {
	c := etcdtest.Start(t, 3)
	c.StopMember(2)
	got := byName(clustercheck.Run(context.Background(), section(c.Endpoints()), file, "engine-1", 30*time.Second))
	if ch := got["cluster"]; ch.Status != doctor.Warn || !strings.Contains(ch.Detail, "2 of 3 etcd endpoints answer") ||
		!strings.Contains(ch.Detail, c.Endpoints()[2]) {
		t.Errorf("cluster: %+v", ch)
	}
	if ch := got["cluster-auth"]; ch.Status == doctor.Fail {
		t.Errorf("auth: %+v", ch)
	}
}

func TestWrongPasswordFailsAuth(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth("root-pw", "engine", "right-pw", "/tamq-doctor")
	s := section(c.Endpoints())
	s.CredentialCommand = []string{"sh", "-c", "echo engine:wrong-pw"}
	got := byName(clustercheck.Run(context.Background(), s, file, "engine-1", 30*time.Second))
	// etcd answers, but wants credentials for its status.
	if ch := got["cluster"]; ch.Status != doctor.OK || !strings.Contains(ch.Detail, "1 of 1 etcd endpoints answer") {
		t.Errorf("cluster: %+v", ch)
	}
	if ch := got["cluster-auth"]; ch.Status != doctor.Fail || !strings.Contains(ch.Fix, "cluster.credential_command") ||
		strings.Contains(ch.Detail, "wrong-pw") {
		t.Errorf("auth: %+v", ch)
	}
	s.CredentialCommand = []string{"sh", "-c", "echo engine:right-pw"}
	got = byName(clustercheck.Run(context.Background(), s, file, "engine-1", 30*time.Second))
	if ch := got["cluster-auth"]; ch.Status != doctor.OK {
		t.Errorf("auth with the right password: %+v", ch)
	}
}

// Security issue 37: another local user who binds etcd's loopback port
// while etcd is down gets nothing from the doctor either (it would log in
// there), and the cluster check fails naming the port and the uid.
func TestAnEndpointOfAnotherUserFails(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a listener as uid 65534 needs root (CI runs as root)")
	}
	sq, addr := testutil.SquatTCP(t, 65534, "127.0.0.1:0")
	for _, creds := range [][]string{nil, {"sh", "-c", "echo engine:s3cret-pw"}} {
		s := section([]string{"http://" + addr})
		s.CredentialCommand = creds
		checks := clustercheck.Run(context.Background(), s, file, "engine-1", 30*time.Second)
		if len(checks) == 0 || checks[0].Name != "cluster" || checks[0].Status != doctor.Fail ||
			!strings.Contains(checks[0].Detail, "held by uid 65534") || strings.Contains(checks[0].Detail, "s3cret") {
			t.Errorf("credentials %v: %+v", creds, checks)
		}
	}
	testutil.WaitFor(t, "the squatter to see the doctor's connections end", func() bool { return len(sq.Conns()) >= 2 })
	for _, n := range sq.Conns() {
		if n != 0 {
			t.Errorf("the doctor wrote %d bytes to another user's listener: %v", n, sq.Conns())
		}
	}
}
