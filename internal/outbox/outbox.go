// Package outbox publishes a program's receipts to State Hub, for both
// programs: the engine posts its own to State Hub; tamq posts its own
// through the engine while attached, else straight to State Hub (one code
// path, two sinks: the program's Post chooses). A receipt is marked
// published only after State Hub took it, and State Hub keeps each receipt
// id once, so a crash between the two sends it again and doubles nothing.
// While State Hub is down or refuses the credentials, receipts wait in the
// database, tried again with a backoff.
package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// Timing paces a publisher.
type Timing struct {
	// Every is how often it looks for receipts when nothing kicks it.
	Every time.Duration
	// Gather is how long it waits after a kick before it reads, so the
	// receipts written in a row go in one batch; zero reads at once.
	Gather time.Duration
	// Backoff paces the attempts while State Hub fails.
	Backoff backoff.Policy
}

// Publisher is the outbox's worker: Run sends the oldest pending receipts in
// batches until its context ends.
type Publisher struct {
	// Pending reads up to limit receipts not yet published, oldest first,
	// with their rows for Mark.
	Pending func(ctx context.Context, limit int) ([]contract.Receipt, []int64, error)
	// Mark records the rows as published.
	Mark func(ctx context.Context, rows []int64) error
	// Post sends a prefix of batch to State Hub and says how many it took
	// and which way they went (for the log).
	Post   func(ctx context.Context, batch []contract.Receipt) (taken int, via string, err error)
	Timing Timing
	Clock  clock.Clock
	Log    *slog.Logger

	signalsOnce sync.Once
	written     wakeup.Signal // receipts were written
	retry       wakeup.Signal // the way to State Hub changed or came back: try at once
	mu          sync.Mutex
	state       Status
}

// Status is how publishing went, for the programs' status.
type Status struct {
	LastSuccess time.Time
	// LastError is why the last attempt failed; empty once one succeeds.
	// It never holds a credential: the State Hub client keeps tokens out of
	// its errors.
	LastError string
	// Paused: State Hub refused the credentials (or the credential command
	// failed); receipts wait and are tried again, slowly.
	Paused bool
}

// signals makes the wake-ups on first use: a Publisher is a literal.
func (p *Publisher) signals() {
	p.signalsOnce.Do(func() { p.written, p.retry = wakeup.New(), wakeup.New() })
}

// Kick says receipts were written: cheap, never blocks the writer.
func (p *Publisher) Kick() {
	p.signals()
	p.written.Wake()
}

// Retry says the way to State Hub changed (tamq attached or detached) or
// State Hub answers again: worth a try at once, whatever the backoff.
func (p *Publisher) Retry() {
	p.signals()
	p.retry.Wake()
}

// Status is the publisher's last outcome.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	p.signals()
	delay := time.Duration(0) // the backoff, zero while State Hub takes receipts
	for {
		more, err := p.publishBatch(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := p.Timing.Every
		switch {
		case err != nil:
			delay = p.Timing.Backoff.Next(delay)
			wait = backoff.Jitter(delay)
		case more:
			delay, wait = 0, 0
		default:
			delay = 0
		}
		if wait == 0 {
			continue
		}
		// While State Hub fails, new receipts do not make it ask sooner.
		kick := p.written.C()
		if delay > 0 {
			kick = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(wait):
		case <-kick:
			if p.Timing.Gather > 0 {
				select {
				case <-ctx.Done():
					return
				case <-p.Clock.After(p.Timing.Gather):
				}
			}
		case <-p.retry.C():
			delay = 0
		}
	}
}

// publishBatch sends the oldest pending receipts and marks them; more says
// others are waiting.
func (p *Publisher) publishBatch(ctx context.Context) (more bool, err error) {
	batch, rows, err := p.Pending(ctx, contract.MaxProgressBatch)
	if err != nil {
		p.Log.Error("cannot read the receipts to publish", "error", err.Error())
		return false, err
	}
	if len(batch) == 0 {
		return false, nil
	}
	taken, via, err := p.Post(ctx, batch)
	if ctx.Err() != nil {
		// Stopping: whatever State Hub took is sent again at the next start.
		return false, ctx.Err()
	}
	p.outcome(via, taken, err)
	if err != nil {
		return false, err
	}
	if err := p.Mark(ctx, rows[:taken]); err != nil {
		// State Hub has them; they go again and are stored once.
		p.Log.Error("cannot mark receipts published", "error", err.Error())
		return false, err
	}
	return len(batch) == contract.MaxProgressBatch || taken < len(batch), nil
}

// outcome records an attempt for status, and logs only the changes: a
// program used without State Hub must not fill its log with one failure.
func (p *Publisher) outcome(via string, n int, err error) {
	p.mu.Lock()
	wasFailing := p.state.LastError != ""
	if err == nil {
		p.state = Status{LastSuccess: p.Clock.Now()}
	} else {
		p.state.LastError, p.state.Paused = err.Error(), errs.Is(err, errs.PermissionDeny)
	}
	p.mu.Unlock()
	switch {
	case err == nil && wasFailing:
		p.Log.Info("publishing receipts to State Hub again", "via", via, "receipts", n)
	case err == nil:
		p.Log.Debug("receipts published", "via", via, "receipts", n)
	case !wasFailing:
		p.Log.Warn("cannot publish receipts to State Hub; they stay pending and are sent later", "via", via, "error", err.Error())
	default:
		p.Log.Debug("still cannot publish receipts to State Hub", "via", via, "error", err.Error())
	}
}
