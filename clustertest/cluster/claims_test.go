package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/clustertest/etcdtest"
	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

const prefix = "/tamq-test"

// open is a host's claim store on the cluster.
func open(t testing.TB, c *etcdtest.Cluster, host string, mutate ...func(*cluster.Config)) *cluster.Claims {
	t.Helper()
	cfg := cluster.Config{Endpoints: c.Endpoints(), HostID: host, EngineID: "engine-" + host, Prefix: prefix, DialTimeout: 2 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	cl, err := cluster.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// eventually retries f until it is nil or the deadline passes, and says
// its last error if it never is.
// wonOnceAnswered waits (a minute at most) until lease's claim on task
// through l (cluster.Claims or cluster.Late) is won: etcd, restarted,
// answers again.
func wonOnceAnswered(t testing.TB, what string, l interface {
	Claim(context.Context, string, cluster.Holder, time.Duration) (cluster.Holder, bool, error)
}, task, lease string) {
	t.Helper()
	eventually(t, what, time.Minute, func() error {
		_, won, err := l.Claim(context.Background(), task, cluster.Holder{LeaseID: lease}, 10*time.Second)
		if err == nil && !won {
			return fmt.Errorf("not won")
		}
		return err
	})
}

func eventually(t testing.TB, what string, within time.Duration, f func() error) {
	t.Helper()
	var last error
	if !testutil.Within(within, func() bool { last = f(); return last == nil }) {
		t.Fatalf("%s: not within %v: %v", what, within, last)
	}
}

func TestClaimLoseAndClaimAgain(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()

	got, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Attempt: 1}, 10*time.Second)
	if err != nil || !won || got.HostID != "host-a" || got.EngineID != "engine-host-a" || got.LeaseID != "LA" || got.EtcdLease == 0 || got.ClaimedAt.IsZero() {
		t.Fatalf("a's claim: %+v %v %v", got, won, err)
	}
	lost, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB"}, 10*time.Second)
	if err != nil || won || lost.HostID != "host-a" || lost.LeaseID != "LA" || lost.EtcdLease != got.EtcdLease {
		t.Fatalf("b's claim: %+v %v %v", lost, won, err)
	}
	// Claiming again with the same lease (a retry, a restart) is a win
	// that grants no second etcd lease.
	again, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Attempt: 1}, 10*time.Second)
	if err != nil || !won || again != got {
		t.Fatalf("a again: %+v %v %v", again, won, err)
	}
	// A new Claims (the engine restarted) finds and renews its claim by
	// what etcd holds alone.
	a2 := open(t, c, "host-a")
	if h, found, err := a2.Holder(ctx, "T-1"); err != nil || !found || h != got {
		t.Fatalf("holder: %+v %v %v", h, found, err)
	}
	if err := a2.Renew(ctx, "T-1", "LA"); err != nil {
		t.Fatal(err)
	}
	// b's lost claim left no etcd lease behind: only a's one exists.
	leases, err := c.Client("", "").Leases(ctx)
	if err != nil || len(leases.Leases) != 1 || int64(leases.Leases[0].ID) != got.EtcdLease {
		t.Errorf("etcd leases %+v %v, want only %x", leases, err, got.EtcdLease)
	}
	if _, found, err := b.Holder(ctx, "T-2"); err != nil || found {
		t.Errorf("an unclaimed task: %v %v", found, err)
	}
}

// Two hosts race for 50 tasks at once: each task is won exactly once.
func TestTwoHostsRaceForFiftyTasks(t *testing.T) {
	c := etcdtest.Start(t, 1)
	// A hundred claims at once on a loaded machine: a generous bound, so
	// that slowness is not taken for etcd being away.
	slow := func(cfg *cluster.Config) { cfg.DialTimeout = 15 * time.Second }
	hosts := []*cluster.Claims{open(t, c, "host-a", slow), open(t, c, "host-b", slow)}
	ctx := context.Background()
	const tasks = 50
	winners := make([][]string, tasks)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range tasks {
		for j, h := range hosts {
			wg.Go(func() {
				_, won, err := h.Claim(ctx, fmt.Sprintf("T-%d", i), cluster.Holder{LeaseID: fmt.Sprintf("L-%d-%d", j, i)}, 30*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if won {
					mu.Lock()
					winners[i] = append(winners[i], fmt.Sprintf("host %d", j))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for i, w := range winners {
		h, found, err := hosts[0].Holder(ctx, fmt.Sprintf("T-%d", i))
		if len(w) != 1 || err != nil || !found || !strings.HasSuffix(h.LeaseID, fmt.Sprintf("-%d", i)) {
			t.Errorf("task %d won by %v; holder %+v %v %v", i, w, h, found, err)
		}
	}
}

// A holder that stops renewing loses the claim when its TTL runs out;
// another host takes it, and the first one's renewal is a conflict. One
// that renews keeps it.
func TestTTLRunsOutWithoutRenewal(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()
	if _, won, err := a.Claim(ctx, "kept", cluster.Holder{LeaseID: "LK"}, 2*time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	if _, won, err := a.Claim(ctx, "dropped", cluster.Holder{LeaseID: "LD"}, time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	start := time.Now()
	eventually(t, "b claims the dropped task", 15*time.Second, func() error {
		if err := a.Renew(ctx, "kept", "LK"); err != nil {
			return fmt.Errorf("renewing the kept task: %w", err)
		}
		_, won, err := b.Claim(ctx, "dropped", cluster.Holder{LeaseID: "LB"}, 10*time.Second)
		if err == nil && !won {
			err = fmt.Errorf("still held")
		}
		return err
	})
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("the claim ran out after %v, before its TTL", d)
	}
	err := a.Renew(ctx, "dropped", "LD")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "host-b") {
		t.Errorf("renewing a lost claim: %v", err)
	}
	// Renewed every 50 ms for well over its 2 s TTL, the kept claim stands.
	if _, won, err := b.Claim(ctx, "kept", cluster.Holder{LeaseID: "LB"}, time.Second); err != nil || won {
		t.Errorf("b took the renewed claim: %v %v", won, err)
	}
}

func TestReleaseDeletesOnlyItsOwnClaim(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()
	got, _, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Another lease's release, or one of a task nobody holds: nothing, no error.
	if err := b.Release(ctx, "T-1", "LB"); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "T-none", "LB"); err != nil {
		t.Fatal(err)
	}
	if h, found, _ := b.Holder(ctx, "T-1"); !found || h.LeaseID != "LA" {
		t.Fatalf("after another's release: %+v %v", h, found)
	}
	if err := a.Release(ctx, "T-1", "LA"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := a.Holder(ctx, "T-1"); found {
		t.Fatal("released claim still there")
	}
	// Its etcd lease went with it.
	ttl, err := c.Client("", "").TimeToLive(ctx, clientv3.LeaseID(got.EtcdLease))
	if err != nil || ttl.TTL != -1 {
		t.Errorf("etcd lease after release: %+v %v", ttl, err)
	}
	if err := a.Release(ctx, "T-1", "LA"); err != nil {
		t.Errorf("released twice: %v", err)
	}
	if err := a.Renew(ctx, "T-1", "LA"); !errs.Is(err, errs.Conflict) {
		t.Errorf("renewing a released claim: %v", err)
	}
	// Now b may take it.
	if _, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB"}, 30*time.Second); err != nil || !won {
		t.Errorf("b after the release: %v %v", won, err)
	}
}

// With etcd down, calls fail fast as Unavailable naming the endpoint; once
// it is back, claims work again.
func TestEtcdDownIsUnavailableAndRecovers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := open(t, c, "host-a", func(cfg *cluster.Config) { cfg.DialTimeout = time.Second })
	ctx := context.Background()
	if _, won, err := a.Claim(ctx, "before", cluster.Holder{LeaseID: "L1"}, 30*time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	c.StopMember(0)
	for _, call := range []struct {
		name string
		run  func() error
	}{
		{"claim", func() error {
			_, _, err := a.Claim(ctx, "during", cluster.Holder{LeaseID: "L2"}, 30*time.Second)
			return err
		}},
		{"renew", func() error { return a.Renew(ctx, "before", "L1") }},
		{"release", func() error { return a.Release(ctx, "before", "L1") }},
		{"holder", func() error { _, _, err := a.Holder(ctx, "before"); return err }},
	} {
		start := time.Now()
		err := call.run()
		if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), c.Endpoints()[0]) {
			t.Errorf("%s with etcd down: %v", call.name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v with a 1 s bound", call.name, d)
		}
	}
	c.RestartMember(0)
	eventually(t, "a claim after etcd's restart", 20*time.Second, func() error {
		_, won, err := a.Claim(ctx, "after", cluster.Holder{LeaseID: "L3"}, 30*time.Second)
		if err == nil && !won {
			err = fmt.Errorf("not won")
		}
		return err
	})
	if err := a.Renew(ctx, "before", "L1"); err != nil {
		t.Errorf("the claim from before the restart: %v", err)
	}
}

// Three members, one stopped: a majority is left, and claims go on.
func TestThreeMembersOneDown(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a := open(t, c, "host-a")
	ctx := context.Background()
	if _, won, err := a.Claim(ctx, "T-0", cluster.Holder{LeaseID: "L0"}, 30*time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	c.StopMember(0)
	// A new leader may take an election; then every claim goes through.
	eventually(t, "a claim with one member down", 20*time.Second, func() error {
		_, _, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 30*time.Second)
		return err
	})
	for i := 2; i < 12; i++ {
		if _, won, err := a.Claim(ctx, fmt.Sprintf("T-%d", i), cluster.Holder{LeaseID: fmt.Sprintf("L%d", i)}, 30*time.Second); err != nil || !won {
			t.Fatalf("claim %d: %v %v", i, won, err)
		}
	}
	if err := a.Renew(ctx, "T-0", "L0"); err != nil {
		t.Errorf("renewal with one member down: %v", err)
	}
}

func TestAuth(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth("root-pw", "engine", "s3cret-pw", prefix)
	ctx := context.Background()
	cfg := func(line string) cluster.Config {
		return cluster.Config{Endpoints: c.Endpoints(), HostID: "host-a", Prefix: prefix, DialTimeout: 2 * time.Second,
			CredentialCommand: []string{"sh", "-c", "echo '" + line + "'"}}
	}
	_, err := cluster.Open(ctx, cfg("engine:wrong-pw"))
	if !errs.Is(err, errs.PermissionDeny) || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("a wrong password: %v", err)
	}
	// No credentials at all: the first call is refused.
	anon := open(t, c, "host-a")
	if _, _, err := anon.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("without credentials: %v", err)
	}
	a, err := cluster.Open(ctx, cfg("engine:s3cret-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second); err != nil || !won {
		t.Fatalf("the right password: %v %v", won, err)
	}
	if err := a.Renew(ctx, "T-1", "L1"); err != nil {
		t.Error(err)
	}
	if err := a.Release(ctx, "T-1", "L1"); err != nil {
		t.Error(err)
	}
	// The user may not write outside the prefix: a store on another
	// prefix is refused.
	other := cfg("engine:s3cret-pw")
	other.Prefix = "/elsewhere"
	o, err := cluster.Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, _, err := o.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("outside the prefix: %v", err)
	}
}

// Whatever a task id holds, its claim is one key under <prefix>/tasks/.
func TestHostileTaskIDsStayUnderThePrefix(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := open(t, c, "host-a")
	ctx := context.Background()
	ids := []string{"../../victim", "/victim", "..", "a/../../b", "%2F..%2Fvictim", "x\x00y", "\xff\xfe"}
	for i, id := range ids {
		if _, won, err := a.Claim(ctx, id, cluster.Holder{LeaseID: fmt.Sprint(i)}, 30*time.Second); err != nil || !won {
			t.Fatalf("%q: %v %v", id, won, err)
		}
		if h, found, err := a.Holder(ctx, id); err != nil || !found || h.LeaseID != fmt.Sprint(i) {
			t.Errorf("%q: holder %+v %v %v", id, h, found, err)
		}
	}
	resp, err := c.Client("", "").Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != len(ids) {
		t.Errorf("%d keys for %d ids", len(resp.Kvs), len(ids))
	}
	for _, kv := range resp.Kvs {
		seg, ok := strings.CutPrefix(string(kv.Key), prefix+"/tasks/")
		if !ok || strings.Contains(seg, "/") {
			t.Errorf("key %q is not one segment under %s/tasks/", kv.Key, prefix)
		}
	}
}

// A claim settled when its lease ended holds against every other host for
// its revision; another revision of the work (State Hub changed it) takes
// it over once SettledGrace has passed, not before.
func TestASettledClaimHoldsItsRevision(t *testing.T) {
	c := etcdtest.Start(t, 1)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := open(t, c, "host-a", func(cfg *cluster.Config) { cfg.Now = clock })
	b := open(t, c, "host-b", func(cfg *cluster.Config) { cfg.Now = clock })
	ctx := context.Background()
	if _, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Revision: "r1"}, 10*time.Second); err != nil || !won {
		t.Fatalf("a's claim: %v %v", won, err)
	}
	if err := a.Settle(ctx, "T-1", "LB", "completed", time.Hour); err != nil {
		t.Fatalf("settling another lease's claim: %v", err)
	}
	if h, _, _ := a.Holder(ctx, "T-1"); h.Settled != "" {
		t.Fatalf("a claim was settled by a lease that does not hold it: %+v", h)
	}
	if err := a.Settle(ctx, "T-1", "LA", "completed", time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"r1", "r2"} {
		h, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB", Revision: rev}, 10*time.Second)
		if err != nil || won || h.Settled != "completed" || h.LeaseID != "LA" || h.SettledAt.IsZero() {
			t.Errorf("b's claim of revision %s within the grace: %+v %v %v", rev, h, won, err)
		}
	}
	mu.Lock()
	now = now.Add(cluster.SettledGrace)
	mu.Unlock()
	if _, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB", Revision: "r1"}, 10*time.Second); err != nil || won {
		t.Errorf("b took the settled revision after the grace: %v %v", won, err)
	}
	h, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB", Revision: "r2"}, 10*time.Second)
	if err != nil || !won || h.HostID != "host-b" || h.Settled != "" {
		t.Errorf("b's claim of the new revision after the grace: %+v %v %v", h, won, err)
	}
}

// An engine with credentials that starts while etcd is away runs all the
// same: its claims answer unavailable until it could log in, then work. A
// refused login fails at once.
func TestOpenLateLogsInWhenEtcdAnswers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth("root-pw", "engine", "s3cret-pw", prefix)
	ctx := context.Background()
	cfg := func(line string) cluster.Config {
		return cluster.Config{Endpoints: c.Endpoints(), HostID: "host-a", Prefix: prefix, DialTimeout: time.Second,
			CredentialCommand: []string{"sh", "-c", "echo '" + line + "'"}}
	}
	if _, err := cluster.OpenLate(ctx, cfg("engine:wrong-pw")); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("a wrong password: %v", err)
	}
	c.StopMember(0)
	l, err := cluster.OpenLate(ctx, cfg("engine:s3cret-pw"))
	if err != nil {
		t.Fatalf("etcd away at the start: %v", err)
	}
	defer l.Close()
	if _, _, err := l.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second); !errs.Is(err, errs.Unavailable) {
		t.Errorf("a claim before the login: %v", err)
	}
	c.RestartMember(0)
	wonOnceAnswered(t, "a claim once etcd answers", l, "T-1", "L1")
}

// Held reads every claim under the prefix in one range read: live and
// settled claims by task (an escaped task id read back as it was), and
// nothing of a key that holds no claim or lies elsewhere under the prefix.
func TestHeldReadsEveryClaimAtOnce(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()
	for _, id := range []string{"T-1", "T-2", "a/b"} {
		if _, won, err := a.Claim(ctx, id, cluster.Holder{LeaseID: "L-" + id, Revision: "r1"}, 30*time.Second); err != nil || !won {
			t.Fatalf("claim %s: %v %v", id, won, err)
		}
	}
	if err := a.Settle(ctx, "T-2", "L-T-2", "completed", time.Minute); err != nil {
		t.Fatal(err)
	}
	cli := c.Client("", "")
	for key, value := range map[string]string{
		prefix + "/tasks/T-stray": `{"host_id":"host-9","lease_id":"L9","etcd_lease":1}`, // no etcd lease
		prefix + "/tasks/T-junk":  "not a claim",
		prefix + "/last/T-1":      `{"host_id":"host-9"}`,
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	ranges := etcdtest.Calls(t, "Range")
	held, err := b.Held(ctx)
	if n := etcdtest.Calls(t, "Range") - ranges; n != 1 {
		t.Errorf("Held made %d range reads", n)
	}
	if err != nil || len(held) != 3 {
		t.Fatalf("held: %+v %v", held, err)
	}
	if h := held["T-1"]; h.HostID != "host-a" || h.LeaseID != "L-T-1" || h.Settled != "" {
		t.Errorf("T-1: %+v", h)
	}
	if h := held["T-2"]; h.Settled != "completed" {
		t.Errorf("T-2: %+v", h)
	}
	if h := held["a/b"]; h.LeaseID != "L-a/b" {
		t.Errorf("a/b: %+v", h)
	}
}

// What the engine counts on after an outage of etcd longer than a claim's
// TTL: etcd gives every lease its whole TTL again when it comes back (its
// new leader renews them all), so the claim is still there, and its holder
// renews it as before; nobody else could claim it meanwhile. Should it run
// out all the same (no renewal in time), its holder takes it back with
// the same lease, as the engine does within its grace.
func TestAClaimOutlivesAnOutageLongerThanItsTTL(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()
	const ttl = 2 * time.Second
	if _, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA"}, ttl); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	c.StopMember(0)
	time.Sleep(2 * ttl) // the outage: twice the TTL
	c.RestartMember(0)
	eventually(t, "a renews its claim after the outage", 10*time.Second, func() error { return a.Renew(ctx, "T-1", "LA") })
	if h, _, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB"}, ttl); err != nil || h.LeaseID != "LA" {
		t.Errorf("b's claim after the outage: %+v %v", h, err)
	}
	// Left to run out, the claim is gone; its holder takes it back.
	eventually(t, "the claim runs out", 3*ttl, func() error {
		if _, found, err := b.Holder(ctx, "T-1"); err != nil || found {
			return fmt.Errorf("still held (%v)", err)
		}
		return nil
	})
	if err := a.Renew(ctx, "T-1", "LA"); !errs.Is(err, errs.Conflict) {
		t.Errorf("renewing a claim that ran out: %v", err)
	}
	if h, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA"}, ttl); err != nil || !won || h.LeaseID != "LA" {
		t.Errorf("a takes its claim back: %+v %v %v", h, won, err)
	}
}
