package service

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// DeliveryLease is how long a claim for delivery lasts; a claim older than this
// whose holder is gone is delivered again.
const DeliveryLease = 60 * time.Second

// dispatcher claims due messages and hands each claim to the deliverer: one
// delivery per window at a time, so writes into one terminal never
// interleave. Whoever queues or frees a message wakes it (wake, wakeFor).
type dispatcher struct {
	log        *slog.Logger
	clock      clock.Clock
	config     *config.Loaded
	deliveries *store.Deliveries
	endpoints  connectedEndpoints
	// waitReason says why a window cannot take text now ("" when it can).
	waitReason func(key string) string
	// deliver writes one claimed delivery and records what came of it.
	deliver func(ctx context.Context, ms []queue.Message)
	// deadlines is woken when a delivery ends: it may have set an ack
	// deadline.
	deadlines wakeup.Signal
	// held says a window waits until an earlier run's unfinished delivery
	// into it is settled (the lease rescuer).
	held func(key string) bool
	// instance names this run's delivery claims.
	instance string

	// wakes is how whoever queues or frees a message wakes the loop.
	wakes    wakeup.Signal
	stopping atomic.Bool
	busy     sync.Map // delivery keys of windows being written to
}

// connectedEndpoints says which endpoints' tmux servers run.
type connectedEndpoints interface {
	connected(ctx context.Context) (map[string]bool, error)
}

type outcome struct {
	key string
}

// wakeFor wakes the dispatcher for a new message unless its window is busy:
// the end of that delivery makes the dispatcher look at the window again.
func (d *dispatcher) wakeFor(endpointID, target string) {
	if _, busy := d.busy.Load(store.DeliveryKey(endpointID, target)); !busy {
		d.wake()
	}
}

// wake makes the dispatcher look for work now.
func (d *dispatcher) wake() { d.wakes.Wake() }

// stop makes the dispatcher claim nothing more: the service is stopping.
func (d *dispatcher) stop() { d.stopping.Store(true) }

// run is the delivery loop: it claims due messages (a delivery takes the
// messages waiting for the window that may share one paste, queue.Batch) and
// delivers them, sleeping until the next thing is due or it is woken.
func (d *dispatcher) run(ctx context.Context) {
	busy := map[string]bool{}
	var claims spell
	done := make(chan outcome)
	inflight := 0
	defer func() {
		for ; inflight > 0; inflight-- {
			<-done
		}
	}()
	for {
		// Wake at a free window's next message; work that failed (the
		// database refused a read) is tried again after a short pause.
		var next time.Time
		earliest := func(t time.Time) {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		targets, err := d.deliveries.QueuedTargets(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Error("reading the queue failed; will try again", "error", err.Error())
			earliest(d.clock.Now().Add(time.Second))
		}
		connected, err := d.endpoints.connected(ctx)
		if err != nil && ctx.Err() == nil { // a shutdown cancels the read: no error of its own
			d.log.Error("cannot read endpoints", "error", err.Error())
		}
		now := d.clock.Now()
		for _, t := range targets {
			if busy[t.Key()] || d.stopping.Load() {
				continue // a busy window wakes the loop when its delivery ends
			}
			// A window that cannot take text now (its tmux server is gone,
			// its agent exited, it shows a dialog) is not claimed: whatever
			// clears the reason wakes the loop.
			if !connected[t.EndpointID] || d.waitReason(t.Key()) != "" {
				continue
			}
			// A window whose earlier delivery is not settled yet gets
			// nothing before it: the rescuer wakes the loop once it is.
			if d.held(t.Key()) {
				continue
			}
			if t.NextAt.After(now) {
				earliest(t.NextAt)
				continue
			}
			ms, err := d.deliveries.ClaimBatch(ctx, d.instance, DeliveryLease, t, d.config.MaxBatch())
			if err != nil {
				if ctx.Err() == nil {
					claims.failed(d.clock.Now(), d.log, "claim failed; will try again", err)
					// Nothing else may wake the loop (no more sends): the
					// message waits only until the database takes writes again.
					earliest(now.Add(time.Second))
				}
				continue
			}
			claims.ok(d.log, "claiming messages again")
			if len(ms) == 0 {
				continue
			}
			key := t.Key()
			busy[key] = true
			d.busy.Store(key, true)
			inflight++
			go func() {
				// A delivery under way finishes even while the service stops
				// (shutdown waits for it within the grace period): cutting it
				// off mid-write would leave text without its Enter.
				d.deliver(context.WithoutCancel(ctx), ms)
				done <- outcome{key: key}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wakes.C():
		case o := <-done:
			inflight--
			delete(busy, o.key)
			d.busy.Delete(o.key)
			d.deadlines.Wake() // the delivery may have set an ack deadline
		case <-waitUntil(d.clock, next):
		}
	}
}

// waitUntil fires at next on the clock, or in an hour when there is no next
// (something else wakes the loop first).
func waitUntil(clk clock.Clock, next time.Time) <-chan time.Time {
	wait := time.Hour
	if !next.IsZero() {
		wait = max(next.Sub(clk.Now()), time.Millisecond)
	}
	return clk.After(wait)
}
