package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// One State Hub of 10,000 tasks in 500 workplans, as the poll-cycle
// benchmarks see it: most tasks done, one in progress per workplan, the
// rest waiting on it, and every tenth workplan with a task that needs a
// human (a gated candidate, judged once and then remembered).
type bigHub struct {
	workplans []contract.Workplan
	body      atomic.Pointer[[]byte]
	etag      atomic.Pointer[string]
	rev       int
}

func newBigHub() *bigHub {
	h := &bigHub{}
	for w := range 500 {
		wp := contract.Workplan{ID: fmt.Sprintf("W%03d", w), Repo: fmt.Sprintf("repo%02d", w%20), Status: "active", Revision: "1"}
		for i := range 20 {
			t := contract.Task{ID: fmt.Sprintf("W%03d-T%02d", w, i), Title: "task", Repo: wp.Repo, Revision: "1", Status: "done", Priority: i}
			switch {
			case i == 15:
				t.Status = "in_progress"
			case i > 15:
				t.Status, t.DependsOn = "todo", []string{fmt.Sprintf("W%03d-T%02d", w, i-1)}
			}
			if i == 19 && w%10 == 0 {
				t.DependsOn, t.NeedsHuman = nil, true
			}
			wp.Tasks = append(wp.Tasks, t)
		}
		h.workplans = append(h.workplans, wp)
	}
	h.publish()
	return h
}

// change gives n tasks (the in-progress ones of n workplans) a new
// revision and status, as agents updating their tracker do.
func (h *bigHub) change(n int) {
	for w := range n {
		t := &h.workplans[(h.rev*n+w)%len(h.workplans)].Tasks[15]
		if t.Status == "in_progress" {
			t.Status = "blocked"
		} else {
			t.Status = "in_progress"
		}
		t.Revision = fmt.Sprint(h.rev + 2)
	}
	h.rev++
	h.publish()
}

func (h *bigHub) publish() {
	b, err := json.Marshal(map[string]any{"workplans": h.workplans})
	if err != nil {
		panic(err)
	}
	tag := fmt.Sprintf(`"%d"`, h.rev)
	h.body.Store(&b)
	h.etag.Store(&tag)
}

func (h *bigHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/workplans":
		tag := *h.etag.Load()
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", tag)
		w.Write(*h.body.Load())
	case "/v1/messages":
		io.WriteString(w, `{"messages":[]}`)
	case "/v1/checkpoints":
		io.WriteString(w, `{"checkpoints":[],"cursor":"0"}`)
	default:
		http.NotFound(w, r)
	}
}

// inProcessEngine is an engine service (not running its workers) observing
// base, so a test or benchmark can call one look at a time.
func inProcessEngine(b testing.TB, base string) *Service {
	b.Helper()
	return inProcessEngineWith(b, func(cfg *config.Loaded) { cfg.StateHub.APIBase = base },
		func() (*gita.Registry, error) { return &gita.Registry{}, nil }, nil, nil)
}

// inProcessEngineWith is inProcessEngine with the configuration as set
// does it, over registry, with State Hub's driver hub (nil: the config's)
// and the clock clk (nil: the system's).
func inProcessEngineWith(b testing.TB, set func(*config.Loaded), registry func() (*gita.Registry, error), hub statehub.Hub, clk clock.Clock) *Service {
	b.Helper()
	return inProcessEngineOpts(b, set, Options{Registry: registry, Hub: hub, Clock: clk})
}

// inProcessEngineOpts is an engine service (not running its workers) with
// o's parts (tamq, State Hub's driver, the clock, the registry) in paths
// and a configuration of its own, the defaults as set (when not nil)
// changes them.
func inProcessEngineOpts(b testing.TB, set func(*config.Loaded), o Options) *Service {
	b.Helper()
	root := b.TempDir()
	p, err := paths.Resolve(paths.Engine, func(k string) string {
		return map[string]string{"HOME": root, "XDG_STATE_HOME": filepath.Join(root, "s"), "XDG_RUNTIME_DIR": filepath.Join(root, "r"),
			"XDG_CONFIG_HOME": filepath.Join(root, "c")}[k]
	})
	if err != nil {
		b.Fatal(err)
	}
	o.Paths, o.Config = p, config.Defaults(p)
	if set != nil {
		set(o.Config)
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.d.Close)
	return s
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPollCycle is one look of the observer at 10,000 tasks in 500
// workplans, with nothing changed (State Hub answers 304) and with 1% of
// the tasks changed. It reports wall time per look (ns/op) and the CPU the
// process used (cpu-ms/op; the in-process State Hub's share included, so
// the engine's own is less), each against its floor measured in the same
// run: a bare conditional GET answered 304, and decoding the workplans'
// JSON alone.
func BenchmarkPollCycle(b *testing.B) {
	hub := newBigHub()
	ts := httptest.NewServer(hub)
	defer ts.Close()
	ctx := context.Background()
	for _, bc := range []struct {
		name    string
		changed int
	}{{"unchanged", 0}, {"1pct-changed", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			s := inProcessEngine(b, ts.URL)
			if err := s.observer.observeOnce(ctx); err != nil { // the first look sees everything
				b.Fatal(err)
			}
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				if bc.changed > 0 {
					b.StopTimer()
					hub.change(bc.changed)
					b.StartTimer()
				}
				before := cpuTime()
				if err := s.observer.observeOnce(ctx); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - before
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	b.Run("floor-conditional-get", func(b *testing.B) {
		tag := *hub.etag.Load()
		reportCPU(b, func() {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/workplans", nil)
			req.Header.Set("If-None-Match", tag)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusNotModified {
				b.Fatalf("%v %v", resp, err)
			}
			resp.Body.Close()
		})
	})
	b.Run("floor-decode", func(b *testing.B) {
		body := *hub.body.Load()
		reportCPU(b, func() {
			var v struct{ Workplans []contract.Workplan }
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// reportCPU runs f b.N times and reports the CPU each took (cpu-ms/op).
func reportCPU(b *testing.B, f func()) {
	var cpu time.Duration
	for range b.N {
		before := cpuTime()
		f()
		cpu += cpuTime() - before
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
