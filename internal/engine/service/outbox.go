package service

import (
	"context"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/outbox"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// outboxIdle is how often the outbox looks for receipts when nothing kicks
// it: receipts are written by many paths, and one indexed query a second
// costs less than a hook in each.
const outboxIdle = time.Second

// newOutbox is the engine's outbox: its receipts, and tamq's it relays, go
// to State Hub's POST /v1/progress in batches, oldest first (internal/outbox
// says how nothing is lost or doubled).
func (s *Service) newOutbox() *outbox.Publisher {
	var instance struct {
		sync.Mutex
		id string
	}
	// The database's instance id names its receipts; it is made once, and a
	// failure to read it is one more failed attempt, tried again later.
	instanceID := func(ctx context.Context) (string, error) {
		instance.Lock()
		defer instance.Unlock()
		if instance.id == "" {
			id, err := s.store.Instance(ctx)
			if err != nil {
				return "", err
			}
			instance.id = id
		}
		return instance.id, nil
	}
	return &outbox.Publisher{
		Pending: func(ctx context.Context, limit int) ([]contract.Receipt, []int64, error) {
			id, err := instanceID(ctx)
			if err != nil {
				return nil, nil, err
			}
			return s.store.ReceiptsToPublish(ctx, id, limit)
		},
		Mark: func(ctx context.Context, rows []int64) error {
			if err := s.store.MarkPublished(ctx, rows); err != nil {
				return errs.Wrap(errs.Storage, err, "mark receipts published")
			}
			return nil
		},
		Post: func(ctx context.Context, batch []contract.Receipt) (int, string, error) {
			_, err := s.hub.client.PostProgress(ctx, batch)
			return len(batch), "direct", err
		},
		Timing: outbox.Timing{Every: outboxIdle, Backoff: backoff.Policy{Min: time.Second, Max: time.Minute}},
		Clock:  engineClock{s.opts.Now, s.opts.After},
		Log:    s.log,
	}
}

// engineClock is the engine's injected time as a clock.Clock.
type engineClock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

func (c engineClock) Now() time.Time                         { return c.now() }
func (c engineClock) After(d time.Duration) <-chan time.Time { return c.after(d) }
