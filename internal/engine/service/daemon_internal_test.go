package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/fakehub"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// engineWorld is the engine's services as Start builds them, in this
// process and not running: State Hub is its fake driver, tamq a fake that
// takes every wake, the clock a fake the test moves on. A test calls one
// look at a time, or runs a service and moves the clock.
type engineWorld struct {
	s    *Service
	hub  *fakehub.Hub
	tamq *fakeTamq
	clk  *clock.Fake
	// reg is gita's registry as the engine reads it, and dir the repo's
	// directory there and its window's.
	reg *gita.Registry
	dir string
}

// worldRepo is the one repo of the world: registered with gita, its window
// attached in trigger mode, so that work on it may be offered.
const worldRepo = "alpha"

// worldEndpoint is the tamq endpoint that hosts the repo's window.
const worldEndpoint = "tmux-amq-1"

func setup(t *testing.T) *engineWorld {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the engine's options set further (set nil: as
// setup's).
func setupWith(t *testing.T, set func(*Options)) *engineWorld {
	t.Helper()
	clk := clock.NewFake(storyStart)
	hub := fakehub.New(worldRepo)
	hub.Now = clk.Now
	dir := t.TempDir()
	reg := &gita.Registry{Repos: []gita.Repo{{Name: worldRepo, Path: dir}}}
	tq := &fakeTamq{}
	o := Options{Registry: func() (*gita.Registry, error) { return reg, nil }, Hub: hub, Clock: clk, Tamq: tq}
	if set != nil {
		set(&o)
	}
	s := inProcessEngineOpts(t, nil, o)
	w := &engineWorld{s: s, hub: hub, tamq: tq, clk: clk, reg: reg, dir: dir}
	w.attach(t, worldEndpoint, lease.Window{Repo: worldRepo, Path: dir, Mode: lease.ModeTrigger})
	return w
}

// attach attaches tamq endpoint id with the windows given (replacing its
// windows when it is attached already).
func (w *engineWorld) attach(t *testing.T, id string, windows ...lease.Window) {
	t.Helper()
	if _, err := w.s.store.Endpoints.Attach(context.Background(), lease.Endpoint{TamqEndpointID: id, TmuxSocket: "/tmp/tmux-1/" + id,
		Windows: windows}, nil); err != nil {
		t.Fatal(err)
	}
}

// look is one look of the observer, and what it saw judged.
func (w *engineWorld) look(t *testing.T) {
	t.Helper()
	if err := w.s.observer.observeOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// leasesOf are the leases of a task, of every trigger of it.
func (w *engineWorld) leasesOf(t *testing.T, task string) []lease.Lease {
	t.Helper()
	ctx := context.Background()
	trs, err := w.s.store.Triggers.TriggersOfTask(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	var out []lease.Lease
	for _, tr := range trs {
		ls, err := w.s.store.LeaseLists.LeasesOfTrigger(ctx, tr.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ls...)
	}
	return out
}

// verdict is what explain says of a task now.
func (w *engineWorld) verdict(t *testing.T, task string) string {
	t.Helper()
	res, err := Explain(context.Background(), w.s.store, task, w.s.observer.explainView())
	if err != nil {
		t.Fatal(err)
	}
	return res.Verdict
}

// fakeTamq is tamq's service as the engine sees it: every wake queued for
// the window's agent, no wake ever held, nothing else asked of it.
type fakeTamq struct {
	mu    sync.Mutex
	wakes []tamqapi.WakeRequest
	// held is its answer to wake_held, for every wake (none held unless a
	// test says otherwise).
	held tamqapi.WakeHeldResult
}

// holdEveryWake makes every wake tamq is asked about held, as res says.
func (f *fakeTamq) holdEveryWake(res tamqapi.WakeHeldResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = res
}

var _ Tamq = (*fakeTamq)(nil)

func (f *fakeTamq) Wake(_ context.Context, req tamqapi.WakeRequest) (tamqapi.WakeAck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakes = append(f.wakes, req)
	return tamqapi.WakeAck{LeaseID: req.LeaseID, Attempt: req.Attempt, Capability: tamqapi.WakeResumed,
		MessageID: fmt.Sprint("M-", len(f.wakes)), Acks: tamqapi.AcksBroker}, nil
}

// woken are the leases woken, in order.
func (f *fakeTamq) woken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.wakes {
		out = append(out, fmt.Sprint(r.LeaseID, "#", r.Attempt))
	}
	return out
}

func (f *fakeTamq) CancelWake(context.Context, tamqapi.CancelWakeArgs) (tamqapi.CancelWakeResult, error) {
	return tamqapi.CancelWakeResult{}, nil
}

func (f *fakeTamq) WakeHeld(context.Context, tamqapi.WakeHeldArgs) (tamqapi.WakeHeldResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held, nil
}

func (f *fakeTamq) Ack(context.Context, string) (tamqapi.Message, error) {
	return tamqapi.Message{}, nil
}

func (f *fakeTamq) Ping(context.Context) (daemon.PingResult, error) { return daemon.PingResult{}, nil }

func (f *fakeTamq) Whois(context.Context, int32) (tamqapi.WhoisResult, error) {
	return tamqapi.WhoisResult{}, nil
}

func (f *fakeTamq) Listener(context.Context) (unixrpc.Peer, error) { return unixrpc.Peer{}, nil }

// The judge takes each task of a look as far as it may go: a gate stops
// it, a dependency not done holds it, and an actionable task is offered
// and woken once, however often it is seen again.
func TestTheJudgeTakesEachTaskAsFarAsItMayGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		// add makes the tasks and returns the one asked about.
		add     func(t *testing.T, h *fakehub.Hub) string
		verdict string // what explain's verdict starts with
		leases  int
	}{
		{"a gate stops it", func(t *testing.T, h *fakehub.Hub) string {
			return h.AddTask(t, worldRepo, hubtest.Task{Title: "q", Status: "todo", NeedsHuman: true})
		}, "not woken: stopped at gate human", 0},
		{"a dependency not done holds it", func(t *testing.T, h *fakehub.Hub) string {
			q := h.AddTask(t, worldRepo, hubtest.Task{Title: "q", Status: "todo", NeedsHuman: true})
			return h.AddTask(t, worldRepo, hubtest.Task{Title: "r", Status: "todo", DependsOn: []string{q}})
		}, "not woken: dependency ", 0},
		{"a dependency done lets it go", func(t *testing.T, h *fakehub.Hub) string {
			q := h.AddTask(t, worldRepo, hubtest.Task{Title: "q", Status: "done"})
			return h.AddTask(t, worldRepo, hubtest.Task{Title: "r", Status: "todo", DependsOn: []string{q}})
		}, "woken", 1},
		{"an actionable task is offered", func(t *testing.T, h *fakehub.Hub) string {
			return h.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
		}, "woken", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			id := tc.add(t, w.hub)
			w.look(t)
			// Seen again, with State Hub changed meanwhile: every task
			// is judged again, and nothing goes twice.
			w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "later", Status: "todo", Destructive: true})
			w.look(t)
			if v := w.verdict(t, id); !strings.HasPrefix(v, tc.verdict) {
				t.Errorf("verdict %q, want it to start %q", v, tc.verdict)
			}
			ls := w.leasesOf(t, id)
			if len(ls) != tc.leases {
				t.Fatalf("%d leases, want %d: %+v", len(ls), tc.leases, ls)
			}
			var want []string
			for _, l := range ls {
				if l.State != lease.Offered || l.Attempt != 1 {
					t.Errorf("lease %s is %s, attempt %d; want offered, attempt 1", l.ID, l.State, l.Attempt)
				}
				want = append(want, l.ID+"#1")
			}
			if got := w.tamq.woken(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("woken %v, want %v", got, want)
			}
		})
	}
}

// The lease clock lets an offered attempt run out at its ack deadline, not
// before: the lease waits for its next attempt (retry_wait), which is
// offered at its time, not before. The clock runs as in the daemon; the
// test moves the fake clock once the clock waits on it, and reads the lease
// once it waits again.
func TestTheLeaseClockRunsAttemptsOutAndOffersTheNext(t *testing.T) {
	w := setup(t)
	task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
	w.look(t)
	ls := w.leasesOf(t, task)
	if len(ls) != 1 {
		t.Fatalf("%d leases after the look, want 1", len(ls))
	}
	id, timing := ls[0].ID, w.s.judge.timing
	ackDeadline := storyStart.Add(timing.AckTimeout)
	nextAt := ackDeadline.Add(timing.Backoff[0])

	// The offer woke the lease clock; it reads the deadlines when it
	// starts anyway, and each of its turns below is then one the test
	// knows of.
	select {
	case <-w.s.leaseClock.wake.C():
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.s.leaseClock.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, w.clk, 1, done)

	for _, step := range []struct {
		name    string
		to      time.Time // the clock moved on to
		state   lease.State
		attempt int
		// waits are those the clock holds once it has acted and waits
		// again (0: the move is due nothing, the clock does not turn).
		// An attempt that runs out wakes the clock once more, to read
		// the deadlines it changed: it then holds that turn's wait and
		// the one before.
		waits int
	}{
		{"before its ack deadline, offered", ackDeadline.Add(-time.Millisecond), lease.Offered, 1, 0},
		{"at its ack deadline, run out", ackDeadline, lease.RetryWait, 2, 2},
		{"before the next attempt's time, waiting", nextAt.Add(-time.Millisecond), lease.RetryWait, 2, 0},
		{"at its time, the next attempt offered", nextAt, lease.Offered, 2, 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			w.clk.Advance(step.to.Sub(w.clk.Now()))
			waitFor(t, w.clk, step.waits, done)
			l, err := w.s.store.LeaseLists.Lease(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if l.State != step.state || l.Attempt != step.attempt {
				t.Fatalf("lease %s, attempt %d; want %s, attempt %d", l.State, l.Attempt, step.state, step.attempt)
			}
			switch l.State {
			case lease.RetryWait:
				if !l.NextRetryAt.Equal(nextAt) {
					t.Errorf("next attempt at %v, want %v", l.NextRetryAt, nextAt)
				}
			case lease.Offered:
				if step.attempt > 1 && !l.ExpiresAt.Equal(step.to.Add(timing.AckTimeout)) {
					t.Errorf("the next attempt's ack deadline %v, want %v", l.ExpiresAt, step.to.Add(timing.AckTimeout))
				}
			}
		})
	}
	// The next attempt's wake is the waker's to send (not running here):
	// tamq saw the first attempt's only.
	if got := w.tamq.woken(); fmt.Sprint(got) != fmt.Sprint([]string{id + "#1"}) {
		t.Errorf("woken %v", got)
	}
}

// waitFor waits until n waits are pending on the fake clock: the service
// under test has acted and waits on the clock again.
func waitFor(t *testing.T, clk *clock.Fake, n int, done <-chan struct{}) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		have, changed := clk.Waiting()
		if have >= n {
			return
		}
		select {
		case <-changed:
		case <-done:
			t.Fatal("the service stopped")
		case <-timeout:
			t.Fatalf("%d waits on the clock, want %d", have, n)
		}
	}
}

// A look through State Hub's fake driver becomes triggers: an actionable
// task's, at its revision, and a message asking for action; a task done or
// a message asking for nothing makes none.
func TestALookBecomesTriggers(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(t *testing.T, h *fakehub.Hub)
		want []string // source, reason
	}{
		{"a task to do", func(t *testing.T, h *fakehub.Hub) {
			h.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
		}, []string{"task task-1@r1 task_actionable"}},
		{"a task done", func(t *testing.T, h *fakehub.Hub) {
			h.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "done"})
		}, nil},
		{"a message asking for action", func(t *testing.T, h *fakehub.Hub) {
			h.AddMessage(t, contract.MessageWithBody{Message: contract.Message{ToRepo: worldRepo, From: "beta", Subject: "please",
				RequestsAction: true}, Body: "look at it"})
		}, []string{"message m-1@r1 inbox_message"}},
		{"a message for reading only", func(t *testing.T, h *fakehub.Hub) {
			h.AddMessage(t, contract.MessageWithBody{Message: contract.Message{ToRepo: worldRepo, From: "beta", Subject: "fyi"},
				Body: "nothing to do"})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			tc.add(t, w.hub)
			w.look(t)
			if got := w.triggers(t); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("triggers %v, want %v", got, tc.want)
			}
		})
	}
}

// triggers are the store's triggers as "source id@revision reason".
func (w *engineWorld) triggers(t *testing.T) []string {
	t.Helper()
	rows, err := w.s.store.DB.Query(context.Background(), `SELECT source, source_id, source_revision, reason FROM triggers ORDER BY source, source_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var source, id, rev, reason string
		if err := rows.Scan(&source, &id, &rev, &reason); err != nil {
			t.Fatal(err)
		}
		out = append(out, source+" "+id+"@"+rev+" "+reason)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A wake that tamq holds unwritten waits without spending its attempt: at
// a dialog for as long as the dialog is open, but on its way into a free
// window (a cause tamq cannot name, that no person is told of) only for
// onItsWayLimit ack timeouts from its offer; then it runs out as any
// attempt, so that the budget ends it and a person hears of it.
func TestAWakeSaidToBeOnItsWayWaitsOnlySoLong(t *testing.T) {
	for _, tc := range []struct {
		name string
		held tamqapi.WakeHeldResult
		// heldFor is how many ack deadlines the attempt is held past.
		heldFor int
	}{
		{"on its way into a free window", tamqapi.WakeHeldResult{Held: true}, onItsWayLimit - 1},
		{"at a dialog", tamqapi.WakeHeldResult{Held: true, Wait: string(lease.WaitDialog), Reason: "a dialog is open"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			task := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "a", Status: "todo"})
			w.look(t)
			ls := w.leasesOf(t, task)
			if len(ls) != 1 || ls[0].WakeOutcome == "" {
				t.Fatalf("after the look: %+v; want one lease whose wake tamq took", ls)
			}
			id, ack := ls[0].ID, w.s.judge.timing.AckTimeout
			w.tamq.holdEveryWake(tc.held)
			ctx := context.Background()
			held := 0
			for i := 1; i <= 10; i++ {
				deadline := storyStart.Add(time.Duration(i) * ack)
				w.s.leaseClock.holdWakes(ctx, deadline)
				l, err := w.s.store.LeaseLists.Lease(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if l.State != lease.Offered || l.Attempt != 1 {
					t.Fatalf("at ack deadline %d: %s, attempt %d; want offered, attempt 1", i, l.State, l.Attempt)
				}
				if !l.ExpiresAt.After(deadline) {
					break // not held: it runs out at this deadline
				}
				held++
			}
			if held != tc.heldFor {
				t.Errorf("held past %d ack deadlines, want %d", held, tc.heldFor)
			}
		})
	}
}

// Explain names a gate only for a task still open: one done or cancelled
// has no gate in its way, whatever its labels still say.
func TestExplainNamesNoGateOfATaskThatEnded(t *testing.T) {
	t.Parallel()
	w := setup(t)
	done := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "d", Status: "done", NeedsHuman: true})
	open := w.hub.AddTask(t, worldRepo, hubtest.Task{Title: "o", Status: "todo", NeedsHuman: true})
	w.look(t)
	for task, want := range map[string]string{done: "", open: "human"} {
		res, err := Explain(context.Background(), w.s.store, task, w.s.observer.explainView())
		if err != nil {
			t.Fatal(err)
		}
		if res.Gate != want {
			t.Errorf("task %s (%s): gate %q, want %q", task, res.Status, res.Gate, want)
		}
	}
}
