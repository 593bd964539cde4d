package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/daemon"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// benchWorkspace is workspace for benchmarks.
func benchWorkspace(b *testing.B, config string, repos ...string) (*testutil.Env, *testutil.Tmux) {
	b.Helper()
	e := testutil.NewEnv(b)
	return e, openRecorders(b, e, config, e.RecorderCommand(), repos...)
}

// openRecorders writes config, registers repos and opens their windows
// running recorder, and returns once each records.
func openRecorders(b *testing.B, e *testutil.Env, config, recorder string, repos ...string) *testutil.Tmux {
	b.Helper()
	e.WriteConfig(b, config)
	e.Gita(b, repos...)
	tm := testutil.NewTmux(b)
	e.Tamq(b, append([]string{"open", "--tmux-socket", tm.Name, "--command", recorder}, repos...)...)
	b.Cleanup(func() { e.Run(b, "tamq", "stop") })
	for _, r := range repos {
		testutil.WaitFor(b, "the recorder of "+r, func() bool { _, ok := e.Recording(r); return ok })
	}
	return tm
}

// BenchmarkSendEndToEnd measures `tamq send` (process start, socket, durable
// commit) against a bare `tmux send-keys -l` of the same text into a private
// server. Target: ratio at most 2.5.
func BenchmarkSendEndToEnd(b *testing.B) {
	e, tm := benchWorkspace(b, "[delivery]\nenter_pause_ms = 0\n", "net-kingdom")
	pane := tm.Must(b, "list-windows", "-t", "=work:", "-F", "#{pane_id}")
	text := "To:net-kingdom: build is green, please rebase"
	b.ResetTimer()
	benchutil.Compare(b, "tamq-send",
		benchutil.RunQuiet(e.Vars, filepath.Join(e.Bin, "tamq"), "send", "--quiet", text),
		benchutil.RunQuiet(nil, "tmux", "-L", tm.Name, "send-keys", "-t", pane, "-l", text))
}

// BenchmarkEnqueueThroughput sends through the socket from 8 concurrent
// clients (synchronous=FULL) and compares messages per second with
// one-row-per-transaction inserts into a scratch SQLite file on the same disk
// (the rate without grouping commits). Target: ratio at least 1. It then runs
// at half the measured rate and reports the p99 latency of an enqueue
// (target: 5 ms).
func BenchmarkEnqueueThroughput(b *testing.B) {
	// The shipped configuration: deliveries pace themselves with the Enter
	// pause, as they do for real agents.
	e, _ := benchWorkspace(b, "", "net-kingdom")
	const clients = 8
	const rounds = 4
	n := max(b.N, 400)
	per := n / rounds

	scratch := openScratch(b, filepath.Join(e.Root, "scratch.sqlite3"))
	client := &unixrpc.Client{Socket: e.Socket()}
	send := func(i int) time.Duration {
		t0 := time.Now()
		if err := client.Call(context.Background(), api.OpSend, api.SendArgs{Text: fmt.Sprintf("To:net-kingdom: load %d", i)}, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// Rounds alternate the baseline and the queue, so the machine's noise
	// falls on both alike.
	b.ResetTimer()
	var baseTime, ourTime time.Duration
	var wg sync.WaitGroup
	for r := range rounds {
		baseTime += insertRows(b, scratch, r*per, per)
		start := time.Now()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < per; i += clients {
					send(r*per + i)
				}
			}()
		}
		wg.Wait()
		ourTime += time.Since(start)
	}
	b.StopTimer()
	rate := float64(rounds*per) / ourTime.Seconds()
	baseline := float64(rounds*per) / baseTime.Seconds()
	// Half load: each client paces itself to half the measured rate.
	interval := time.Duration(float64(time.Second) / (rate / 2 / clients))
	var mu sync.Mutex
	var lat []time.Duration
	half := min(n, 800)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := c; i < half; i += clients {
				<-tick.C
				d := send(rounds*per + i)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(baseline, "baseline-inserts/s")
	b.ReportMetric(rate/baseline, "ratio")
	b.ReportMetric(float64(benchutil.Percentile(lat, 50).Microseconds())/1000, "p50-ms-at-half-load")
	b.ReportMetric(float64(benchutil.Percentile(lat, 99).Microseconds())/1000, "p99-ms-at-half-load")
}

// openScratch opens a scratch SQLite file as the baseline writes it: WAL,
// synchronous=FULL, one connection.
func openScratch(b *testing.B, path string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)`); err != nil {
		b.Fatal(err)
	}
	return db
}

// insertRows inserts n rows, one transaction each, and returns the time taken.
func insertRows(b *testing.B, db *sql.DB, from, n int) time.Duration {
	start := time.Now()
	for i := range n {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t (body) VALUES (?)`, fmt.Sprintf("To:net-kingdom: load %d", from+i)); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkEnqueueToPTY measures from the send request (so the durable
// enqueue is inside the figure) to the first byte of the message read by the
// agent from its PTY, written there by the window's broker. The pause before
// Enter comes after that byte, so it is excluded. Target: p99 at most 10 ms.
// Its floor is the send request's own round trip (the durable enqueue), timed
// in the same iterations: the ratio is what delivery adds.
func BenchmarkEnqueueToPTY(b *testing.B) {
	e := testutil.NewEnv(b)
	recorder, feed := e.FedRecorder(b, "net-kingdom")
	openRecorders(b, e, "[delivery]\nenter_pause_ms = 0\n", recorder, "net-kingdom")
	testutil.WaitFor(b, "the broker to attach", func() bool { return brokersAttached(b, e) == 1 })
	client := &unixrpc.Client{Socket: e.Socket()}
	var lat, enqueued []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := feed.Count()
		t0 := time.Now()
		var m api.Message
		if err := client.Call(context.Background(), api.OpSend, api.SendArgs{Text: fmt.Sprintf("To:net-kingdom: ping %d", i)}, &m); err != nil {
			b.Fatal(err)
		}
		enqueued = append(enqueued, time.Since(t0))
		feed.WaitPast(b, before)
		lat = append(lat, time.Since(t0))
		// Let the Enter land before the next message, as a terminal would.
		feed.WaitPast(b, before+int64(len(fmt.Sprintf("From:operator/o: ping %d\r", i)))-1)
	}
	b.StopTimer()
	b.ReportMetric(float64(benchutil.Percentile(lat, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(benchutil.Percentile(lat, 99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(benchutil.Percentile(enqueued, 50).Microseconds())/1000, "enqueue-p50-ms")
	b.ReportMetric(float64(benchutil.Percentile(lat, 50))/float64(benchutil.Percentile(enqueued, 50)), "p50-ratio-to-enqueue")
}

// BenchmarkManyWindows opens 1 and then 100 windows on one endpoint and counts
// the tmux processes the service spawns to deliver one message (through a
// counting tmux wrapper on its PATH): the count must not grow with the windows.
// It also reports the idle service's CPU use over two seconds.
func BenchmarkManyWindows(b *testing.B) {
	e := testutil.NewEnv(b)
	e.WriteConfig(b, "[delivery]\nenter_pause_ms = 0\n")
	shim := filepath.Join(e.Root, "shim")
	os.Mkdir(shim, 0o755)
	count := filepath.Join(e.Root, "tmux-calls")
	real, err := exec.LookPath("tmux")
	if err != nil {
		b.Fatal(err)
	}
	script := "#!/bin/sh\necho x >> " + count + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "tmux"), []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + shim + ":" + strings.TrimPrefix(v, "PATH=")
		}
	}
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("repo-%03d", i)
	}
	e.Gita(b, names...)
	tm := testutil.NewTmux(b)
	b.Cleanup(func() { e.Run(b, "tamq", "stop") })
	calls := func() int {
		data, _ := os.ReadFile(count)
		return strings.Count(string(data), "\n")
	}
	perDelivery := func(windows int) float64 {
		e.Tamq(b, append([]string{"open", "--tmux-socket", tm.Name}, names[:windows]...)...)
		total := 0
		const msgs = 10
		for i := range msgs {
			before := calls()
			var m api.Message
			if err := (&unixrpc.Client{Socket: e.Socket()}).Call(context.Background(), api.OpSend,
				api.SendArgs{Text: fmt.Sprintf("To:%s: hello %d", names[i%windows], i)}, &m); err != nil {
				b.Fatal(err)
			}
			testutil.WaitFor(b, "delivery", func() bool {
				r := e.Run(b, "tamq", "history", "--json", "--state", "injected", "--limit", "1000")
				return strings.Contains(r.Stdout, m.ID)
			})
			total += calls() - before
		}
		return float64(total) / msgs
	}
	b.ResetTimer()
	one := perDelivery(1)
	hundred := perDelivery(100)
	b.StopTimer()
	var ping daemon.PingResult
	if err := (&unixrpc.Client{Socket: e.Socket()}).Call(context.Background(), daemon.OpPing, nil, &ping); err != nil {
		b.Fatal(err)
	}
	// Idle is the absence of work, which no event tells: a second to settle
	// after the last delivery, then the two seconds whose CPU is measured.
	time.Sleep(time.Second)
	t0, _ := benchutil.CPUTicks(ping.PID)
	time.Sleep(2 * time.Second)
	t1, _ := benchutil.CPUTicks(ping.PID)
	ticks, _ := strconv.Atoi(strings.TrimSpace(string(must(exec.Command("getconf", "CLK_TCK").Output()))))
	b.ReportMetric(one, "tmux-calls/delivery-1-window")
	b.ReportMetric(hundred, "tmux-calls/delivery-100-windows")
	b.ReportMetric(float64(t1-t0)/float64(ticks)/2*100, "idle-cpu-%")
}

func must(b []byte, err error) []byte {
	if err != nil {
		return nil
	}
	return b
}
