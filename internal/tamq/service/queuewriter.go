package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

// queueWriter is the committer: the single writer of new messages. Senders
// hand it messages through its channel (enqueue) and wait until theirs is
// durable.
type queueWriter struct {
	log    *slog.Logger
	clock  clock.Clock
	queue  *store.Queue
	reqs   chan enqueueReq
	worker *daemon.Worker
}

type enqueueReq struct {
	m    *queue.Message
	done chan error
}

// maxGroup is the most sends one commit takes; more wait for the next.
const maxGroup = 256

// maxGroupWait bounds how long a group waits for the senders of the last
// one to come back (see run).
const maxGroupWait = time.Millisecond

func newQueueWriter(log *slog.Logger, clk clock.Clock, q *store.Queue) *queueWriter {
	w := &queueWriter{log: log, clock: clk, queue: q, reqs: make(chan enqueueReq, maxGroup)}
	w.worker = &daemon.Worker{Name: "committer", Run: w.run}
	return w
}

// enqueue hands a message to the committer and waits until it is durable.
// It never waits on a committer that has stopped.
func (w *queueWriter) enqueue(ctx context.Context, m *queue.Message) error {
	stopped := errs.New(errs.ShuttingDown, "the service is shutting down; the message was not queued").
		WithHint("send it again once the service is back")
	req := enqueueReq{m: m, done: make(chan error, 1)}
	select {
	case w.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.worker.Done():
		return stopped
	}
	select {
	case err := <-req.done:
		return err
	case <-w.worker.Done():
		// The committer answers every request it took before it stops.
		select {
		case err := <-req.done:
			return err
		default:
			return stopped
		}
	}
}

// run is the group commit: every send waiting when a commit starts joins
// it, up to maxGroup, so concurrent senders share one transaction and one
// sync of the disk instead of paying one each. A lone send commits at once,
// sends arriving during a commit make the next group, and a group smaller
// than the last waits a little for the last one's senders (below), never for
// more. Each send gets its own answer once the commit is durable:
// its message stored, or its own error (a message the database refuses fails
// alone, store.Queue.EnqueueEach), or the group's when the transaction fails
// as a whole.
func (w *queueWriter) run(ctx context.Context) {
	var failing spell
	group := make([]enqueueReq, 0, maxGroup)
	msgs := make([]*queue.Message, 0, maxGroup)
	// How many sends the next group waits for, and how long the last commit
	// took (the machine's time, not the service's clock: it is a matter of
	// scheduling, and a fake clock in a test must not hold sends back).
	var expect int
	var lastCommit time.Duration
	for {
		group, msgs = group[:0], msgs[:0]
		select {
		case <-ctx.Done():
			return
		case req := <-w.reqs:
			group = append(group, req)
		}
	more:
		for len(group) < maxGroup {
			select {
			case req := <-w.reqs:
				group = append(group, req)
			default:
				break more
			}
		}
		// The senders the last commit answered are likely coming back with
		// their next message: without waiting for them, the first one back
		// commits alone while the others wait out that commit (eight busy
		// senders made groups of 1 and 7 by turns, two commits where one
		// does). So a group waits until it holds as many as expect (the last
		// group's senders and the sends that arrived during its commit),
		// but only for an eighth of the last commit's time (at most
		// maxGroupWait), a cost bounded by what it can save: senders that
		// were answered and send again at once join in microseconds. A lone
		// sender never waits: its last group was its own send alone.
		if len(group) < expect {
			wait := time.NewTimer(min(lastCommit/8, maxGroupWait))
		rest:
			for len(group) < expect {
				select {
				case req := <-w.reqs:
					group = append(group, req)
				case <-wait.C:
					break rest
				case <-ctx.Done():
					break rest
				}
			}
			wait.Stop()
		}
		started := time.Now()
		for _, r := range group {
			msgs = append(msgs, r.m)
		}
		failed, err := w.queue.EnqueueEach(ctx, msgs)
		lastCommit = time.Since(started)
		// Counted before the answers go out: what waits now arrived during
		// the commit, none of it from this group's senders. Expecting only
		// this group's size instead let eight senders settle into two groups
		// of four that alternate, each meeting its expectation.
		expect = min(len(w.reqs)+len(group), maxGroup)
		switch {
		case err != nil && ctx.Err() == nil:
			failing.failed(w.clock.Now(), w.log, "cannot queue messages; sends are refused until this clears", err)
		case err == nil:
			failing.ok(w.log, "queueing messages again")
		}
		for i, r := range group {
			if err != nil {
				r.done <- err
				continue
			}
			if failed[i] != nil {
				w.log.Error("cannot queue a message", "target", r.m.Target, "error", failed[i].Error())
			}
			r.done <- failed[i]
		}
	}
}
