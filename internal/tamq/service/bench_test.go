package service_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/tamq/service"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// BenchmarkPingEndToEnd measures `tamq ping` (process start, dial, round
// trip) against `tmux display -p '#{pid}'` on a private tmux server, the
// cheapest round trip to a local server the user already runs. Target: ratio
// at most 1.5.
func BenchmarkPingEndToEnd(b *testing.B) {
	e := testutil.NewEnv(b)
	e.Tamq(b, "start", "--detach")
	b.Cleanup(func() { e.Run(b, "tamq", "stop") })
	tm := testutil.NewTmux(b)
	b.ResetTimer()
	benchutil.Compare(b, "tamq-ping",
		benchutil.RunQuiet(e.Vars, filepath.Join(e.Bin, "tamq"), "ping", "--quiet"),
		benchutil.RunQuiet(nil, "tmux", "-L", tm.Name, "display", "-p", "#{pid}"))
}

// BenchmarkServiceIdleRSS reports the resident memory of an idle service
// after it has answered b.N status requests and then waited out its idle
// release. Target: at most 20 MB. The tmux server's RSS, measured in the same
// run, is shown beside it.
func BenchmarkServiceIdleRSS(b *testing.B) {
	e := testutil.NewEnv(b)
	e.Tamq(b, "start", "--detach")
	b.Cleanup(func() { e.Run(b, "tamq", "stop") })
	tm := testutil.NewTmux(b)
	var ping daemon.PingResult
	if err := json.Unmarshal([]byte(e.Tamq(b, "ping", "--json").Stdout), &ping); err != nil {
		b.Fatal(err)
	}
	var tmuxPID int
	if err := json.Unmarshal([]byte(tm.Must(b, "display", "-p", "#{pid}")), &tmuxPID); err != nil {
		b.Fatal(err)
	}
	busy := int64(0)
	for i := 0; i < b.N; i++ {
		e.Run(b, "tamq", "status", "--json")
		if rss, err := benchutil.RSS(ping.PID); err == nil {
			busy = max(busy, rss)
		}
	}
	b.StopTimer()
	// Idle: wait past the service's idle release for its memory to settle.
	time.Sleep(service.DefaultIdleRelease + time.Second)
	rss, err := benchutil.RSS(ping.PID)
	if err != nil {
		b.Fatal(err)
	}
	tmuxRSS, err := benchutil.RSS(tmuxPID)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(busy)/1e6, "busy-rss-MB")
	b.ReportMetric(float64(rss)/1e6, "service-rss-MB")
	b.ReportMetric(float64(tmuxRSS)/1e6, "tmux-server-rss-MB")
}
