package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// OpChanges waits until the service's state changed since a version a
// client saw, or until its wait ends, and answers the current version: a
// view (`tamq top`) refreshes when something changed rather than on a fixed
// poll.
const OpChanges = "changes"

// MaxChangesWait bounds how long one changes call may wait.
const MaxChangesWait = time.Minute

// ChangesArgs names the version the client saw (0: none yet) and how long
// to wait for a newer one, in milliseconds (0: answer at once).
type ChangesArgs struct {
	Since  uint64 `json:"since"`
	WaitMS int    `json:"wait_ms,omitempty"`
}

// ChangesResult is the service's current version of its state.
type ChangesResult struct {
	Version uint64 `json:"version"`
}

// Changes counts a service's changes (a receipt written, an observation of
// State Hub, an agent's dialog) and lets readers wait for the next. Its
// version starts at 1, so a client that saw none waits for nothing.
type Changes struct {
	mu      sync.Mutex
	version uint64
	changed chan struct{} // closed at the next change
	// stopping ends every wait: a service that stops answers its long
	// polls at once instead of holding its shutdown up to their end.
	stopping <-chan struct{}
}

// NewChanges returns a counter at version 1.
func NewChanges() *Changes { return newChanges(nil) }

func newChanges(stopping <-chan struct{}) *Changes {
	return &Changes{version: 1, changed: make(chan struct{}), stopping: stopping}
}

// Bump records a change and wakes the waiting readers. It never blocks, so
// writers call it on their own path; a nil counter (a part built alone in a
// test) counts nothing.
func (c *Changes) Bump() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.version++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Wait returns the version once it is newer than since, or when ctx ends
// or wait has passed, whichever comes first.
func (c *Changes) Wait(ctx context.Context, since uint64, wait time.Duration) uint64 {
	c.mu.Lock()
	v, changed := c.version, c.changed
	c.mu.Unlock()
	if v > since || wait <= 0 {
		return v
	}
	// The wall clock on purpose: this bounds a client's long poll, which no
	// test drives by a fake clock.
	t := time.NewTimer(min(wait, MaxChangesWait))
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
	case <-c.stopping:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// handler answers OpChanges from c.
func (c *Changes) handler(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args ChangesArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return ChangesResult{Version: c.Wait(ctx, args.Since, time.Duration(args.WaitMS)*time.Millisecond)}, nil
}
