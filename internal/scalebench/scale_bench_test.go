package scalebench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/daemon"
	engineapi "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/tamq/service"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// The workspace of the issue: a hundred windows on one tmux server, twenty
// tmux servers (endpoints), a registry with a hundred repos per endpoint
// (those without a window are registered only), and a State Hub of 10,000
// tasks in 500 workplans owned by the repos with windows.
const (
	endpoints     = 20
	bigWindows    = 100 // windows on the first endpoint
	otherWindows  = 5   // windows on each of the others
	reposPerEP    = 100 // registered repos per endpoint
	workplans     = 500
	tasksPerPlan  = 20
	sendsPerPhase = 10
)

// idleWindow is how long idle CPU is measured: by default one State Hub
// poll interval (15 s), so exactly one poll falls in it.
func idleWindow() time.Duration {
	if s := os.Getenv("TAMQ_SCALE_IDLE"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return 15 * time.Second
}

// BenchmarkScale sets up the workspace above with real parts (tamq's
// service, coordination-engine, tmux servers on private sockets, brokers
// with a recording agent in every window, the reference State Hub) and
// reports, for each daemon, its idle CPU and resident memory (current and
// peak), the tmux processes spawned per delivery with 1 and 100 windows on
// one endpoint and with 20 endpoints, and how long the engine's State Hub
// polls take. The same figures with one window on one endpoint, measured
// first in the same run, are the baseline. It ignores b.N: run it with
// -benchtime=1x (make bench-scale).
func BenchmarkScale(b *testing.B) {
	e := testutil.NewEnv(b)
	e.WriteConfig(b, "[delivery]\nenter_pause_ms = 0\n")
	calls := countTmux(b, e)
	hub := startHub(b)
	e.WriteEngineConfig(b, "[statehub]\napi_base = \""+hub.url+"\"\n")

	names := make([][]string, endpoints)
	var windowRepos []string
	for ep := range endpoints {
		n := otherWindows
		if ep == 0 {
			n = bigWindows
		}
		for i := range n {
			names[ep] = append(names[ep], fmt.Sprintf("e%02d-r%03d", ep, i))
		}
		windowRepos = append(windowRepos, names[ep]...)
	}
	e.Gita(b, windowRepos...)
	registerMore(b, e, endpoints*reposPerEP-len(windowRepos))
	hub.load(b, names)

	tms := make([]*testutil.Tmux, endpoints)
	for i := range tms {
		tms[i] = testutil.NewTmux(b)
	}
	b.Cleanup(func() {
		e.Run(b, "tamq", "stop")
		e.Run(b, "coordination-engine", "stop")
	})
	e.Engine(b, "start", "--detach")
	open := func(tm *testutil.Tmux, repos []string) {
		e.Tamq(b, append([]string{"open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", e.RecorderCommand()}, repos...)...)
		for _, r := range repos {
			testutil.WaitFor(b, "the agent of "+r, func() bool { _, ok := e.Recording(r); return ok })
		}
		// Each broker's session is verified with one tmux call when it
		// opens: those are the windows', not the deliveries'.
		waitBrokers(b, e)
	}
	enginePID := pidOf(b, e, "coordination-engine")
	tamqPID := 0 // once the first open started the service
	tmuxPID, err := strconv.Atoi(tms[0].Must(b, "display", "-p", "#{pid}"))
	if err != nil {
		b.Fatal(err)
	}
	client := &unixrpc.Client{Socket: e.Socket()}
	sent := 0
	// perDelivery sends messages to the repos in turn, each once the one
	// before arrived in its agent's terminal, and returns the tmux
	// processes spawned per message. Only the service runs tmux meanwhile
	// (its watcher's listings included: they are part of the cycle).
	perDelivery := func(repos []string) float64 {
		total := 0
		for i := range sendsPerPhase {
			repo := repos[i*len(repos)/sendsPerPhase]
			text := fmt.Sprintf("hello %d", sent)
			sent++
			before := calls()
			if err := client.Call(context.Background(), api.OpSend, api.SendArgs{Text: "To:" + repo + ": " + text}, nil); err != nil {
				b.Fatal(err)
			}
			testutil.WaitFor(b, "delivery to "+repo, func() bool { s, _ := e.Recording(repo); return strings.Contains(s, text+"\r") })
			total += calls() - before
		}
		return float64(total) / sendsPerPhase
	}
	ticks := benchutil.ClockTicks()
	idle := func(label string, attachedWindows int) {
		waitAttached(b, e, attachedWindows)
		// Past the service's idle release, so its memory has settled.
		time.Sleep(service.DefaultIdleRelease + time.Second)
		pids := map[string]int{"tamq": tamqPID, "engine": enginePID, "tmux-server": tmuxPID}
		before := map[string]int64{}
		for k, pid := range pids {
			before[k], _ = benchutil.CPUTicks(pid)
		}
		c0, p0 := calls(), hub.pollCount()
		window := idleWindow()
		time.Sleep(window) // the idle window whose CPU, calls and polls are measured
		for _, k := range slices.Sorted(maps.Keys(pids)) {
			t, err := benchutil.CPUTicks(pids[k])
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(t-before[k])/float64(ticks)/window.Seconds()*100, label+"-"+k+"-idle-cpu-%")
			rss, _ := benchutil.StatusKB(pids[k], "VmRSS")
			b.ReportMetric(float64(rss)/1e6, label+"-"+k+"-rss-MB")
			if k != "tmux-server" {
				hwm, _ := benchutil.StatusKB(pids[k], "VmHWM")
				b.ReportMetric(float64(hwm)/1e6, label+"-"+k+"-peak-rss-MB")
			}
		}
		b.ReportMetric(float64(calls()-c0)/window.Seconds(), label+"-idle-tmux-calls/s")
		b.ReportMetric(float64(hub.pollCount()-p0), label+"-polls")
	}

	b.ResetTimer()
	// Baseline: one window on one endpoint.
	open(tms[0], names[0][:1])
	tamqPID = pidOf(b, e, "tamq")
	one := perDelivery(names[0][:1])
	idle("1win", 1)
	// A hundred windows on that endpoint.
	open(tms[0], names[0][1:])
	hundred := perDelivery(names[0])
	// Twenty endpoints.
	for i := 1; i < endpoints; i++ {
		open(tms[i], names[i])
	}
	var across []string
	for i := range sendsPerPhase {
		across = append(across, names[i*endpoints/sendsPerPhase][i%otherWindows])
	}
	twenty := perDelivery(across)
	idle("20ep", len(windowRepos))
	// Polls that see one task changed: the workplans are sent and judged
	// again, as when an agent updates its task.
	for i := range 3 {
		hub.change(b, fmt.Sprintf("W%03d-T15", i), []string{"blocked", "in_progress"}[i%2])
	}
	first, changed, unchanged := hub.pollSpans()
	// A burst: a hundred tasks change at once (each announced), then the
	// engine is idle again; its memory once it has settled.
	for i := range 100 {
		hub.patch(b, fmt.Sprintf("W%03d-T15", 100+i), "blocked")
	}
	hub.change(b, "W099-T15", "blocked")
	time.Sleep(3 * time.Second) // the engine returns freed memory 2 s after a look
	rss, _ := benchutil.StatusKB(enginePID, "VmRSS")
	hwm, _ := benchutil.StatusKB(enginePID, "VmHWM")
	b.ReportMetric(float64(rss)/1e6, "after-burst-engine-rss-MB")
	b.ReportMetric(float64(hwm)/1e6, "after-burst-engine-peak-rss-MB")
	b.StopTimer()
	b.ReportMetric(one, "tmux-calls/delivery-1-window")
	b.ReportMetric(hundred, "tmux-calls/delivery-100-windows")
	b.ReportMetric(twenty, "tmux-calls/delivery-20-endpoints")
	b.ReportMetric(float64(first.Microseconds())/1000, "poll-first-ms")
	b.ReportMetric(float64(changed.Microseconds())/1000, "poll-1-task-changed-median-ms")
	b.ReportMetric(float64(unchanged.Microseconds())/1000, "poll-unchanged-median-ms")
	// TAMQ_SCALE_TMUX_LOG=FILE keeps the log of tmux calls (time, arguments).
	if dst := os.Getenv("TAMQ_SCALE_TMUX_LOG"); dst != "" {
		if data, err := os.ReadFile(filepath.Join(e.Root, "tmux-calls")); err == nil {
			os.WriteFile(dst, data, 0o644)
		}
	}
}

// countTmux puts a tmux on the programs' PATH that logs each call (its
// arguments) before it runs the real one, and returns the count so far.
func countTmux(b *testing.B, e *testutil.Env) func() int {
	shim := filepath.Join(e.Root, "shim")
	if err := os.Mkdir(shim, 0o755); err != nil {
		b.Fatal(err)
	}
	log := filepath.Join(e.Root, "tmux-calls")
	real, err := exec.LookPath("tmux")
	if err != nil {
		b.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$(date +%s.%N) $*\" | cut -c 1-160 >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "tmux"), []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	for i, v := range e.Vars {
		if p, ok := strings.CutPrefix(v, "PATH="); ok {
			e.Vars[i] = "PATH=" + shim + ":" + p
		}
	}
	return func() int {
		data, _ := os.ReadFile(log)
		return bytes.Count(data, []byte("\n"))
	}
}

// registerMore registers n more repos (real directories with a .git, as
// gita's check wants) that get no window: the rest of the endpoints' repos.
func registerMore(b *testing.B, e *testutil.Env, n int) {
	f, err := os.OpenFile(filepath.Join(e.Config, "gita", "repos.csv"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for i := range n {
		name := fmt.Sprintf("spare-%04d", i)
		path := filepath.Join(e.Root, "src", name)
		if err := os.MkdirAll(filepath.Join(path, ".git"), 0o755); err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteString(testutil.GitaRow(path, name)); err != nil {
			b.Fatal(err)
		}
	}
}

func pidOf(b *testing.B, e *testutil.Env, program string) int {
	r := e.Run(b, program, "ping", "--json")
	var p daemon.PingResult
	if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil || p.PID == 0 {
		b.Fatalf("%s ping: %v %s", program, err, r)
	}
	return p.PID
}

// waitBrokers waits until every window tamq has has its broker attached.
func waitBrokers(b *testing.B, e *testutil.Env) {
	testutil.WaitFor(b, "the brokers", func() bool {
		var st api.StatusReport
		if json.Unmarshal([]byte(e.Run(b, "tamq", "status", "--json").Stdout), &st) != nil {
			return false
		}
		for _, ep := range st.Endpoints {
			for _, w := range ep.Windows {
				if !w.Broker {
					return false
				}
			}
		}
		return true
	})
}

// waitAttached waits until the engine has every window attached.
func waitAttached(b *testing.B, e *testutil.Env, windows int) {
	testutil.WaitFor(b, fmt.Sprintf("%d windows attached to the engine", windows), func() bool {
		var st engineapi.StatusReport
		json.Unmarshal([]byte(e.Run(b, "coordination-engine", "status", "--json").Stdout), &st)
		n := 0
		for _, ep := range st.Endpoints {
			if ep.State == "attached" {
				n += len(ep.Windows)
			}
		}
		return n == windows
	})
}

// hub is the reference State Hub, with each poll's requests timed as it
// sees them: from the workplans request to the end of the checkpoints one,
// the last of a look (the engine decodes the workplans in between).
type hub struct {
	srv   *devhub.Server
	url   string
	mu    sync.Mutex
	start time.Time
	full  bool // the workplans were sent, not 304
	spans []span
}

type span struct {
	d    time.Duration
	full bool
}

func startHub(b *testing.B) *hub {
	h := &hub{srv: &devhub.Server{}}
	if err := h.srv.Open(); err != nil {
		b.Fatal(err)
	}
	inner := h.srv.Handler()
	ts, _ := testutil.HTTPServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		t0 := time.Now()
		inner.ServeHTTP(rec, r)
		if r.Method != http.MethodGet {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		switch r.URL.Path {
		case "/v1/workplans":
			h.start, h.full = t0, rec.status == 200
		case "/v1/checkpoints":
			if !h.start.IsZero() {
				h.spans = append(h.spans, span{time.Since(h.start), h.full})
				h.start = time.Time{}
			}
		}
	}))
	h.url = ts.URL
	return h
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush keeps the event stream working through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (h *hub) pollCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.spans)
}

// pollSpans are the engine's first poll (at its start, everything new),
// the median of the later ones that got the workplans (something changed)
// and of those answered 304 (nothing changed, the usual poll).
func (h *hub) pollSpans() (first, changed, unchanged time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var full, same []time.Duration
	for i, s := range h.spans {
		switch {
		case i == 0:
			first = s.d
		case s.full:
			full = append(full, s.d)
		default:
			same = append(same, s.d)
		}
	}
	return first, benchutil.Median(full), benchutil.Median(same)
}

// change sets a task's status, which State Hub announces on its event
// stream, and waits for the engine's poll that fetches the workplans.
func (h *hub) change(b *testing.B, task, status string) {
	h.mu.Lock()
	before := len(h.spans)
	h.mu.Unlock()
	h.patch(b, task, status)
	testutil.WaitFor(b, "the engine's poll after a change", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.ContainsFunc(h.spans[before:], func(s span) bool { return s.full })
	})
}

// patch sets a task's status.
func (h *hub) patch(b *testing.B, task, status string) {
	req, _ := http.NewRequest(http.MethodPatch, h.url+"/v1/tasks/"+task, strings.NewReader(`{"status":"`+status+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("PATCH task %s: %s", task, resp.Status)
	}
}

// load puts 10,000 tasks in 500 workplans into State Hub, as
// BenchmarkPollCycle (internal/engine/service) has them: most done, one in
// progress per workplan, the rest waiting on it, every tenth workplan with
// a task that needs a human. Workplan w belongs to a repo with a window on
// endpoint w%20, so every endpoint's windows own some.
func (h *hub) load(b *testing.B, names [][]string) {
	for w := range workplans {
		owners := names[w%endpoints]
		repo := owners[(w/endpoints)%len(owners)]
		wp := contract.Workplan{ID: fmt.Sprintf("W%03d", w), Repo: repo, Status: "active"}
		for i := range tasksPerPlan {
			t := contract.Task{ID: fmt.Sprintf("W%03d-T%02d", w, i), Title: "task", Repo: repo, Status: "done", Priority: i}
			switch {
			case i == 15:
				t.Status = "in_progress"
			case i > 15:
				t.Status, t.DependsOn = "todo", []string{fmt.Sprintf("W%03d-T%02d", w, i-1)}
			}
			if i == tasksPerPlan-1 && w%10 == 0 {
				t.DependsOn, t.NeedsHuman = nil, true
			}
			wp.Tasks = append(wp.Tasks, t)
		}
		body, _ := json.Marshal(wp)
		req, _ := http.NewRequest(http.MethodPut, h.url+"/v1/workplans/"+wp.ID, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("PUT workplan %s: %s", wp.ID, resp.Status)
		}
	}
}
