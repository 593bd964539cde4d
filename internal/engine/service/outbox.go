package service

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// outboxIdle is how often the outbox looks for receipts when nothing kicks
// it: receipts are written by many paths, and one indexed query a second
// costs less than a hook in each.
const outboxIdle = time.Second

// runOutbox publishes the engine's receipts to State Hub's POST
// /v1/progress in batches, oldest first. A receipt is marked published only
// after State Hub accepted its batch; a batch cut off by a crash is sent
// again, and State Hub keeps each receipt id once, so nothing is lost or
// doubled. While State Hub is down or refuses the credentials, receipts
// wait, with a backoff.
func (s *outbox) runOutbox(ctx context.Context) {
	instance, err := s.store.Observer.Instance(ctx)
	for err != nil {
		s.log.Error("cannot read the database's instance id; receipts wait", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(5 * time.Second):
		}
		instance, err = s.store.Observer.Instance(ctx)
	}
	delay := time.Duration(0) // the backoff, zero while State Hub takes receipts
	for {
		wait := outboxIdle
		more, err := s.publishBatch(ctx, instance)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if delay == 0 {
				s.log.Warn("receipts not published; they wait", "error", err.Error())
			}
			delay = backoff.Policy{Min: time.Second, Max: time.Minute}.Next(delay)
			wait = backoff.Jitter(delay)
			s.status.update(func(v *publishStatus) { v.PublishError = err.Error() })
		default:
			if delay > 0 {
				s.log.Info("receipts published again")
			}
			delay = 0
			if more {
				wait = 0
			}
		}
		if wait == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-s.clock.After(wait):
		}
	}
}

// publishBatch publishes one batch; more says a full batch went and more
// may wait.
func (s *outbox) publishBatch(ctx context.Context, instance string) (bool, error) {
	batch, ids, err := s.store.Receipts.ReceiptsToPublish(ctx, instance, contract.MaxProgressBatch)
	if err != nil || len(batch) == 0 {
		return false, err
	}
	if _, err := s.client.PostProgress(ctx, batch); err != nil {
		return false, err
	}
	if err := s.store.Receipts.MarkPublished(ctx, ids); err != nil {
		return false, errs.Wrap(errs.Storage, err, "mark receipts published")
	}
	now := s.clock.Now()
	s.status.update(func(v *publishStatus) { v.LastPublish, v.PublishError = now, "" })
	return len(batch) == contract.MaxProgressBatch, nil
}
