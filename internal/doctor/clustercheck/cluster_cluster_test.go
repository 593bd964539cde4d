//go:build cluster

package clustercheck_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/cluster/etcdtest"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/doctor/clustercheck"
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
	checks := clustercheck.Run(context.Background(), section(c.Endpoints()), file, "engine-1", 30*time.Second)
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

// Claims of two hosts are counted per host; keys that are not claims warn.
func TestPrefixCountsClaimsAndWarnsOfStrangers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client("", "")
	ctx := context.Background()
	for key, value := range map[string]string{
		"/tamq-doctor/tasks/T-1":  `{"host_id":"host-a","lease_id":"L1","etcd_lease":1}`,
		"/tamq-doctor/tasks/T-2":  `{"host_id":"host-b","lease_id":"L2","etcd_lease":2}`,
		"/tamq-doctor/tasks/T-3":  `{"host_id":"host-b","lease_id":"L3","etcd_lease":3}`,
		"/tamq-doctor/tasks/bad":  `not json`,
		"/tamq-doctor/config/x":   `someone else's`,
		"/tamq-doctorate/unseen":  `outside the prefix`,
		"/tamq-doctor/doctor/h-1": `{}`,
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	got := byName(clustercheck.Run(ctx, section(c.Endpoints()), file, "engine-1", 30*time.Second))
	p := got["cluster-prefix"]
	if p.Status != doctor.Warn || !strings.Contains(p.Detail, "3 claims held under /tamq-doctor (host-a 1, host-b 2)") ||
		!strings.Contains(p.Detail, "1 claim keys without a holder (tasks bad)") ||
		!strings.Contains(p.Detail, "1 keys that are not the engine's (/tamq-doctor/config/x)") || p.Fix == "" {
		t.Errorf("prefix: %+v", p)
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
	if ch := got["cluster-auth"]; ch.Status != doctor.OK {
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
