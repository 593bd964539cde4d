package service

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// memClaims is the cluster's claim store in memory: one claim per work,
// won by whoever claims it first and renewed only by its lease; fail, when
// set, is every call's answer (etcd away, or refusing). It keeps the calls
// made of it, but for the checkpoints'.
type memClaims struct {
	mu     sync.Mutex
	claims map[string]cluster.Holder
	fail   error
	calls  []string
}

var _ Claims = (*memClaims)(nil)

func newMemClaims() *memClaims { return &memClaims{claims: map[string]cluster.Holder{}} }

// set makes work claimed by h (nil: its claim gone, as when it ran out).
func (m *memClaims) set(work string, h *cluster.Holder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h == nil {
		delete(m.claims, work)
		return
	}
	m.claims[work] = *h
}

func (m *memClaims) failWith(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// holder is work's claim ("" host when none).
func (m *memClaims) holder(work string) cluster.Holder {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims[work]
}

func (m *memClaims) made() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

func (m *memClaims) log(call string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, call)
	return m.fail
}

func (m *memClaims) Claim(_ context.Context, work string, h cluster.Holder, _ time.Duration) (cluster.Holder, bool, error) {
	if err := m.log("claim " + work); err != nil {
		return cluster.Holder{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if have, ok := m.claims[work]; ok && have.LeaseID != h.LeaseID {
		return have, false, nil
	}
	m.claims[work] = h
	return h, true, nil
}

func (m *memClaims) Renew(_ context.Context, work, leaseID string) error {
	if err := m.log("renew " + work); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[work].LeaseID != leaseID {
		return &errs.Error{Code: errs.Conflict, Message: "the claim of " + work + " is not lease " + leaseID + "'s"}
	}
	return nil
}

func (m *memClaims) Release(_ context.Context, work, leaseID string) error {
	if err := m.log("release " + work); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[work].LeaseID == leaseID {
		delete(m.claims, work)
	}
	return nil
}

func (m *memClaims) Settle(_ context.Context, work, leaseID, outcome string, _ time.Duration) error {
	if err := m.log("settle " + work + " " + outcome); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.claims[work]; h.LeaseID == leaseID {
		h.Settled = outcome
		m.claims[work] = h
	}
	return nil
}

func (m *memClaims) PutCheckpoint(context.Context, string, string, []byte, time.Duration) error {
	return nil
}

func (m *memClaims) Checkpoint(context.Context, string, string, string) (cluster.Resume, bool, error) {
	return cluster.Resume{}, false, nil
}

func (m *memClaims) Held(context.Context) (map[string]cluster.Holder, error) {
	if err := m.log("held"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.claims), nil
}

// thisHost is the host of the engine under test; otherHost another's.
const thisHost, otherHost = "host-b", "host-a"

// setupCluster is setup with the engine in a cluster whose claims are in
// memory.
func setupCluster(t *testing.T) (*engineWorld, *memClaims) {
	t.Helper()
	claims := newMemClaims()
	return setupWith(t, func(o *Options) { o.Cluster, o.HostID = claims, thisHost }), claims
}

var (
	etcdAway    = &errs.Error{Code: errs.Unavailable, Message: "etcd: context deadline exceeded"}
	etcdRefuses = &errs.Error{Code: errs.PermissionDeny, Message: "etcd: permission denied"}
)

// The claimer claims a task's work in the cluster before the judge offers
// a lease of it, and the work waits instead when another host holds it
// (as the look read the claims, or as the claim found it), when another
// host settled it, or when etcd does not answer or refuses.
func TestTheClaimerClaimsWorkBeforeItIsOffered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// before sets the cluster's claims before the look; the task is
		// task-1.
		before func(m *memClaims)
		wait   lease.Wait
		detail string // what the wait's words start with
		calls  []string
	}{
		{"the work free: claimed, and its lease offered", func(*memClaims) {}, "", "", []string{"held", "claim task-1"}},
		{"another host holds it: not claimed", func(m *memClaims) {
			m.set("task-1", &cluster.Holder{HostID: otherHost, LeaseID: "L9"})
		}, lease.WaitHeldElsewhere, "held by host host-a (lease L9)", []string{"held"}},
		{"another host settled it", func(m *memClaims) {
			m.set("task-1", &cluster.Holder{HostID: otherHost, LeaseID: "L9", Settled: "completed"})
		}, lease.WaitHeldElsewhere, "settled by host host-a (lease L9 completed)", []string{"held", "claim task-1"}},
		{"etcd does not answer: not asked again at once", func(m *memClaims) { m.failWith(etcdAway) },
			lease.WaitCluster, "etcd does not answer: etcd: context deadline exceeded", []string{"held"}},
		{"etcd refuses the claim", func(m *memClaims) { m.failWith(etcdRefuses) },
			lease.WaitCluster, "the cluster cannot claim it: etcd: permission denied", []string{"held", "claim task-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, claims := setupCluster(t)
			task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
			tc.before(claims)
			w.look(t)
			if got := claims.made(); !slices.Equal(got, tc.calls) {
				t.Errorf("calls to the cluster %q, want %q", got, tc.calls)
			}
			ls := w.leasesOf(t, task)
			trs, err := w.s.store.Triggers.TriggersOfTask(context.Background(), task)
			if err != nil || len(trs) != 1 {
				t.Fatalf("triggers %+v, %v", trs, err)
			}
			if tc.wait == "" {
				if len(ls) != 1 {
					t.Fatalf("%d leases, want 1 (the trigger waits %s: %s)", len(ls), trs[0].Wait, trs[0].WaitDetail)
				}
				if h := claims.holder(task); h.HostID != thisHost || h.LeaseID != ls[0].ID || h.Repo != worldRepo {
					t.Errorf("the claim %+v, want this host's, of lease %s", h, ls[0].ID)
				}
				if held, _ := w.s.claimer.report(); held != 1 {
					t.Errorf("%d claims kept, want 1", held)
				}
				return
			}
			if len(ls) != 0 {
				t.Errorf("leases offered: %+v", ls)
			}
			if trs[0].Wait != tc.wait || !strings.HasPrefix(trs[0].WaitDetail, tc.detail) {
				t.Errorf("the trigger waits %s: %q; want %s: %q", trs[0].Wait, trs[0].WaitDetail, tc.wait, tc.detail)
			}
		})
	}
}

// A claim ends with its lease: settled with the lease's outcome once the
// lease is no longer live (the other hosts leave the work alone until State
// Hub changes it), deleted when its lease was never offered; a live lease's
// claim stays. Without a cluster nothing is claimed or ended.
func TestTheClaimerEndsAClaimWithItsLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, w *engineWorld, l lease.Lease)
		// settled is the claim's outcome ("" live), gone its deletion.
		settled string
		gone    bool
		calls   []string
	}{
		{"the lease released", func(t *testing.T, w *engineWorld, l lease.Lease) {
			l, err := w.s.store.Leases.StopLease(context.Background(), l.ID, "", "the operator stopped it")
			if err != nil {
				t.Fatal(err)
			}
			w.s.claimer.leaseEnded(context.Background(), l)
		}, string(lease.Stopped), false, []string{"settle task-1 stopped"}},
		{"the lease still live", func(t *testing.T, w *engineWorld, l lease.Lease) {
			w.s.claimer.leaseEnded(context.Background(), l)
		}, "", false, nil},
		{"released: its lease was never offered", func(t *testing.T, w *engineWorld, l lease.Lease) {
			w.s.claimer.release(context.Background(), "task-1", l.ID)
		}, "", true, []string{"release task-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, claims := setupCluster(t)
			task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
			w.look(t)
			ls := w.leasesOf(t, task)
			if len(ls) != 1 {
				t.Fatalf("%d leases, want 1", len(ls))
			}
			before := len(claims.made())
			tc.end(t, w, ls[0])
			if got := claims.made()[before:]; !slices.Equal(got, tc.calls) {
				t.Errorf("calls to the cluster %q, want %q", got, tc.calls)
			}
			h := claims.holder(task)
			if tc.gone != (h.HostID == "") || !tc.gone && (h.LeaseID != ls[0].ID || h.Settled != tc.settled) {
				t.Errorf("the claim %+v; want gone %v, settled %q", h, tc.gone, tc.settled)
			}
			kept := 0
			if tc.settled == "" && !tc.gone {
				kept = 1
			}
			if held, _ := w.s.claimer.report(); held != kept {
				t.Errorf("%d claims kept, want %d", held, kept)
			}
		})
	}

	t.Run("no cluster", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
		w.look(t)
		if ls := w.leasesOf(t, task); len(ls) != 1 {
			t.Fatalf("%d leases, want 1", len(ls))
		}
		if held, _ := w.s.claimer.report(); held != 0 || w.s.claimer.on() {
			t.Errorf("%d claims kept with no cluster", held)
		}
	})
}

// The claimer keeps a live lease's claim alive, on its clock: renewed while
// etcd answers; taken back when it ran out while etcd was away (within the
// grace other hosts give it); its lease stopped when another host took the
// work, or when etcd has not confirmed it for its TTL and grace, not
// sooner.
func TestTheClaimerKeepsAClaimWhileItsLeaseLives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// then changes the cluster after the claim was kept once, and
		// says how long after that the claimer looks again.
		then func(w *engineWorld, m *memClaims) time.Duration
		// live: the lease lives on; holder the claim's host after.
		live   bool
		holder string
		calls  []string
	}{
		{"etcd answers: renewed", func(w *engineWorld, m *memClaims) time.Duration {
			return w.s.claimer.keepEvery()
		}, true, thisHost, []string{"renew task-1"}},
		{"the claim ran out while etcd was away: taken back", func(w *engineWorld, m *memClaims) time.Duration {
			m.set("task-1", nil)
			return w.s.claimer.ttl
		}, true, thisHost, []string{"renew task-1", "claim task-1"}},
		{"another host took the work: the lease stops", func(w *engineWorld, m *memClaims) time.Duration {
			m.set("task-1", &cluster.Holder{HostID: otherHost, LeaseID: "L9"})
			return w.s.claimer.keepEvery()
		}, false, otherHost, []string{"renew task-1", "claim task-1", "settle task-1 stopped"}},
		{"etcd away within the TTL and grace: the lease lives on", func(w *engineWorld, m *memClaims) time.Duration {
			m.failWith(etcdAway)
			c := w.s.claimer
			return c.ttl + c.grace() - c.retryEvery() - c.callTimeout()
		}, true, thisHost, []string{"renew task-1"}},
		{"etcd away past the TTL and grace: the lease stops", func(w *engineWorld, m *memClaims) time.Duration {
			m.failWith(etcdAway)
			c := w.s.claimer
			return c.ttl + c.grace() - c.retryEvery() - c.callTimeout() + time.Millisecond
		}, false, thisHost, []string{"renew task-1", "settle task-1 stopped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, claims := setupCluster(t)
			ctx := context.Background()
			task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
			w.look(t)
			ls := w.leasesOf(t, task)
			if len(ls) != 1 {
				t.Fatalf("%d leases, want 1", len(ls))
			}
			if !w.s.claimer.keepAlive(ctx) {
				t.Fatal("etcd did not answer the first renewal")
			}
			before := len(claims.made())
			w.clk.Advance(tc.then(w, claims))
			w.s.claimer.keepAlive(ctx)
			if got := claims.made()[before:]; !slices.Equal(got, tc.calls) {
				t.Errorf("calls to the cluster %q, want %q", got, tc.calls)
			}
			l, err := w.s.store.LeaseLists.Lease(ctx, ls[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if l.State.Live() != tc.live {
				t.Errorf("the lease is %s; want live %v", l.State, tc.live)
			}
			if h := claims.holder(task); h.HostID != tc.holder {
				t.Errorf("the claim is %s's, want %s's", h.HostID, tc.holder)
			}
			if held, _ := w.s.claimer.report(); held != map[bool]int{true: 1}[tc.live] {
				t.Errorf("%d claims kept", held)
			}
		})
	}
}
