package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

// ackExpirer moves the messages whose ack deadline passed (redelivered or
// failed), then sleeps until the next deadline, or until a delivery ends
// (wake: it may have set one); a failed database step is tried again a
// second later.
type ackExpirer struct {
	log        *slog.Logger
	clock      clock.Clock
	config     *config.Loaded
	deliveries *store.Deliveries
	dispatcher *dispatcher
	wakeCh     chan struct{}
}

// wake makes the ack expirer look at the deadlines again.
func (a *ackExpirer) wake() { nudge(a.wakeCh) }

func (a *ackExpirer) run(ctx context.Context) {
	for {
		next := a.clock.Now().Add(time.Second)
		if a.expire(ctx) == nil {
			d, err := a.deliveries.NextAckDeadline(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				a.log.Error("reading ack deadlines failed; will try again", "error", err.Error())
			case err == nil && d.IsZero():
				next = time.Time{}
			case err == nil:
				next = d
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.wakeCh:
		case <-waitUntil(a.clock, next):
		}
	}
}

// expire redelivers (or fails) the messages whose ack deadline passed.
// It fails if any could not be moved, so the expirer tries again soon.
func (a *ackExpirer) expire(ctx context.Context) error {
	ids, err := a.deliveries.DueAcks(ctx)
	if err != nil {
		a.log.Error("cannot read ack deadlines; will try again", "error", err.Error())
		return err
	}
	t := timing(a.config)
	var errAll error
	if len(ids) > 0 {
		defer a.dispatcher.wake() // redelivered messages are queued again
	}
	for _, id := range ids {
		if _, err := a.deliveries.Transition(ctx, id, "ack deadline passed", func(m *queue.Message) error {
			return m.AckDeadlinePassed(a.clock.Now(), t)
		}); err != nil && !errs.Is(err, errs.Conflict) {
			// Conflict: acked meanwhile (a late ack wins). Anything else is
			// the database failing; the deadline stays due and is tried again.
			a.log.Error("cannot expire an ack deadline; will try again", "message", id, "error", err.Error())
			errAll = errors.Join(errAll, err)
		}
	}
	return errAll
}

// leaseRescuer returns to the queue, at start, the deliveries an earlier
// instance claimed and never finished (a crash or kill mid-delivery): the
// same id is delivered again. It tries again each second until every one is
// back, then wakes the dispatcher and ends.
type leaseRescuer struct {
	log        *slog.Logger
	clock      clock.Clock
	deliveries *store.Deliveries
	dispatcher *dispatcher
	// instance names this run's claims, which are not rescued.
	instance string
}

func (r *leaseRescuer) run(ctx context.Context) {
	for r.recoverClaims(ctx) != nil {
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(time.Second):
		}
	}
	r.dispatcher.wake()
}

// recoverClaims returns every claim of an earlier instance to the queue. It
// fails if any claim could not be returned, so the rescuer tries again.
func (r *leaseRescuer) recoverClaims(ctx context.Context) error {
	ids, err := r.deliveries.ExpiredLeases(ctx, r.instance)
	if err != nil {
		r.log.Error("cannot read interrupted deliveries; will try again", "error", err.Error())
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	// All in one transaction: the messages of an interrupted batch come
	// back together and go in together again, never split by a claim
	// between them.
	now := r.clock.Now()
	failed, err := r.deliveries.TransitionEach(ctx, ids, "delivery interrupted; redelivering", nil, func(m *queue.Message) error {
		return m.LeaseExpired(now)
	})
	if err != nil {
		r.log.Error("cannot return interrupted deliveries to the queue; will try again", "messages", len(ids), "error", err.Error())
		return err
	}
	for i, ferr := range failed {
		if ferr != nil && !errs.Is(ferr, errs.Conflict) {
			r.log.Warn("cannot return an interrupted delivery to the queue", "message", ids[i], "error", ferr.Error())
		}
	}
	return nil
}
