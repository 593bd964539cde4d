package service

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/queue"
)

// BenchmarkGroupCommit measures the durable enqueue itself, the service's
// single writer grouping concurrent sends: 8 clients hand messages to the
// committer (synchronous=FULL) and each waits for its commit. The floor is
// the same rows, each message with its receipt, in a commit of its own,
// written in the same run into the same database. Targets: ratio-vs-floor
// at least 3, and p99-ms, an enqueue's latency at half the saturated rate,
// at most 5 ms, beside floor-p99-ms, the p99 of the floor's one-row commits
// (on a loaded machine the scheduler's delays dwarf the disk's, and show
// there first). BenchmarkEnqueueThroughput is the same through the socket,
// with the service in a process of its own.
func BenchmarkGroupCommit(b *testing.B) {
	svc, _ := setupIn(b, b.TempDir(), Options{})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	b.Cleanup(func() { stop(); <-done })
	const clients = 8
	const rounds = 4
	n := max(b.N, 800)
	per := n / rounds
	msg := func(i int) *queue.Message {
		return newMessage("net-kingdom", fmt.Sprintf("load %d", i))
	}

	// Rounds alternate the floor and the grouped writer, so the machine's
	// noise falls on both alike.
	b.ResetTimer()
	var floorTime, ourTime time.Duration
	var commits []time.Duration // each of the floor's one-row commits
	var wg sync.WaitGroup
	for r := range rounds {
		start := time.Now()
		for i := range per {
			t0 := time.Now()
			if err := svc.store.Queue.Enqueue(ctx, []*queue.Message{msg(i)}); err != nil {
				b.Fatal(err)
			}
			commits = append(commits, time.Since(t0))
		}
		floorTime += time.Since(start)
		start = time.Now()
		for c := range clients {
			wg.Go(func() {
				for i := c; i < per; i += clients {
					if err := svc.writer.enqueue(ctx, msg(r*per+i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		ourTime += time.Since(start)
	}
	b.StopTimer()
	rate := float64(rounds*per) / ourTime.Seconds()
	floor := float64(rounds*per) / floorTime.Seconds()

	// Half load: each client paces itself to its share of half the rate.
	interval := time.Duration(float64(time.Second) / (rate / 2 / clients))
	var mu sync.Mutex
	var lat []time.Duration
	half := min(n, 2000)
	for c := range clients {
		wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := c; i < half; i += clients {
				<-tick.C
				t0 := time.Now()
				if err := svc.writer.enqueue(ctx, msg(i)); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(floor, "floor-rows/s")
	b.ReportMetric(rate/floor, "ratio-vs-floor")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(benchutil.Percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(benchutil.Percentile(lat, 99)), "p99-ms")
	// The latency's floor: one row's own commit, unloaded, on the same disk
	// in the same run (what the machine's noise does to a lone commit).
	b.ReportMetric(ms(benchutil.Percentile(commits, 99)), "floor-p99-ms")
	b.ReportMetric(float64(benchutil.Percentile(lat, 99))/float64(benchutil.Percentile(commits, 99)), "p99-ratio-vs-floor")
}
