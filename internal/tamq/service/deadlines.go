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
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// ackExpirer moves the messages whose ack deadline passed (redelivered or
// failed), then sleeps until the next deadline, or until a delivery ends
// (wakes: it may have set one); a failed database step is tried again a
// second later.
type ackExpirer struct {
	log        *slog.Logger
	clock      clock.Clock
	config     *config.Loaded
	deliveries *store.Deliveries
	// dispatch wakes the dispatcher: redelivered messages are queued again.
	dispatch wakeup.Signal
	wakes    wakeup.Signal
}

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
		case <-a.wakes.C():
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
		defer a.dispatch.Wake() // redelivered messages are queued again
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
