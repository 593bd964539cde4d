package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// engineLeases are leases in a real coordination-engine's database. tamq
// writes a wake only once the engine confirms its lease's attempt is still
// the one to work on; the tests of tamq's wake operation play the engine's
// part themselves (the requests they send), so they run a real engine whose
// database holds those leases, recorded as its observer records them. Their
// deadlines are an hour away and each attempt's wake is marked answered, so
// the engine neither moves them on nor sends a wake of its own.
type engineLeases struct {
	t testing.TB
	p paths.Paths
}

// startEngine starts coordination-engine for e (a real process).
func startEngine(t *testing.T, e *testutil.Env) *engineLeases {
	t.Helper()
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	e.Engine(t, "start", "--detach")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	return &engineLeases{t: t, p: e.Paths(t, paths.Engine)}
}

var leaseTiming = lease.Timing{AckTimeout: time.Hour, RenewInterval: time.Hour, MissedRenewals: 1, Backoff: []time.Duration{time.Second}, MaxAttempts: 9}

// with runs f on the engine's store, its clock at *now.
func (el *engineLeases) with(f func(ctx context.Context, st *store.Store, now *time.Time)) {
	el.t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	st, err := store.Open(context.Background(), el.p, 5*time.Second, func() time.Time { return now })
	if err != nil {
		el.t.Fatal(err)
	}
	defer st.DB.Close()
	st.PolicyProfile, st.ConfigVersion = "test@1", "test"
	f(context.Background(), st, &now)
}

// offer records a new lease for repo, at attempt 1, and returns its id.
func (el *engineLeases) offer(repo string) string {
	el.t.Helper()
	var id string
	el.with(func(ctx context.Context, st *store.Store, _ *time.Time) {
		tr, _, err := st.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: store.NewID(),
			TargetRepo: repo, TaskID: "T-1", Reason: lease.TaskActionable})
		if err != nil {
			el.t.Fatal(err)
		}
		l, err := st.Offer(ctx, tr.ID, "", leaseTiming)
		if err != nil {
			el.t.Fatal(err)
		}
		if _, err := st.RecordWake(ctx, l.ID, 1, store.WakeRecord{Capability: string(lease.WakeResumed), MessageID: "sent-by-the-test"}); err != nil {
			el.t.Fatal(err)
		}
		id = l.ID
	})
	return id
}

// advance moves a lease on to attempt n: each attempt runs out and the next
// is offered, on the store's clock moved past each deadline.
func (el *engineLeases) advance(id string, n int) {
	el.t.Helper()
	el.with(func(ctx context.Context, st *store.Store, now *time.Time) {
		for {
			l, err := st.Lease(ctx, id)
			if err != nil {
				el.t.Fatal(err)
			}
			if l.Attempt >= n {
				return
			}
			*now = l.ExpiresAt
			if _, err := st.ExpireDue(ctx, *now, leaseTiming); err != nil {
				el.t.Fatal(err)
			}
			*now = now.Add(time.Minute)
			if l, err = st.Reoffer(ctx, id, leaseTiming); err != nil {
				el.t.Fatal(err)
			}
			if _, err := st.RecordWake(ctx, id, l.Attempt, store.WakeRecord{Capability: string(lease.WakeResumed), MessageID: "sent-by-the-test"}); err != nil {
				el.t.Fatal(err)
			}
		}
	})
}
