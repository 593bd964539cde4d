package service_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/standin"
)

func TestMain(m *testing.M) {
	testutil.MoreParallel(4)
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// loop is enginetest's Loop with the helpers only this package's tests use.
type loop struct{ *enginetest.Loop }

func newLoop(t testing.TB, engineConfig string, repos ...string) *loop {
	t.Helper()
	return &loop{enginetest.NewLoop(t, engineConfig, repos...)}
}

func newLoopIn(t testing.TB, e *testutil.Env, engineConfig string, repos ...string) *loop {
	t.Helper()
	return &loop{enginetest.NewLoopIn(t, e, engineConfig, repos...)}
}

// lease reads one lease in this process (tests poll it).
func (l *loop) lease(t testing.TB, id string) api.Lease {
	t.Helper()
	res, err := client.New(l.PathsOf(t, paths.Engine)).Leases(context.Background(), api.LeasesArgs{})
	if err != nil {
		t.Fatalf("leases: %v", err)
	}
	for _, ls := range res.Leases {
		if ls.LeaseID == id {
			return ls
		}
	}
	t.Fatalf("no lease %s in %+v", id, res.Leases)
	return api.Lease{}
}

func (l *loop) receipts(t testing.TB, leaseID string) []api.Receipt {
	t.Helper()
	r := l.Env.Engine(t, "receipts", "--json", "--lease", leaseID)
	var res api.ReceiptsResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("receipts --json: %v\n%s", err, r)
	}
	return res.Receipts
}

func kinds(rs []api.Receipt) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Kind+":"+r.Status)
	}
	return out
}

// tamqMessage is tamq's record of a message, with its body.
func (l *loop) tamqMessage(t testing.TB, id string) tamqapi.Message {
	t.Helper()
	r := l.Env.Tamq(t, "history", "--json", "--body")
	var ms []tamqapi.Message
	if err := json.Unmarshal([]byte(r.Stdout), &ms); err != nil {
		t.Fatalf("history --json: %v\n%s", err, r)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no tamq message %s in\n%s", id, r.Stdout)
	return tamqapi.Message{}
}

// The whole path of one wake: the operator's wake, the lease, tamq queuing
// the prompt into the agent's window, the agent acknowledging, renewing,
// checkpointing and releasing it completed, with a receipt at each step and
// the wake message acknowledged in tamq.
func TestWakeAckRenewCheckpointRelease(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 30\n", "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "complete")
	l.WaitAttached(t, "net-kingdom", 1)
	res := l.Wake(t, "net-kingdom", "--task", "T-1")
	if res.Lease == nil || res.Stopped != "" {
		t.Fatalf("wake: %+v", res)
	}
	id := res.Lease.LeaseID
	testutil.WaitFor(t, "the lease to complete", func() bool { return l.lease(t, id).State == "completed" })
	// The agent logs a command once it returned, after the engine answered.
	testutil.WaitFor(t, "the agent to finish", func() bool { return strings.Contains(l.AgentLog(), "done "+id) })
	for _, want := range []string{
		"wake " + id + " 1 checkpoint=no",
		"run lease ack " + id + " --attempt 1 -> 0",
		"run lease renew " + id + " --attempt 1 -> 0",
		"run lease release " + id + " --result completed --attempt 1 -> 0",
	} {
		if !strings.Contains(l.AgentLog(), want) {
			t.Errorf("agent log lacks %q:\n%s", want, l.AgentLog())
		}
	}
	got := strings.Join(kinds(l.receipts(t, id)), " ")
	for _, want := range []string{"lease.offered:offered", "wake.sent:resumed", "lease.acknowledged", "lease.running", "checkpoint.recorded", "lease.completed"} {
		if !strings.Contains(got, want) {
			t.Errorf("receipts lack %s: %s", want, got)
		}
	}
	for _, r := range l.receipts(t, id) {
		b, _ := json.Marshal(r)
		// The scripted agent acknowledges with its own command: the
		// engine knows the caller is not tamq.
		if r.Kind == "lease.acknowledged" && r.Detail["by"] != "agent" {
			t.Errorf("the ack is not recorded as the agent's: %s", b)
		}
		if strings.Contains(string(b), "scripted work done") {
			t.Errorf("a receipt carries the checkpoint summary: %s", b)
		}
		if r.PolicyProfile == "" || r.ConfigVersion == "" {
			t.Errorf("receipt without policy profile or config version: %s", b)
		}
	}
	lease := l.lease(t, id)
	m := l.tamqMessage(t, lease.LocalLeaseID)
	if m.SenderKind != "coordination" || m.AckMode != "acknowledged" || m.State != "acknowledged" ||
		m.CorrelationID != res.Trigger.SourceRevision || m.CoordinationEndpointID != lease.CoordinationEndpointID {
		t.Errorf("tamq's wake message: %+v", m)
	}
	if m.Body == nil || !strings.HasSuffix(*m.Body, "coordination-engine lease release "+id+" --attempt 1 --result completed|failed|blocked [--reason TEXT]") {
		t.Errorf("the prompt does not end with the release command: %v", m.Body)
	}
}

// A lease nobody renews runs out: it waits its backoff, is offered again as
// a new attempt whose prompt carries the latest checkpoint, and once the
// attempts are used up it stops for the operator.
func TestExpiryRetriesWithTheCheckpointThenStops(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 2
lease_renew_interval_seconds = 1
lease_missed_renewals = 1
retry_backoff_seconds = [1]
max_attempts = 1
`, "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "ackstall stall")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom").Lease.LeaseID
	testutil.WaitFor(t, "the lease to stop", func() bool { return l.lease(t, id).State == "stopped" })
	if log := l.AgentLog(); !strings.Contains(log, "wake "+id+" 1 checkpoint=no") || !strings.Contains(log, "wake "+id+" 2 checkpoint=yes") {
		t.Errorf("the agent was not woken twice, the second time with its checkpoint:\n%s", log)
	}
	ls := l.lease(t, id)
	if ls.Attempt != 2 || ls.StopReason != "exhausted" {
		t.Errorf("stopped lease: %+v", ls)
	}
	got := strings.Join(kinds(l.receipts(t, id)), " ")
	for _, want := range []string{"lease.retry_wait", "lease.reoffered", "lease.stopped"} {
		if !strings.Contains(got, want) {
			t.Errorf("receipts lack %s: %s", want, got)
		}
	}
	// The agent commands on a lease that stopped: a distinct exit status.
	r := l.Env.Run(t, "coordination-engine", "lease", "renew", id)
	if r.Status != 22 || !strings.Contains(r.Stderr, id) {
		t.Errorf("renew of a stopped lease: %s", r)
	}
	if r := l.Env.Run(t, "coordination-engine", "lease", "ack", "no-such-lease"); r.Status != 12 {
		t.Errorf("ack of an unknown lease: %s", r)
	}
}

// A window opened in manual mode is never woken; a repo gita does not
// register is refused before any trigger.
func TestManualWindowAndUnknownRepo(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "complete", "--mode", "manual")
	l.WaitAttached(t, "net-kingdom", 1)
	// A window in manual mode is waited for, not a gate: no lease, no
	// stop, and the wake says so.
	res := l.Wake(t, "net-kingdom")
	if res.Waiting != "manual_mode" || res.Stopped != "" || res.Lease != nil || !strings.Contains(res.Reason, "manual") {
		t.Errorf("wake of a manual window: %+v", res)
	}
	if r := l.Env.Run(t, "coordination-engine", "wake", "nowhere"); r.Status != 5 || !strings.Contains(r.Stderr, "nowhere") {
		t.Errorf("wake of an unregistered repo: %s", r)
	}
}

// Two tamq endpoints (two tmux servers) host the repo: the wake must name one.
func TestTwoEndpointsNeedAnExplicitOne(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "complete")
	other := testutil.NewTmux(t)
	l.Env.Tamq(t, "open", "--tmux-socket", other.Name, "--mode", "trigger", "--command", "cat", "net-kingdom")
	l.WaitAttached(t, "net-kingdom", 2)
	res := l.Wake(t, "net-kingdom")
	if res.Stopped != "ambiguous_ownership" || res.Lease != nil {
		t.Fatalf("wake with two endpoints: %+v", res)
	}
	var ep string
	for _, e := range l.Status(t).Endpoints {
		if e.State == "attached" && strings.Contains(e.TmuxSocket, l.Tmux.Name) {
			ep = e.TamqEndpointID
		}
	}
	res = l.Wake(t, "net-kingdom", "--endpoint", ep)
	if res.Lease == nil || res.Lease.WakeOutcome == "" {
		t.Errorf("wake naming endpoint %s: %+v", ep, res)
	}
}

// Killed with SIGKILL while it holds a lease, the engine comes back with the
// lease and its deadline from SQLite: no second live lease, and the lease
// still runs out on time.
func TestEngineKilledMidLeaseRecoversIt(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 2
lease_renew_interval_seconds = 1
lease_missed_renewals = 2
retry_backoff_seconds = [60]
max_attempts = 1
`, "net-kingdom")
	l.OpenAgent(t, "net-kingdom", "ackstall")
	l.WaitAttached(t, "net-kingdom", 1)
	id := l.Wake(t, "net-kingdom").Lease.LeaseID
	testutil.WaitFor(t, "the lease to be checkpointed", func() bool { return l.lease(t, id).State == "checkpointed" })
	pid := lockfile.HolderPID(filepath.Join(l.Env.EngineState(), "coordination-engine.lock"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the engine to be gone", func() bool { return syscall.Kill(pid, 0) != nil })
	l.Env.Engine(t, "start", "--detach")
	testutil.WaitFor(t, "the lease to run out after the restart", func() bool { return l.lease(t, id).State == "retry_wait" })
	// The agent, late, finds its lease ran out: a distinct exit status.
	if r := l.Env.Run(t, "coordination-engine", "lease", "renew", id); r.Status != 23 {
		t.Errorf("renew of a lease that ran out: %s", r)
	}
	r := l.Env.Engine(t, "leases", "--json")
	var res api.LeasesResult
	json.Unmarshal([]byte(r.Stdout), &res)
	if len(res.Leases) != 1 {
		t.Errorf("leases after the restart: %s", r.Stdout)
	}
	// tamq attaches to the new engine by itself.
	l.WaitAttached(t, "net-kingdom", 1)
}

// tamq works without the engine, and attaches when it comes back.
func TestTamqWorksWithoutTheEngineAndAttachesWhenItIsBack(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "net-kingdom", "railiance")
	l.Env.Engine(t, "stop")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--command", l.Env.RecorderCommand(), "net-kingdom", "railiance")
	testutil.WaitFor(t, "the recorder", func() bool { _, ok := l.Env.Recording("railiance"); return ok })
	l.Env.Tamq(t, "send", "To:railiance: no engine needed")
	testutil.WaitFor(t, "the message", func() bool {
		got, _ := l.Env.Recording("railiance")
		return strings.Contains(got, "no engine needed")
	})
	l.Env.Engine(t, "start", "--detach")
	l.WaitAttached(t, "railiance", 1)
}

// At attach the engine accepts only what gita registers at the path gita
// has: an unknown slug or another path is refused with a receipt.
func TestAttachRefusesUnknownSlugsAndOtherPaths(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "net-kingdom", "railiance")
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--command", "cat", "net-kingdom", "railiance")
	l.WaitAttached(t, "railiance", 1)
	// railiance moves in gita's registry: the window's path is no longer gita's.
	moved := filepath.Join(l.Env.Root, "moved")
	if err := os.MkdirAll(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	rows := testutil.GitaRow(filepath.Join(l.Env.Root, "src", "net-kingdom"), "net-kingdom") + testutil.GitaRow(moved, "railiance")
	if err := os.WriteFile(filepath.Join(l.Env.Config, "gita", "repos.csv"), []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	// The engine refreshes the registry at the next attach (a window opened).
	l.Env.Tamq(t, "open", "--tmux-socket", l.Tmux.Name, "--command", "cat", "net-kingdom")
	testutil.WaitFor(t, "railiance to be refused", func() bool {
		for _, ep := range l.Status(t).Endpoints {
			for _, w := range ep.Windows {
				if w.Repo == "railiance" {
					return false
				}
			}
		}
		return true
	})
	// Only tamq's own process attaches: anyone else is refused, whatever
	// the windows.
	_, err := client.New(l.PathsOf(t, paths.Engine)).Attach(context.Background(), api.AttachArgs{
		EndpointID: "tmux-amq-1", Proto: "0.1", Windows: []api.AttachWindow{{Repo: "ghost", Path: moved, Mode: "trigger"}},
	})
	if !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("attach from the operator: %v, want permission_denied", err)
	}
	r := l.Env.Engine(t, "receipts", "--json")
	for _, repo := range []string{"railiance"} {
		if !strings.Contains(r.Stdout, `"endpoint.refused"`) || !strings.Contains(r.Stdout, repo) {
			t.Errorf("no refusal receipt for %s:\n%s", repo, r.Stdout)
		}
	}
}

// pathsOf are a program's paths in the test's environment.
// noCanaries fails t where any of canaries is in State Hub's progress, the
// engine's receipts, window's screen, or, once both daemons are stopped, any
// file below the test's root (databases, logs, exports) but the repositories.
func (l *loop) noCanaries(t testing.TB, h *enginetest.Hub, window string, canaries ...string) {
	t.Helper()
	_, progress := h.Progress()
	receipts := l.Env.Engine(t, "receipts", "--json", "--limit", "10000").Stdout
	screen := l.Tmux.Must(t, "capture-pane", "-p", "-t", window)
	for what, text := range map[string]string{"State Hub's progress": progress, "the engine's receipts": receipts, "the terminal": screen} {
		for _, c := range canaries {
			if strings.Contains(text, c) {
				t.Errorf("a canary (%.6s…) is in %s", c, what)
			}
		}
	}
	l.Env.Run(t, "tamq", "stop")
	l.Env.Run(t, "coordination-engine", "stop")
	err := filepath.WalkDir(l.Env.Root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "/src/") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a socket
		}
		for _, c := range canaries {
			if strings.Contains(string(b), c) {
				t.Errorf("a canary (%.6s…) is in %s", c, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The engine dies after tamq queued its wake and before it read the answer.
// Started again, it sends the identical wake, and tamq answers with the
// original message instead of queuing a second one.
func TestIdenticalWakeAfterTheEngineDiedIsOneMessage(t *testing.T) {
	t.Parallel()
	l := newLoop(t, `[coordination]
wake_ack_timeout_seconds = 30
`, "net-kingdom")
	l.Env.Engine(t, "stop")
	// The engine reaches tamq through a relay that keeps tamq's answer to
	// the first wake from it.
	lost := make(chan string, 1)
	var once sync.Once
	standin.Mediate(t, l.Env, func(op string, answer []byte) bool {
		kept := false
		if op == tamqapi.OpWake {
			once.Do(func() { kept = true; lost <- string(answer) })
		}
		return kept
	})
	startEngine := func() { l.Env.Engine(t, "start", "--detach") }
	startEngine()
	l.OpenAgent(t, "net-kingdom", "stall")
	l.WaitAttached(t, "net-kingdom", 1)

	wake := l.Env.Command(context.Background(), "coordination-engine", "wake", "net-kingdom")
	if err := wake.Start(); err != nil {
		t.Fatal(err)
	}
	var answer tamqapi.WakeAck
	select {
	case res := <-lost:
		var frame struct{ Result tamqapi.WakeAck }
		if err := json.Unmarshal([]byte(res), &frame); err != nil || frame.Result.MessageID == "" {
			t.Fatalf("tamq's first answer: %v %s", err, res)
		}
		answer = frame.Result
	case <-time.After(time.Minute):
		t.Fatal("the engine sent no wake")
	}
	pid := lockfile.HolderPID(filepath.Join(l.Env.EngineState(), "coordination-engine.lock"))
	syscall.Kill(pid, syscall.SIGKILL)
	wake.Wait()
	testutil.WaitFor(t, "the engine to be gone", func() bool { return syscall.Kill(pid, 0) != nil })

	startEngine()
	testutil.WaitFor(t, "the wake to be recorded", func() bool {
		r := l.Env.Engine(t, "leases", "--json")
		var res api.LeasesResult
		json.Unmarshal([]byte(r.Stdout), &res)
		return len(res.Leases) == 1 && res.Leases[0].LocalLeaseID != ""
	})
	r := l.Env.Engine(t, "leases", "--json")
	var res api.LeasesResult
	json.Unmarshal([]byte(r.Stdout), &res)
	if got := res.Leases[0].LocalLeaseID; got != answer.MessageID {
		t.Errorf("the engine recorded message %s; tamq had queued %s", got, answer.MessageID)
	}
	hist := l.Env.Tamq(t, "history", "--json")
	if n := strings.Count(hist.Stdout, `"sender_kind": "coordination"`); n != 1 {
		t.Errorf("%d wake messages in tamq, want 1:\n%s", n, hist.Stdout)
	}
}

// Listings longer than one protocol frame come page by page: the receipts
// of 400 wakes (more than 64 KiB of JSON) list whole, in order, through the
// client and the command.
func TestListingsLongerThanAFrame(t *testing.T) {
	t.Parallel()
	l := newLoop(t, "", "net-kingdom")
	c := client.New(l.PathsOf(t, paths.Engine))
	ctx := context.Background()
	for range 400 {
		// No window hosts the repo: each wake is a trigger stopped at a gate.
		if _, err := c.Wake(ctx, api.WakeArgs{Repo: "net-kingdom"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Receipts(ctx, api.ReceiptsArgs{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Receipts); n < 800 {
		t.Fatalf("%d receipts listed, want the 800 of the wakes and more", n)
	}
	for i := 1; i < len(res.Receipts); i++ {
		if res.Receipts[i].ID != res.Receipts[i-1].ID+1 {
			t.Fatalf("receipt %d follows %d: a page was lost or doubled", res.Receipts[i].ID, res.Receipts[i-1].ID)
		}
	}
	var out api.ReceiptsResult
	if err := json.Unmarshal([]byte(l.Env.Engine(t, "receipts", "--json").Stdout), &out); err != nil || len(out.Receipts) != len(res.Receipts) {
		t.Errorf("coordination-engine receipts --json: %d receipts, %v", len(out.Receipts), err)
	}
}
