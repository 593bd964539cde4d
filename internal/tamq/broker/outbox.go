package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// ErrServiceDown marks a send that found no service to take it: the line is
// kept in the spool and sent again when the service is back.
var ErrServiceDown = errors.New("the service is down")

// Outbox hands the lines the broker saw (the agent's blocks, the operator's
// typed addresses) to the service in order, one at a time, on a goroutine of
// its own: the terminal never waits on the service. Put never blocks and
// never panics, however late it comes. While the service is down, lines are
// kept in a spool file of this broker's own and sent when it is back, with
// the time they were seen; nothing else ever sends them, since the service
// takes the sender from the process that connects.
type Outbox struct {
	// Send hands one line to the service; an error wrapping ErrServiceDown
	// means it never got there.
	Send func(ctx context.Context, m api.SendArgs) error
	// Notice shows one line of tamq's own on the operator's screen.
	Notice func(string)
	Spool  *Spool
	Now    func() time.Time
	// Max bounds the lines waiting; past it a line is dropped with a notice.
	Max int
	// Retry is the longest pause between tries while the service is down.
	Retry time.Duration

	mu      sync.Mutex
	queue   []pending
	closed  bool
	dropped int
	step    chan struct{} // closed (under mu) whenever the queue changes
	wake    wakeup.Signal
	stop    context.CancelFunc
	done    chan struct{}
}

type pending struct {
	target  string
	m       api.SendArgs
	seen    time.Time
	spooled bool
}

// Start runs the sender until Close.
func (o *Outbox) Start() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Max <= 0 {
		o.Max = 256
	}
	if o.Retry <= 0 {
		o.Retry = 5 * time.Second
	}
	o.wake = wakeup.New()
	o.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	go o.run(ctx)
}

// Put queues one line for target ("To:<target>: body" in m.Text). It
// returns at once.
func (o *Outbox) Put(target string, m api.SendArgs) {
	if !utf8.ValidString(m.Text) {
		target = strings.ToValidUTF8(target, "?")
		o.Notice(fmt.Sprintf("tamq: not sent to %s: the line has bytes that are not valid UTF-8", target))
		return
	}
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		o.Notice(fmt.Sprintf("tamq: not sent to %s: the agent has exited and the broker is closing", target))
		return
	case len(o.queue) >= o.Max:
		o.dropped++
		first := o.dropped == 1
		o.mu.Unlock()
		if first {
			o.Notice(fmt.Sprintf("tamq: not sent to %s: %d lines already wait for the service; dropping lines until they go", target, o.Max))
		}
		return
	}
	o.queue = append(o.queue, pending{target: target, m: m, seen: o.Now()})
	o.mu.Unlock()
	o.wake.Wake()
}

// Close stops taking lines and waits up to wait for those still queued to
// reach the service; waiting, when set, hears how many still wait once the
// first moment has passed without them going. Close returns how many it
// could not send; they are left in the spool file, which nothing else will
// send.
func (o *Outbox) Close(wait time.Duration, waiting func(pending int)) (kept int) {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wake.Wake()
	deadline := time.After(wait)
	moment := time.After(min(250*time.Millisecond, wait))
wait:
	for {
		o.mu.Lock()
		n := len(o.queue)
		if n == 0 {
			o.mu.Unlock()
			break
		}
		if o.step == nil {
			o.step = make(chan struct{})
		}
		step := o.step
		o.mu.Unlock()
		select {
		case <-deadline:
			break wait
		case <-moment:
			if waiting != nil {
				waiting(n)
			}
		case <-step:
		}
	}
	o.stop()
	// A send in flight ends by its own timeout; it is not waited for long,
	// since the process is about to exit.
	select {
	case <-o.done:
	case <-time.After(2 * time.Second):
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keep() // whatever is left stays on disk for the operator
	return len(o.queue)
}

// changed wakes Close. Called with mu held.
func (o *Outbox) changed() {
	if o.step != nil {
		close(o.step)
		o.step = nil
	}
}

func (o *Outbox) run(ctx context.Context) {
	defer close(o.done)
	// While the service is down the line is tried again from a tenth of a
	// second, each wait doubling up to Retry.
	retry := backoff.Policy{Min: 100 * time.Millisecond, Max: o.Retry}
	pause := retry.Min
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.changed()
			o.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-o.wake.C():
				continue
			}
		}
		head := o.queue[0]
		o.mu.Unlock()

		m := head.m
		if head.spooled {
			seen := head.seen.UTC()
			m.ObservedAt = &seen
		}
		err := o.Send(ctx, m)
		if ctx.Err() != nil {
			return // Close gave up waiting; the line stays queued and spooled
		}
		if errors.Is(err, ErrServiceDown) {
			o.mu.Lock()
			newly := o.keep()
			if o.closed {
				pause = min(pause, 500*time.Millisecond) // the broker waits to exit: try often
			}
			o.mu.Unlock()
			if len(newly) > 0 {
				o.Notice(keptNotice(newly))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			case <-o.wake.C(): // a new line: keep it at once, and try again
			}
			pause = retry.Next(pause)
			continue
		}
		pause = retry.Min
		o.mu.Lock()
		o.queue = o.queue[1:]
		if head.spooled {
			o.rewriteSpool()
		}
		dropped := o.dropped
		o.dropped = 0
		o.changed()
		o.mu.Unlock()
		if err != nil {
			o.Notice(failureNotice(head.target, err))
		}
		if dropped > 0 {
			o.Notice(fmt.Sprintf("tamq: %d lines were dropped while the service did not answer", dropped))
		}
	}
}

// keep writes the lines not yet in the spool to it and returns them.
// Called with mu held.
func (o *Outbox) keep() []pending {
	var newly []pending
	for i := range o.queue {
		if o.queue[i].spooled {
			continue
		}
		if o.Spool != nil {
			if err := o.Spool.Append(o.queue[i].m, o.queue[i].seen); err != nil {
				o.Notice(fmt.Sprintf("tamq: cannot write the spool (%v); the line to %s is held in memory only", err, o.queue[i].target))
			}
		}
		o.queue[i].spooled = true
		newly = append(newly, o.queue[i])
	}
	return newly
}

// rewriteSpool leaves in the spool file just the lines still waiting.
// Called with mu held.
func (o *Outbox) rewriteSpool() {
	if o.Spool == nil {
		return
	}
	var rest []pending
	for _, p := range o.queue {
		if p.spooled {
			rest = append(rest, p)
		}
	}
	if err := o.Spool.Rewrite(rest); err != nil {
		o.Notice(fmt.Sprintf("tamq: cannot update the spool %s: %v", o.Spool.Path, err))
	}
}

// keptNotice says what was kept for whom: "tamq: service down; kept 1 line
// for railiance, will send when it is back".
func keptNotice(kept []pending) string {
	seen := map[string]bool{}
	var targets []string
	for _, p := range kept {
		if t := p.target; !seen[t] {
			seen[t] = true
			targets = append(targets, t)
		}
	}
	sort.Strings(targets)
	return fmt.Sprintf("tamq: service down; kept %s for %s, will send when it is back", english.Plural(len(kept), "line", ""), strings.Join(targets, ", "))
}

func failureNotice(target string, err error) string {
	switch {
	case errs.Is(err, errs.UnknownTarget):
		return fmt.Sprintf("tamq: not sent: unknown target '%s' (not in the gita registry)", target)
	case errs.Is(err, errs.Timeout):
		return fmt.Sprintf("tamq: the service did not answer in time; the line to %s may not have been sent", target)
	}
	return fmt.Sprintf("tamq: not sent to %s: %v", target, err)
}
