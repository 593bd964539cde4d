package daemon

import (
	"context"
	"sync"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Worker is one background service of a daemon (tamq's committer,
// dispatcher, ack expirer, lease rescuer and watcher; the engine's poller and
// outbox): Run does its work until its context ends. Its clock and logger
// come from the program that builds it.
type Worker struct {
	Name string
	Run  func(ctx context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the worker in its own goroutine under ctx. A worker starts once.
func (w *Worker) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return
	}
	ctx, w.cancel = context.WithCancel(ctx)
	if w.done == nil {
		w.done = make(chan struct{})
	}
	go func() {
		defer close(w.done)
		w.Run(ctx)
	}()
}

// Done is closed once the worker has stopped: who hands it work selects on
// it, so as never to wait on a worker that is gone.
func (w *Worker) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		w.done = make(chan struct{})
	}
	return w.done
}

// Stop tells the worker to stop and waits until it has, or until wait ends
// (then it reports a timeout; the worker still stops when it can). Stopping
// a worker that never started does nothing.
func (w *Worker) Stop(wait context.Context) error {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-wait.Done():
		return errs.New(errs.Timeout, "%s still running when the grace period ended", w.Name)
	}
}
