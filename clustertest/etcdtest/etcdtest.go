// Package etcdtest starts a real etcd cluster inside a test: embedded
// servers (go.etcd.io/etcd/server/v3/embed) on 127.0.0.1, ports picked
// free, data in t.TempDir(), timings short and logs off, stopped by
// t.Cleanup. Members can be stopped and started again, and etcd's auth
// turned on, to test what the engine does when etcd goes away or refuses.
//
// The etcd server is large to build and brings some forty modules: this
// package and the tests that use it are the module clustertest, apart from
// the programs' go.mod (`make test-cluster`), so `make test` never builds it.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyTimeout bounds a member's start: a new cluster elects its leader in
// well under a second, but the race detector on a loaded machine is slow.
const readyTimeout = 60 * time.Second

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	t       testing.TB
	opts    Options
	token   string
	initial string // the initial-cluster setting every member shares
	mu      sync.Mutex
	members []*member
}

type member struct {
	name         string
	dir          string
	client, peer url.URL
	etcd         *embed.Etcd // nil while stopped
}

// Options are the settings a test may change.
type Options struct {
	// Fsync makes etcd sync its log to disk as a production member does,
	// for a benchmark; by default it does not, as a test's data need not
	// survive a power cut.
	Fsync bool
}

// Start starts a cluster of n members and waits until every one serves.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: %d members", n)
	}
	c := &Cluster{t: t, opts: opts, token: fmt.Sprintf("etcdtest-%d", time.Now().UnixNano())}
	dir := t.TempDir()
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i)),
			client: freeURL(t), peer: freeURL(t)}
		c.members = append(c.members, m)
		if c.initial != "" {
			c.initial += ","
		}
		c.initial += m.name + "=" + m.peer.String()
	}
	t.Cleanup(c.Stop)
	// The members of a new cluster wait for each other: start them together.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range c.members {
		wg.Go(func() { m.etcd, errs[i] = c.start(m) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("etcdtest: start member %d: %v", i, err)
		}
	}
	return c
}

// freeURL is a loopback URL on a port free now. Another process could take
// it before etcd binds it; on a test machine that is rare enough.
func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// start starts (or restarts, from its data directory) one member and waits
// until it serves.
func (c *Cluster) start(m *member) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.name, m.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
	cfg.InitialCluster, cfg.InitialClusterToken = c.initial, c.token
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored on a restart: the WAL says who the members are
	// Short timings: an election in under a second; the shortest lease
	// TTL etcd allows is then one second.
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.UnsafeNoFsync = !c.opts.Fsync
	// bcrypt's default cost makes each authentication take seconds under
	// the race detector; a test's passwords need no such strength.
	cfg.BcryptCost = 4
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(readyTimeout):
		e.Close()
		return nil, fmt.Errorf("not ready within %v", readyTimeout)
	}
}

// Endpoints are the members' client URLs, as cluster.etcd_endpoints lists them.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client.String()
	}
	return out
}

// StopMember stops member i (its data stays, for RestartMember).
func (c *Cluster) StopMember(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[i]; m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// RestartMember starts member i again on its ports, from its data, and
// waits until it serves. A member serves once a majority of the cluster is
// up: it cannot bring back a cluster that lost its majority one member at a
// time (no test here needs that).
func (c *Cluster) RestartMember(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.etcd != nil {
		return
	}
	e, err := c.start(m)
	if err != nil {
		c.t.Fatalf("etcdtest: restart member %d: %v", i, err)
	}
	m.etcd = e
}

// Stop stops every member; t.Cleanup calls it too.
func (c *Cluster) Stop() {
	for i := range c.members {
		c.StopMember(i)
	}
}

// Client is a client of the cluster as root, for a test's own setup.
func (c *Cluster) Client(user, password string) *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// adminClient is a client of its own for setting auth up, with a context
// bounding the setup; done closes both. Closed once done: a client left
// open would dial again when a member stops, and a test that counts what
// reaches the member's port meanwhile would count it.
func (c *Cluster) adminClient() (*clientv3.Client, context.Context, func()) {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	return cli, ctx, func() { cancel(); cli.Close() }
}

// EnableAuth turns etcd's auth on: the user root with rootPassword, and
// user with password, allowed to read and write every key under prefix.
func (c *Cluster) EnableAuth(rootPassword, user, password, prefix string) {
	c.t.Helper()
	cli, ctx, done := c.adminClient()
	defer done()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "engine"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "engine", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, user, password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, user, "engine"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			c.t.Fatalf("etcdtest: enable auth, step %d: %v", i+1, err)
		}
	}
}

// EnablePerHostAuth turns etcd's auth on as docs/scale.md sets it up for
// hosts that do not trust each other's words: the user root with
// rootPassword, and for each host (id: password) a user and a role of its
// name that may read everything under prefix, and write the claims
// (<prefix>/tasks/), the claims' records (<prefix>/last/) and its own
// sub-prefix (<prefix>/hosts/<id>/) only.
func (c *Cluster) EnablePerHostAuth(rootPassword, prefix string, hosts map[string]string) {
	c.t.Helper()
	cli, ctx, done := c.adminClient()
	defer done()
	grant := func(role, key string, perm clientv3.PermissionType) error {
		_, err := cli.RoleGrantPermission(ctx, role, key, clientv3.GetPrefixRangeEnd(key), perm)
		return err
	}
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
	}
	for id, password := range hosts {
		role := "coordination-" + id
		steps = append(steps,
			func() error { _, err := cli.RoleAdd(ctx, role); return err },
			func() error { return grant(role, prefix+"/", clientv3.PermissionType(clientv3.PermRead)) },
			func() error { return grant(role, prefix+"/tasks/", clientv3.PermissionType(clientv3.PermReadWrite)) },
			func() error { return grant(role, prefix+"/last/", clientv3.PermissionType(clientv3.PermReadWrite)) },
			func() error {
				return grant(role, prefix+"/hosts/"+id+"/", clientv3.PermissionType(clientv3.PermReadWrite))
			},
			func() error { _, err := cli.UserAdd(ctx, id, password); return err },
			func() error { _, err := cli.UserGrantRole(ctx, id, role); return err },
		)
	}
	steps = append(steps, func() error { _, err := cli.AuthEnable(ctx); return err })
	for i, step := range steps {
		if err := step(); err != nil {
			c.t.Fatalf("etcdtest: enable per-host auth, step %d: %v", i+1, err)
		}
	}
}

// Calls is how many calls of the gRPC method (etcd's "Range", "Txn",
// "LeaseKeepAlive", ...) etcd's servers have begun in this process so far,
// as etcd counts them for its metrics (grpc_server_started_total): what a
// test compares before and after to count the calls an engine made. The
// count is the process's, every member's and every cluster's together, so
// a test that counts runs alone.
func Calls(t testing.TB, method string) int {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("etcdtest: gather etcd's metrics: %v", err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == method {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
