package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
)

// Late is the claim store of an engine that may start while etcd is away.
// With credentials, Open logs in to etcd, and an etcd that does not answer
// fails it; Late then goes on trying in the background, and until it is
// connected every call answers unavailable, as an etcd gone away later
// does: work waits (cluster_unreachable), and nothing else stops. A refused
// login is not retried: at the start it fails OpenLate, as it fails Open;
// later (the password changed meanwhile) every call answers it.
type Late struct {
	mu     sync.Mutex
	claims *Claims // nil until connected
	last   error   // why it is not connected yet
	cancel context.CancelFunc
	done   chan struct{}
}

// lateRetry paces the tries to connect.
var lateRetry = backoff.Policy{Min: time.Second, Max: 30 * time.Second}

// OpenLate opens the claim store now if etcd answers, and otherwise keeps
// trying until it does or Close is called.
func OpenLate(ctx context.Context, cfg Config) (*Late, error) {
	c, err := Open(ctx, cfg)
	l := &Late{claims: c, last: err, done: make(chan struct{})}
	switch {
	case err == nil:
		close(l.done)
		return l, nil
	case !errs.Is(err, errs.Unavailable):
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go l.connect(rctx, cfg)
	return l, nil
}

func (l *Late) connect(ctx context.Context, cfg Config) {
	defer close(l.done)
	wait := time.Duration(0)
	for {
		wait = lateRetry.Next(wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Jitter(wait)):
		}
		c, err := Open(ctx, cfg)
		l.mu.Lock()
		l.claims, l.last = c, err
		l.mu.Unlock()
		if !errs.Is(err, errs.Unavailable) {
			return // connected, or refused: trying again changes nothing
		}
	}
}

// store is the connected store, or why there is none yet (unavailable).
func (l *Late) store() (*Claims, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.claims != nil:
		return l.claims, nil
	case !errs.Is(l.last, errs.Unavailable):
		return nil, l.last
	}
	return nil, errs.Wrap(errs.Unavailable, l.last, "cluster: not connected to etcd yet")
}

// Claim is Claims.Claim once connected.
func (l *Late) Claim(ctx context.Context, taskID string, h Holder, ttl time.Duration) (Holder, bool, error) {
	c, err := l.store()
	if err != nil {
		return Holder{}, false, err
	}
	return c.Claim(ctx, taskID, h, ttl)
}

// Renew is Claims.Renew once connected.
func (l *Late) Renew(ctx context.Context, taskID, leaseID string) error {
	c, err := l.store()
	if err != nil {
		return err
	}
	return c.Renew(ctx, taskID, leaseID)
}

// Held is Claims.Held once connected.
func (l *Late) Held(ctx context.Context) (map[string]Holder, error) {
	c, err := l.store()
	if err != nil {
		return nil, err
	}
	return c.Held(ctx)
}

// Release is Claims.Release once connected.
func (l *Late) Release(ctx context.Context, taskID, leaseID string) error {
	c, err := l.store()
	if err != nil {
		return err
	}
	return c.Release(ctx, taskID, leaseID)
}

// Settle is Claims.Settle once connected.
func (l *Late) Settle(ctx context.Context, taskID, leaseID, outcome string, keep time.Duration) error {
	c, err := l.store()
	if err != nil {
		return err
	}
	return c.Settle(ctx, taskID, leaseID, outcome, keep)
}

// PutCheckpoint is Claims.PutCheckpoint once connected.
func (l *Late) PutCheckpoint(ctx context.Context, taskID, leaseID string, data []byte, ttl time.Duration) error {
	c, err := l.store()
	if err != nil {
		return err
	}
	return c.PutCheckpoint(ctx, taskID, leaseID, data, ttl)
}

// Checkpoint is Claims.Checkpoint once connected.
func (l *Late) Checkpoint(ctx context.Context, taskID, leaseID, repo string) (Resume, bool, error) {
	c, err := l.store()
	if err != nil {
		return Resume{}, false, err
	}
	return c.Checkpoint(ctx, taskID, leaseID, repo)
}

// Close stops trying to connect and closes the connection, if any.
func (l *Late) Close() error {
	if l.cancel != nil {
		l.cancel()
	}
	<-l.done
	if c, err := l.store(); err == nil {
		return c.Close()
	}
	return nil
}
