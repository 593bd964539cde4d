package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/clustertest/etcdtest"
	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
)

// BenchmarkClaimVsOffer measures what a cluster adds to a wake: a claim on
// etcd (one member, fsync on, as a production member) and its release,
// against the engine's own lease offer in its SQLite store (one write
// transaction, synchronous FULL), measured in the same run, one after the
// other in each iteration so the machine's noise falls on both. It reports
// the medians and 99th percentiles and their ratios.
func BenchmarkClaimVsOffer(b *testing.B) {
	c := etcdtest.StartWith(b, 1, etcdtest.Options{Fsync: true})
	claims := open(b, c, "host-a")
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, paths.Paths{Database: filepath.Join(dir, "coordination.sqlite3"), BackupDir: filepath.Join(dir, "backups")}, 5*time.Second, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.DB.Close() })
	timing := lease.Timing{AckTimeout: 30 * time.Second, RenewInterval: 10 * time.Second, MissedRenewals: 3,
		Backoff: []time.Duration{5 * time.Second}, MaxRetries: 4}

	var claim, claimRelease, offer []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The trigger is the offer's input, not part of it.
		b.StopTimer()
		tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: fmt.Sprintf("T-%d", i),
			SourceRevision: "1", TargetRepo: "net", TaskID: fmt.Sprintf("T-%d", i), Reason: lease.TaskActionable})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := st.Leases.Offer(ctx, tr.ID, "", "", timing); err != nil {
			b.Fatal(err)
		}
		offer = append(offer, time.Since(t0))

		task, id := fmt.Sprintf("T-%d", i), fmt.Sprintf("L-%d", i)
		t0 = time.Now()
		if _, won, err := claims.Claim(ctx, task, cluster.Holder{LeaseID: id, Attempt: 1}, 30*time.Second); err != nil || !won {
			b.Fatal(won, err)
		}
		claimed := time.Since(t0)
		if err := claims.Release(ctx, task, id); err != nil {
			b.Fatal(err)
		}
		claim, claimRelease = append(claim, claimed), append(claimRelease, time.Since(t0))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	c50, c99 := benchutil.Percentile(claim, 50), benchutil.Percentile(claim, 99)
	cr50, cr99 := benchutil.Percentile(claimRelease, 50), benchutil.Percentile(claimRelease, 99)
	o50, o99 := benchutil.Percentile(offer, 50), benchutil.Percentile(offer, 99)
	b.ReportMetric(ms(c50), "claim-p50-ms")
	b.ReportMetric(ms(c99), "claim-p99-ms")
	b.ReportMetric(ms(cr50), "claim+release-p50-ms")
	b.ReportMetric(ms(cr99), "claim+release-p99-ms")
	b.ReportMetric(ms(o50), "offer-p50-ms")
	b.ReportMetric(ms(o99), "offer-p99-ms")
	b.ReportMetric(float64(cr50)/float64(o50), "ratio-p50")
	b.ReportMetric(float64(cr99)/float64(o99), "ratio-p99")
}

// BenchmarkShareAndResume measures what checkpoints across hosts cost: a
// host's first checkpoint of a claim (a grant, then the record and the
// checkpoint in one transaction), a later one (the transaction alone), and
// the next holder's resume (its claim read, the checkpoint read, checked).
func BenchmarkShareAndResume(b *testing.B) {
	c := etcdtest.StartWith(b, 1, etcdtest.Options{Fsync: true})
	a, other := open(b, c, "host-a"), open(b, c, "host-b")
	ctx := context.Background()
	data := []byte(`{"LeaseID":"L","Summary":"half done","NextAction":"run the tests"}`)
	var first, again, resume []time.Duration
	for i := 0; b.Loop(); i++ {
		task, la, lb := fmt.Sprintf("T-%d", i), fmt.Sprintf("LA-%d", i), fmt.Sprintf("LB-%d", i)
		h, won, err := a.Claim(ctx, task, cluster.Holder{LeaseID: la, Repo: "net"}, 30*time.Second)
		if err != nil || !won {
			b.Fatal(won, err)
		}
		t0 := time.Now()
		if err := a.PutCheckpoint(ctx, task, la, data, 30*time.Second); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := a.PutCheckpoint(ctx, task, la, data, 30*time.Second); err != nil {
			b.Fatal(err)
		}
		first, again = append(first, t1.Sub(t0)), append(again, time.Since(t1))
		if err := a.Release(ctx, task, h.LeaseID); err != nil {
			b.Fatal(err)
		}
		if _, won, err := other.Claim(ctx, task, cluster.Holder{LeaseID: lb, Repo: "net"}, 30*time.Second); err != nil || !won {
			b.Fatal(won, err)
		}
		t0 = time.Now()
		if _, found, err := other.Checkpoint(ctx, task, lb, "net"); err != nil || !found {
			b.Fatal(found, err)
		}
		resume = append(resume, time.Since(t0))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for name, ds := range map[string][]time.Duration{"share-first": first, "share-again": again, "resume": resume} {
		b.ReportMetric(ms(benchutil.Percentile(ds, 50)), name+"-p50-ms")
		b.ReportMetric(ms(benchutil.Percentile(ds, 99)), name+"-p99-ms")
	}
}
