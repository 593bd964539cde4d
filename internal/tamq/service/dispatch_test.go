package service

import (
	"context"
	"database/sql"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// The window every test of a single service here delivers into: repo r on
// endpoint e.
const testEndpoint, testRepo = "e", "r"

// oneWindow records endpoint e, connected, with its window r.
func oneWindow(t *testing.T, svc *Service) {
	t.Helper()
	if err := svc.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES (?, '/nonexistent', 1, 's', 'connected', 1, 1)`, testEndpoint); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO windows (endpoint_id, repo, repo_path, pane_id, mode, created_at, updated_at)
			VALUES (?, ?, '/r', '%1', 'trigger', 1, 1)`, testEndpoint, testRepo)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// queueFor queues a message for window r of endpoint e, due at due (zero:
// now), and returns its id.
func queueFor(t *testing.T, svc *Service, mode ackmode.Mode, due time.Time) string {
	t.Helper()
	m := &queue.Message{EndpointID: testEndpoint, Sender: "operator", SenderKind: queue.FromOperator, Target: testRepo, Body: "hello",
		AckMode: mode, MaxRetries: 4, PolicyProfile: "p", ConfigVersion: "c", NextAttemptAt: due}
	if err := svc.store.Queue.Enqueue(context.Background(), []*queue.Message{m}); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// messageState is a message's state and attempts as recorded.
func messageState(t *testing.T, svc *Service, id string) (state string, attempts int) {
	t.Helper()
	if err := svc.db.Reader.QueryRow(`SELECT state, attempts FROM messages WHERE id = ?`, id).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	return state, attempts
}

// connectedIf says endpoint e is connected while its flag is up.
type connectedIf struct{ up *atomic.Bool }

func (c connectedIf) connected(context.Context) (map[string]bool, error) {
	return map[string]bool{testEndpoint: c.up.Load()}, nil
}

// dispatchRig is a dispatcher built alone over a temp store and a fake
// clock: its deliveries are reported on delivered and each ends only when
// the test sends on finish; held, waiting and connected are what the
// rescuer, the live view and the endpoint book would say of window r.
type dispatchRig struct {
	svc       *Service
	clock     *clock.Fake
	d         *dispatcher
	delivered chan []string
	finish    chan struct{}
	held      atomic.Bool
	waiting   atomic.Bool
	connected atomic.Bool
}

func newDispatchRig(t *testing.T) *dispatchRig {
	t.Helper()
	r := &dispatchRig{clock: clock.NewFake(time.Now()), delivered: make(chan []string, 4), finish: make(chan struct{})}
	r.svc, _ = setup(t, Options{Clock: r.clock})
	t.Cleanup(r.svc.d.Close) // never run: only the dispatcher below runs
	oneWindow(t, r.svc)
	r.connected.Store(true)
	key := store.DeliveryKey(testEndpoint, testRepo)
	r.d = &dispatcher{log: r.svc.log, clock: r.clock, config: r.svc.opts.Config, deliveries: r.svc.store.Deliveries,
		endpoints: connectedIf{&r.connected}, instance: "test", deadlines: wakeup.New(), wakes: wakeup.New(),
		waitReason: func(k string) string {
			if k == key && r.waiting.Load() {
				return "the agent shows a dialog"
			}
			return ""
		},
		held: func(k string) bool { return k == key && r.held.Load() },
		deliver: func(_ context.Context, ms []queue.Message) {
			ids := make([]string, len(ms))
			for i, m := range ms {
				ids[i] = m.ID
			}
			r.delivered <- ids
			<-r.finish
		}}
	return r
}

// run starts the dispatcher until the test ends; deliveries still under
// way then are let finish.
func (r *dispatchRig) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.d.run(ctx) }()
	t.Cleanup(func() { cancel(); close(r.finish); <-done })
}

// parkedAgain returns once the dispatcher waits on the clock for the
// (have+1)th time: it has looked at the queue since the test counted have.
func (r *dispatchRig) parkedAgain(t *testing.T, have int) {
	t.Helper()
	if !r.clock.BlockUntil(have+1, nil) {
		t.Fatal("the dispatcher did not wait again")
	}
}

// A due message is claimed and handed to the deliverer once its window is
// free; a window that cannot take it yet gets nothing until whatever stood
// in the way clears (and says so: the clock reaches the message, or a wake).
func TestDispatcherClaimsOnceTheWindowIsFree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// dueIn is how long after now the message is due.
		dueIn                       time.Duration
		held, waiting, notConnected bool
	}{
		{name: "a due message on a free window is claimed at once"},
		{name: "a message due later is claimed when the clock reaches it", dueIn: time.Minute},
		{name: "a window held for an earlier run's claim waits until the rescuer frees it", held: true},
		{name: "a window that cannot take text waits until it can", waiting: true},
		{name: "a window whose tmux server is gone waits until it is back", notConnected: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newDispatchRig(t)
			r.held.Store(c.held)
			r.waiting.Store(c.waiting)
			r.connected.Store(!c.notConnected)
			id := queueFor(t, r.svc, ackmode.Injected, r.clock.Now().Add(c.dueIn))
			r.run(t)
			if c.dueIn > 0 || c.held || c.waiting || c.notConnected {
				r.parkedAgain(t, 0)
				if st, _ := messageState(t, r.svc, id); st != "queued" {
					t.Fatalf("claimed before its window was free: %s", st)
				}
				if c.dueIn > 0 {
					r.clock.Advance(c.dueIn)
				} else {
					r.held.Store(false)
					r.waiting.Store(false)
					r.connected.Store(true)
					r.d.wake()
				}
			}
			if got := <-r.delivered; !slices.Equal(got, []string{id}) {
				t.Fatalf("delivered %v, want [%s]", got, id)
			}
			if st, n := messageState(t, r.svc, id); st != "delivering" || n != 1 {
				t.Errorf("after its claim the message is %s after %d attempts", st, n)
			}
		})
	}
}

// One delivery per window: a message queued while its window is being
// written to waits, however often the dispatcher looks, and is claimed once
// that delivery ends (which also wakes the ack expirer).
func TestDispatcherDeliversOneAtATimePerWindow(t *testing.T) {
	t.Parallel()
	r := newDispatchRig(t)
	first := queueFor(t, r.svc, ackmode.Injected, time.Time{})
	r.run(t)
	if got := <-r.delivered; !slices.Equal(got, []string{first}) {
		t.Fatalf("delivered %v, want [%s]", got, first)
	}
	r.parkedAgain(t, 0)
	second := queueFor(t, r.svc, ackmode.Injected, time.Time{})
	r.d.wake() // as a send does for a free window
	r.parkedAgain(t, 1)
	if st, _ := messageState(t, r.svc, second); st != "queued" {
		t.Fatalf("claimed while its window was busy: %s", st)
	}
	r.finish <- struct{}{} // the first delivery ends
	if got := <-r.delivered; !slices.Equal(got, []string{second}) {
		t.Fatalf("delivered %v, want [%s]", got, second)
	}
	select {
	case <-r.d.deadlines.C():
	default:
		t.Error("the end of a delivery did not wake the ack expirer")
	}
}
