package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// benchLoop is a loop whose agent window records what it receives, with
// tamq's delivery pauses at zero: the figures are our own steps.
func benchLoop(b *testing.B, engineConfig string) (*loop, *client.Client, *tamqclient.Client, recording) {
	b.Helper()
	l := newLoop(b, engineConfig, "net-kingdom")
	l.Env.WriteConfig(b, "[delivery]\nenter_pause_ms = 20\nquiet_ms = 0\nmax_quiet_wait_ms = 0\n")
	recorder, feed := l.Env.FedRecorder(b, "net-kingdom")
	l.Env.Tamq(b, "open", "--tmux-socket", l.Tmux.Name, "--mode", "trigger", "--command", recorder, "net-kingdom")
	testutil.WaitFor(b, "the recorder", func() bool { _, ok := l.Env.Recording("net-kingdom"); return ok })
	l.WaitAttached(b, "net-kingdom", 1)
	return l, client.New(l.PathsOf(b, paths.Engine)), tamqclient.New(l.PathsOf(b, paths.Tamq)), recording{filepath.Join(l.Env.Root, "rec", "net-kingdom"), feed}
}

// recording is what the agent's terminal received: the file, and the feed
// its bytes arrive on as they come.
type recording struct {
	path string
	feed *testutil.Feed
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// BenchmarkWakeToFirstByte measures an operator's wake (trigger, gate, lease,
// tamq's wake operation, the delivery) until the first byte of the prompt
// reaches the agent's terminal, against the same path for a plain `tamq
// send` message measured in the same run. The pause before Enter is not
// part of it (it comes after the first byte, and is zero here).
func BenchmarkWakeToFirstByte(b *testing.B) {
	_, engine, tamq, rec := benchLoop(b, "[coordination]\nwake_ack_timeout_seconds = 3600\n")
	ctx := context.Background()
	var wakes, sends []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sends = append(sends, firstByte(b, rec, func() {
			if _, err := tamq.Send(ctx, tamqapi.SendArgs{Text: "To:net-kingdom: baseline"}); err != nil {
				b.Fatal(err)
			}
		}))
		wakes = append(wakes, firstByte(b, rec, func() {
			// Each wake adds a lease beside the earlier ones (which the
			// scripted agent never releases): --force, as an operator would.
			if res, err := engine.Wake(ctx, api.WakeArgs{Repo: "net-kingdom", Force: true}); err != nil || res.Lease == nil {
				b.Fatalf("wake: %v %+v", err, res)
			}
		}))
	}
	b.StopTimer()
	b.ReportMetric(quantile(wakes, 0.5), "wake-p50-ms")
	b.ReportMetric(quantile(wakes, 0.99), "wake-p99-ms")
	b.ReportMetric(quantile(sends, 0.5), "send-p50-ms")
	b.ReportMetric(quantile(wakes, 0.5)/quantile(sends, 0.5), "wake/send-p50")
}

// firstByte runs act and returns how long until the agent's terminal
// (recorded at rec) got its first new byte; it returns once the whole
// message, up to its Enter, is in, so the next measurement starts clean.
func firstByte(b *testing.B, rec recording, act func()) time.Duration {
	b.Helper()
	size := rec.feed.Count()
	start := time.Now()
	act()
	rec.feed.WaitPast(b, size)
	d := time.Since(start)
	testutil.WaitFor(b, "the Enter", func() bool { return endsWithEnter(rec.path) })
	return d
}

func endsWithEnter(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) > 0 && b[len(b)-1] == '\r'
}

// BenchmarkLeaseTransitions measures the agent commands' socket path: a
// checkpoint (a lease transition with its checkpoint row and receipt, in one
// transaction) per operation, as a ratio to tamq's durable enqueue of one
// message measured in the same run (target: at least 0.5x its rate).
func BenchmarkLeaseTransitions(b *testing.B) {
	_, engine, tamq, _ := benchLoop(b, "[coordination]\nwake_ack_timeout_seconds = 3600\nlease_renew_interval_seconds = 3600\n")
	ctx := context.Background()
	res, err := engine.Wake(ctx, api.WakeArgs{Repo: "net-kingdom"})
	if err != nil || res.Lease == nil {
		b.Fatalf("wake: %v %+v", err, res)
	}
	id := res.Lease.LeaseID
	if _, err := engine.Ack(ctx, api.LeaseArgs{LeaseID: id}); err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 50)
	start := time.Now()
	for range n {
		if _, err := tamq.Send(ctx, tamqapi.SendArgs{Text: "To:net-kingdom: x", AckMode: "injected"}); err != nil {
			b.Fatal(err)
		}
	}
	enqueue := time.Since(start) / time.Duration(n)
	b.ResetTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := engine.Checkpoint(ctx, api.CheckpointArgs{LeaseID: id, Summary: "step"}); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(time.Second/per), "transitions/s")
	b.ReportMetric(float64(time.Second/enqueue), "enqueues/s")
	b.ReportMetric(float64(enqueue)/float64(per), "rate-vs-enqueue")
}

// BenchmarkStateHubChangeToFirstByte measures a State Hub change (a new
// actionable task put into a workplan) until the first byte of its prompt
// reaches the agent's terminal: with the event stream (the poll interval an
// hour, so only events bring changes) and by polling alone every second.
// The operator's wake on the same path, measured in the same run, is the
// floor. Polling waits half an interval on average, so it takes at most 20
// samples.
func BenchmarkStateHubChangeToFirstByte(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval int
		events   bool
		samples  int // at most
	}{{"events", 3600, true, 1 << 30}, {"poll-1s", 1, false, 20}} {
		b.Run(bc.name, func(b *testing.B) {
			samples := min(b.N, bc.samples)
			h := enginetest.StartHub(b, "")
			h.NoEvents.Store(!bc.events)
			l, engine, _, rec := benchLoop(b, enginetest.HubConfig(h, bc.interval, "wake_ack_timeout_seconds = 3600\n"))
			if bc.events {
				testutil.WaitFor(b, "the event stream", func() bool { return l.Status(b).StateHub.EventsConnected })
			}
			ctx := context.Background()
			var changes, wakes []time.Duration
			wp := enginetest.Workplan("W", "net-kingdom")
			b.ResetTimer()
			for i := range samples {
				wp.Tasks = append(wp.Tasks, enginetest.Todo(fmt.Sprintf("T%d", i), "net-kingdom"))
				changes = append(changes, firstByte(b, rec, func() { h.Put(wp) }))
				wakes = append(wakes, firstByte(b, rec, func() {
					// Each wake adds a lease beside the earlier ones (which the
					// scripted agent never releases): --force, as an operator would.
					if res, err := engine.Wake(ctx, api.WakeArgs{Repo: "net-kingdom", Force: true}); err != nil || res.Lease == nil {
						b.Fatalf("wake: %v %+v", err, res)
					}
				}))
			}
			b.StopTimer()
			b.ReportMetric(quantile(changes, 0.5), "change-p50-ms")
			b.ReportMetric(quantile(changes, 0.99), "change-p99-ms")
			b.ReportMetric(quantile(wakes, 0.5), "wake-p50-ms")
			b.ReportMetric(quantile(changes, 0.5)/quantile(wakes, 0.5), "change/wake-p50")
		})
	}
}
