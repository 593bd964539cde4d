package top

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/tamqapi"
)

var at = time.Date(2026, 12, 2, 10, 1, 46, 0, time.UTC)

func tamqUp(windows ...tamqapi.EndpointWindow) TamqSource {
	last := at.Add(-5 * time.Second)
	return TamqSource{Running: true, Status: &tamqapi.StatusReport{
		Service: tamqapi.ServiceStatus{Running: true, PID: 1234, UptimeSeconds: 192, ServerVersion: "v0.1.0"},
		Queue:   tamqapi.QueueStatus{Counts: map[string]int{"queued": 3, "awaiting_ack": 2, "acknowledged": 7}},
		StateHub: tamqapi.StateHubStatus{APIBase: "http://127.0.0.1:8000", Reachable: true, UnpublishedReceipts: 4,
			Publishing: &tamqapi.PublishStatus{Via: tamqapi.ViaEngine, LastSuccessAt: &last}},
		Coordination: tamqapi.CoordinationStatus{Attached: true, Endpoints: map[string]string{"tmux-amq-42": "ce-1"}},
		Endpoints: []tamqapi.Endpoint{{ID: "tmux-amq-42", TmuxSocket: "/tmp/tmux-1000/default", State: "connected",
			Windows: windows}},
	}}
}

func engineUp(receipts ...engineapi.Receipt) EngineSource {
	look := at.Add(-2 * time.Second)
	return EngineSource{Running: true, Receipts: receipts, Status: &engineapi.StatusReport{
		Service: engineapi.ServiceStatus{Running: true, PID: 2345, UptimeSeconds: 60, ServerVersion: "v0.1.0"},
		Leases:  engineapi.LeaseCounts{Counts: map[string]int{"offered": 1, "running": 2, "completed": 5}},
		Tamq:    engineapi.TamqStatus{Reachable: true},
		StateHub: engineapi.StateHubStatus{APIBase: "http://127.0.0.1:8000", Reachable: true, LastPoll: &look, Polls: 12,
			EventsConnected: true, EventsOffered: true, UnpublishedReceipts: 3},
		Endpoints: []engineapi.EndpointStatus{{State: "attached"}},
	}}
}

var exitedWith = 127

var windows = []tamqapi.EndpointWindow{
	{Repo: "alpha", Mode: "trigger", Alive: true, Broker: true},
	{Repo: "beta", Mode: "manual", Alive: false, Waiting: 2, WaitReason: "the agent in its window has exited", Ended: "exited", ExitStatus: &exitedWith},
	{Repo: "gamma", Mode: "trigger", Alive: true, Broker: true, Waiting: 1, WaitReason: "the agent is not at its prompt: a dialog shows"},
}

func TestRender(t *testing.T) {
	receipt := engineapi.Receipt{At: at.Add(-time.Second), Kind: "wake", Status: "delivered", Reason: "resumed"}
	offered := engineapi.Receipt{At: at, Kind: "lease.offered", Status: "offered", Reason: "task_actionable", TaskID: "T-7", Repo: "alpha"}
	tests := []struct {
		name    string
		snap    Snapshot
		opts    Options
		want    []string // lines, or parts of one line, that must show
		notWant []string
	}{{
		name: "everything up",
		snap: Snapshot{At: at, Tamq: tamqUp(windows...), Engine: engineUp(offered, receipt)},
		want: []string{
			"tamq: running, pid 1234, up 3m12s, version v0.1.0",
			"queue: queued 3, delivering 0, injected 0, awaiting_ack 2, acknowledged 7, failed 0",
			"endpoint tmux-amq-42: connected, tmux /tmp/tmux-1000/default, 3 windows",
			"REPO   MODE     AGENT       BROKER  PROMPT  QUEUED  NOTE",
			"alpha  trigger  alive       yes     -       0\n",
			"beta   manual   EXITED 127  no      -       2       the agent in its window has exited",
			"gamma  trigger  alive       yes     no      1       the agent is not at its prompt",
			"statehub: http://127.0.0.1:8000 reachable, 4 receipts unpublished, via engine, last published 5s ago",
			"coordination: attached: tmux-amq-42 as ce-1",
			"coordination-engine: running, pid 2345, up 1m0s",
			"leases: offered 1, acknowledged 0, running 2, checkpointed 0, completed 5, retry_wait 0, stopped 0",
			"tamq: reachable, 1 endpoint attached",
			"statehub: http://127.0.0.1:8000 reachable, last look 2s ago (12 looks), events connected, not paused, 3 receipts waiting",
			"receipts: latest 2, newest first",
			// Issue 40: each receipt says which task and repo it is about.
			"TIME      KIND           STATUS     TASK  REPO   REASON",
			"lease.offered  offered    T-7   alpha  task_actionable",
			"wake           delivered  -     -      resumed",
		},
		notWant: []string{"not running", "q quits", "State Hub unreachable"},
	}, {
		// The engine's observer fails since its last good look: the loop's
		// standings are that look's, and the pane says so above them.
		name: "State Hub unreachable, old standings",
		snap: func() Snapshot {
			e := engineUp()
			look, since := at.Add(-time.Minute), at.Add(-50*time.Second)
			e.Status.StateHub = engineapi.StateHubStatus{APIBase: "http://hub", LastPoll: &look, UnreachableSince: &since, ObserveError: "connection refused"}
			e.Status.Tasks = engineapi.TaskCounts{"needs_you": 3}
			return Snapshot{At: at, Tamq: TamqSource{Error: NotRunning}, Engine: e}
		}(),
		want: []string{"State Hub unreachable since " + at.Add(-50*time.Second).Local().Format(time.TimeOnly) +
			"; standings as of " + at.Add(-time.Minute).Local().Format(time.TimeOnly) + "\nloop: 3 need you"},
	}, {
		name:    "engine absent",
		snap:    Snapshot{At: at, Tamq: tamqUp(windows...), Engine: EngineSource{Error: NotRunning}},
		want:    []string{"tamq: running", "queue: queued 3", "coordination-engine: not running\n"},
		notWant: []string{"leases:", "receipts:"},
	}, {
		name:    "tamq absent",
		snap:    Snapshot{At: at, Tamq: TamqSource{Error: NotRunning}, Engine: engineUp()},
		want:    []string{"tamq: not running\n", "coordination-engine: running", "receipts: none yet"},
		notWant: []string{"queue:", "endpoint tmux"},
	}, {
		name: "nothing running",
		snap: Snapshot{At: at, Tamq: TamqSource{Error: NotRunning}, Engine: EngineSource{Error: NotRunning}},
		want: []string{"tamq: not running\n", "coordination-engine: not running\n"},
	}, {
		name: "engine paused, unreachable hub, receipts failing",
		snap: func() Snapshot {
			e := engineUp()
			e.Status.StateHub = engineapi.StateHubStatus{APIBase: "http://hub", Paused: true, EventsOffered: true, ObserveError: "401"}
			e.ReceiptsError = "timed out"
			return Snapshot{At: at, Tamq: TamqSource{Error: "cannot connect"}, Engine: e}
		}(),
		want: []string{"tamq: cannot connect", "statehub: http://hub NOT reachable, no look yet, events not connected, PAUSED", "ERROR 401",
			"receipts: ERROR timed out"},
	}, {
		name: "GitHub as State Hub, during a rate limit's pause, a task picked",
		snap: func() Snapshot {
			e := engineUp()
			until := at.Add(5 * time.Second)
			e.Status.StateHub = engineapi.StateHubStatus{Kind: "github", APIBase: "https://engineapi.github.com", Reachable: true, RetryAt: &until,
				Budget: &engineapi.RateBudget{Limit: 5000, Remaining: 4990, Reset: at.Add(time.Hour)}, ObserveError: "GitHub: secondary rate limit"}
			e.Tasks = []engineapi.TaskStanding{{ID: "octo-org/alpha#12", Repo: "alpha", Kind: "ready", Words: "ready: takes it next",
				URL: "https://github.com/octo-org/alpha/issues/12"}}
			return Snapshot{At: at, Tamq: TamqSource{Error: NotRunning}, Engine: e}
		}(),
		opts: Options{Interactive: true, Selected: 0},
		want: []string{"statehub: github at https://engineapi.github.com reachable", "waiting until 10:01:51 as State Hub asked", "4990 of 5000 requests left",
			"> octo-org/alpha#12", "page: https://github.com/octo-org/alpha/issues/12"},
	}, {
		name:    "interactive title",
		snap:    Snapshot{At: at, Tamq: TamqSource{Error: NotRunning}, Engine: EngineSource{Error: NotRunning}},
		opts:    Options{Interactive: true, Interval: 500 * time.Millisecond},
		want:    []string{"every 500ms  q quits"},
		notWant: []string{"\x1b"},
	}, {
		name: "names that would act are escaped",
		snap: Snapshot{At: at, Tamq: tamqUp(tamqapi.EndpointWindow{Repo: "evil\x1b]52;c;aGk=\x07", Mode: "manual", Alive: true}),
			Engine: engineUp(engineapi.Receipt{At: at, Kind: "wake", Status: "stopped", Reason: "bad\u202ename"})},
		want:    []string{`evil\x1b]52;c;aGk=\x07`, `bad\u202ename`},
		notWant: []string{"\x1b", "\x07", "\u202e"},
	}, {
		name: "unknown states still counted",
		snap: func() Snapshot {
			s := tamqUp()
			s.Status.Queue.Counts["parked"] = 9
			return Snapshot{At: at, Tamq: s, Engine: EngineSource{Error: NotRunning}}
		}(),
		want: []string{"failed 0, cancelled 0, held 0, parked 9", "endpoint tmux-amq-42: connected, tmux /tmp/tmux-1000/default, 0 windows"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := Render(tc.snap, tc.opts)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("unexpected %q in:\n%s", w, out)
				}
			}
		})
	}
}

// A long repo name is cut in its column, so the columns after it stay
// aligned; every line is cut to the terminal's width.
func TestRenderCutsToWidth(t *testing.T) {
	long := strings.Repeat("very-long-repository-name-", 4)
	snap := Snapshot{At: at, Tamq: tamqUp(tamqapi.EndpointWindow{Repo: long, Mode: "trigger", Alive: true, Broker: true},
		tamqapi.EndpointWindow{Repo: "short", Mode: "manual", Alive: true}), Engine: engineUp()}

	out := Render(snap, Options{})
	if strings.Contains(out, long) {
		t.Errorf("the long name is shown whole:\n%s", out)
	}
	cutName := ansi.Truncate(long, repoCells, "…")
	if !strings.Contains(out, cutName+"  trigger  alive  yes") {
		t.Errorf("the long name is not cut to %d cells in its column:\n%s", repoCells, out)
	}
	short := "short" + strings.Repeat(" ", repoCells-len("short")) + "  manual"
	if !strings.Contains(out, short) {
		t.Errorf("columns not aligned after the cut name:\n%s", out)
	}

	const width = 40
	out = Render(snap, Options{Width: width})
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line of %d cells, wider than %d: %q", w, width, l)
		}
	}
	if !strings.Contains(out, "…") {
		t.Errorf("no line marked as cut:\n%s", out)
	}
}

func TestRenderCutsToHeight(t *testing.T) {
	snap := Snapshot{At: at, Tamq: tamqUp(windows...), Engine: engineUp()}
	full := strings.Count(Render(snap, Options{}), "\n")
	out := Render(snap, Options{Height: 10})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10:\n%s", len(lines), out)
	}
	if want := "… " + strconv.Itoa(full-9) + " more lines"; !strings.HasPrefix(lines[9], want) {
		t.Errorf("last line %q, want it to start with %q", lines[9], want)
	}
}
