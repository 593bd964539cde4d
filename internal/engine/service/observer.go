package service

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// The observer polls State Hub every statehub_poll_interval_seconds, and at
// once on each hint of its event stream; each look turns what it saw into
// triggers, gates, leases and wakes. While State Hub cannot be reached it
// backs off (doubling from a second, never longer than one interval, with
// jitter), so it is back within one interval of State Hub's return. tamq's
// local messaging never waits on any of it.

// checkpointsCursor is the observer_state key of the checkpoint cursor.
const checkpointsCursor = "checkpoints_cursor"

// hubView is what the observer knows of State Hub, for status and explain.
type hubView struct {
	mu sync.Mutex
	// LastPoll is the last look that got an answer; LastError the last
	// failure (cleared by an answer); Paused says State Hub refused the
	// credentials.
	LastPoll  time.Time
	LastError string
	// UnreachableSince is the first look State Hub did not answer since
	// the last good one; zero while it answers, or while looks fail for
	// another reason (the registry, what State Hub sent).
	UnreachableSince time.Time
	Paused           bool
	Polls            int
	// NextLook is when the observer looks next, unless woken; RetryAt
	// the time State Hub named to be asked again (a rate limit), zero
	// when it named none.
	NextLook        time.Time
	RetryAt         time.Time
	EventsConnected bool
	EventsOffered   bool // false once the server answered 404
	obs             observe.Observation
	// inbox are the ids of the unread messages that ask for action, as
	// last observed: a message's next attempt is judged by it;
	// inboxCandidates the same as candidates.
	inbox           map[string]bool
	inboxCandidates []observe.Candidate
	observed        bool
}

func (v *hubView) update(f func(v *hubView)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

// profilePolicy is the active policy profile as the observation asks it.
type profilePolicy struct{ p policy.Profile }

func (pp profilePolicy) Known(c string) bool {
	return slices.Contains(policy.Known, policy.Category(c))
}
func (pp profilePolicy) RequiresHuman(c string) bool {
	return pp.p.RequiresHuman(policy.Category(c))
}

// observer is the State Hub observer: its client, what it knows of State
// Hub (the view status and explain read), its poll loop (Run) and event
// stream (RunEvents), which wake it. Each look hands what it saw to the
// judge.
type observer struct {
	hub    statehub.Hub
	store  *store.Store
	log    *slog.Logger
	clock  clock.Clock
	config *config.Loaded
	// view is what the observer knows of State Hub; the judge, status and
	// explain read it.
	view *hubView
	// judge takes each look's work as far as it can go.
	judge interface {
		judgeOffered(ctx context.Context) error
		applyCheckpoints(ctx context.Context, cps []contract.Checkpoint, obs observe.Observation) ([]observe.Candidate, error)
		judgeCandidates(ctx context.Context, obs observe.Observation, inbox, resume []observe.Candidate, all bool) error
	}
	// problems reports what State Hub holds that the engine cannot act on.
	problems interface {
		recordInvalid(ctx context.Context, bad []statehub.Invalid)
		recordProblems(ctx context.Context, ps []observe.Problem)
	}
	// receipts are sent to State Hub by the outbox: when State Hub answers
	// again, those that waited go at once.
	receipts interface{ Retry() }
	// wake is the signal of whoever wants a look now.
	wake wakeup.Signal
	// changes hears that an observation changed what State Hub says.
	changes *daemon.Changes
	// routes says tamq's windows changed since the last look.
	routes *routesFlag
	// looked hears that a look succeeded: the notifier's signal, which
	// nothing reads without [notify].
	looked wakeup.Signal
	// rejudge: a look that saw State Hub's workplans change failed before
	// it had acted on them (the disk full); the client reports a change
	// once, so the next look judges the tasks again.
	rejudge atomic.Bool
	// freeMemory hands freed memory back to the system a little after a look
	// that decoded State Hub's workplans (see observeOnce).
	freeMemory *time.Timer
	// firstLook is closed once the first look has ended, its judging done
	// or failed (firstLookOnce closes it).
	firstLook     chan struct{}
	firstLookOnce sync.Once
}

// routesFlag says tamq's windows changed (an attach, a detach, tamq gone)
// since the observer's last look: its next look judges the work waiting for
// a window again, even if State Hub did not change.
type routesFlag struct{ changed atomic.Bool }

// Changed raises the flag; the observer's next look lowers it.
func (f *routesFlag) Changed() { f.changed.Store(true) }

// firstLookWait bounds how long a question to a freshly started engine
// waits for its first look (see awaitFirstLook): a look at a local State Hub
// takes milliseconds; a slow one answers "not observed yet" well within the
// callers' own bounds (tamq top's 3 s a call, the client's 10 s).
const firstLookWait = 2 * time.Second

// releaseAfter is how long after a look that got the workplans the engine
// returns the memory that look freed. Decoding 10,000 tasks takes some
// 20 MB that the runtime would otherwise keep: after a burst of changes in
// State Hub an idle engine stayed at 39 MB; it now falls back to about 25
// (docs/performance.md, "Scale").
const releaseAfter = 2 * time.Second

// newHubView is the view of a State Hub not looked at yet.
func newHubView() *hubView { return &hubView{EventsOffered: true} }

// startObserver readies an observer made with what it depends on: its
// first look not yet done, no memory to hand back yet.
func startObserver(o *observer) *observer {
	o.firstLook = make(chan struct{})
	o.freeMemory = time.AfterFunc(time.Hour, debug.FreeOSMemory)
	o.freeMemory.Stop() // armed by the looks that decode the workplans
	return o
}

// snapshot is the last observation, the messages asking for action then,
// and whether State Hub has been observed at all.
func (v *hubView) snapshot() (obs observe.Observation, inbox map[string]bool, inboxCandidates []observe.Candidate, observed bool) {
	v.update(func(v *hubView) {
		obs, inbox, inboxCandidates, observed = v.obs, v.inbox, v.inboxCandidates, v.observed
	})
	return obs, inbox, inboxCandidates, observed
}

// task is task id as the last look at State Hub saw it.
func (v *hubView) task(id string) (tv observe.TaskView, ok bool) {
	v.update(func(hv *hubView) { tv, ok = hv.obs.Tasks[id] })
	return tv, ok
}

// Run is the observer worker.
func (o *observer) Run(ctx context.Context) {
	interval := time.Duration(o.config.Coordination.StateHubPollIntervalSeconds) * time.Second
	delay := time.Duration(0) // the backoff, zero while State Hub answers
	for {
		wait := interval
		err := o.observeOnce(ctx)
		o.firstLookOnce.Do(func() { close(o.firstLook) })
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if until, ok := statehub.RetryAt(err); ok {
				// State Hub named when to ask again (GitHub's rate
				// limits): then, neither sooner (asking early makes a
				// secondary limit longer) nor on a backoff of our own.
				wait = max(until.Sub(o.clock.Now()), 0)
				delay = max(delay, time.Second) // it answers again after this
			} else {
				delay = backoff.Policy{Min: time.Second, Max: interval}.Next(delay)
				wait = backoff.Jitter(delay)
			}
			o.noteFailure(err)
		} else {
			if delay > 0 {
				o.log.Info("State Hub answers again")
				o.receipts.Retry() // the receipts that waited go now, not at the outbox's own backoff
			}
			delay = 0
		}
		if next, ok, err := o.store.Triggers.NextGateCheck(ctx); err == nil && ok {
			// Not sooner than a second: a check that cannot be made yet
			// (tamq not attached since the start) leaves it due.
			wait = min(wait, max(next.Sub(o.clock.Now()), time.Second))
		}
		o.view.update(func(v *hubView) { v.NextLook = o.clock.Now().Add(wait) })
		select {
		case <-ctx.Done():
			return
		case <-o.wake.C():
		case <-o.clock.After(wait):
		}
	}
}

// noteFailure records why a look failed: a refusal of the credentials
// pauses observation until they work, anything else is an outage.
func (o *observer) noteFailure(err error) {
	paused := errs.Is(err, errs.PermissionDeny)
	retryAt, _ := statehub.RetryAt(err)
	unreachable := errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Timeout)
	first := false
	o.view.update(func(v *hubView) {
		first = v.LastError == ""
		switch {
		case !unreachable:
			v.UnreachableSince = time.Time{}
		case v.UnreachableSince.IsZero():
			v.UnreachableSince = o.clock.Now()
		}
		v.LastError, v.Paused, v.RetryAt = err.Error(), paused, retryAt
	})
	switch {
	case first && paused:
		o.log.Warn("State Hub refused the credentials; observation paused", "error", err.Error())
	case first && !retryAt.IsZero():
		o.log.Warn("State Hub asked for no requests for a while; looking again then", "until", retryAt, "error", err.Error())
	case first && unreachable:
		o.log.Warn("State Hub is not reachable; backing off", "error", err.Error())
	case first:
		o.log.Warn("observation failed; backing off", "error", err.Error())
	default:
		o.log.Debug("State Hub still not answering", "error", err.Error())
	}
}

// RunEvents follows State Hub's event stream and wakes the observer on each
// event, reconnecting with a backoff; a server without the stream is not
// asked again until restart.
func (o *observer) RunEvents(ctx context.Context) {
	delay := time.Duration(0)
	for {
		err := o.hub.Events(ctx, func() {
			delay = 0
			o.view.update(func(v *hubView) { v.EventsConnected = true })
			o.wake.Wake() // look now: changes may have been missed while away
		}, o.wake.Wake)
		o.view.update(func(v *hubView) { v.EventsConnected = false })
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, statehub.ErrNoEvents):
			o.view.update(func(v *hubView) { v.EventsOffered = false })
			o.log.Info("State Hub has no event stream; polling alone")
			return
		}
		delay = backoff.Policy{Min: time.Second, Max: 30 * time.Second}.Next(delay)
		select {
		case <-ctx.Done():
			return
		case <-o.clock.After(backoff.Jitter(delay)):
		}
	}
}

// observeOnce looks at State Hub once and acts on what it saw. When the
// look fails but the windows changed (tamq attached, a window opened), the
// work waiting for a window is judged against the last observation: tamq's
// return does not wait for State Hub's.
func (o *observer) observeOnce(ctx context.Context) (err error) {
	routes := o.routes.changed.Swap(false)
	defer func() {
		if err != nil && routes {
			o.routes.Changed()
		}
	}()
	c := o.hub
	board, err := c.Board(ctx)
	if err != nil {
		o.judgeLast(ctx, routes)
		return err
	}
	wps, changed, invalid := board.Workplans, board.Changed, board.Invalid
	changed = o.rejudge.Swap(false) || changed
	defer func() {
		if err != nil && changed {
			o.rejudge.Store(true)
		}
	}()
	msgs, badMsgs, err := c.UnreadMessages(ctx)
	if err != nil {
		o.judgeLast(ctx, routes)
		return err
	}
	cursor, err := o.store.Observer.ObserverValue(ctx, checkpointsCursor)
	if err != nil {
		return err
	}
	cps, next, badCps, err := c.Checkpoints(ctx, cursor)
	if err != nil {
		o.judgeLast(ctx, routes)
		return err
	}
	o.problems.recordInvalid(ctx, slices.Concat(invalid, badMsgs, badCps))
	inbox := observe.Messages(msgs)
	var obs observe.Observation
	o.view.update(func(v *hubView) {
		if changed || !v.observed {
			v.obs, v.observed = observe.Tasks(wps, board.Outside, profilePolicy{o.config.ActiveProfile()}), true
		}
		obs = v.obs
		v.inboxCandidates = inbox
		v.inbox = make(map[string]bool, len(inbox))
		for _, c := range inbox {
			v.inbox[c.Trigger.SourceID] = true
		}
		v.LastPoll, v.LastError, v.Paused, v.RetryAt, v.UnreachableSince = o.clock.Now(), "", false, time.Time{}, time.Time{}
		v.Polls++
	})
	if changed {
		o.changes.Bump() // the tasks a view shows may stand otherwise now
		o.problems.recordProblems(ctx, obs.Problems)
		defer o.freeMemory.Reset(releaseAfter) // once this look's work is done
	}
	// Leases offered and not yet taken up: one whose task ended or was
	// gated since, or whose message was read, stops before its agent takes
	// it up (and its wake is cancelled in tamq).
	if err := o.judge.judgeOffered(ctx); err != nil {
		return err
	}
	resume, err := o.judge.applyCheckpoints(ctx, cps, obs)
	if err != nil {
		return err
	}
	if err := o.judge.judgeCandidates(ctx, obs, inbox, resume, changed || routes); err != nil {
		return err
	}
	if next != cursor {
		if err := o.store.Observer.SetObserverValue(ctx, checkpointsCursor, next); err != nil {
			return err
		}
	}
	o.looked.Wake()
	return nil
}

// judgeLast judges the waiting work against the last observation, when
// the windows changed but State Hub cannot be looked at now.
func (o *observer) judgeLast(ctx context.Context, routes bool) {
	obs, _, inbox, observed := o.view.snapshot()
	if !routes || !observed {
		return
	}
	if err := o.judge.judgeCandidates(ctx, obs, inbox, nil, true); err != nil {
		o.log.Warn("cannot judge the waiting work against the last observation", "error", err.Error())
	}
}

// awaitFirstLook waits, at most firstLookWait, until the engine's first
// look at State Hub has ended and what it saw is judged: explain and tasks
// asked right after `coordination-engine start` then tell what that look
// found (a task's gate, its dependency), not "not observed yet" or a task
// seen but not yet judged.
func (o *observer) awaitFirstLook(ctx context.Context) {
	t := time.NewTimer(firstLookWait)
	defer t.Stop()
	select {
	case <-o.firstLook:
	case <-ctx.Done():
	case <-t.C:
	}
}

// explainView is the last observation, for explain.
func (o *observer) explainView() *ExplainView {
	view := &ExplainView{}
	o.view.update(func(v *hubView) {
		// Each look replaces the observation whole, so this one stays as it
		// is after the lock is released.
		view.Observed, view.At, view.Observation = v.observed, v.LastPoll, v.obs
	})
	return view
}

// report fills status's account of the observation.
func (o *observer) report(h *api.StateHubStatus) {
	o.view.update(func(v *hubView) {
		h.Paused, h.Polls, h.ObserveError = v.Paused, v.Polls, v.LastError
		h.EventsConnected, h.EventsOffered = v.EventsConnected, v.EventsOffered
		h.LastPoll, h.NextLook, h.RetryAt = optionalTime(v.LastPoll), optionalTime(v.NextLook), optionalTime(v.RetryAt)
		h.UnreachableSince = v.unreachableSince()
	})
}

// unreachableSince is when State Hub stopped answering, nil while it
// answers. A refusal of the credentials (Paused) and a pause State Hub
// asked for (RetryAt) are answers, said otherwise by status.
func (v *hubView) unreachableSince() *time.Time {
	if v.Paused || !v.RetryAt.IsZero() {
		return nil
	}
	return optionalTime(v.UnreachableSince)
}

// stateHubUnreachableSince is unreachableSince, for the task list.
func (o *observer) stateHubUnreachableSince() (since *time.Time) {
	o.view.update(func(v *hubView) { since = v.unreachableSince() })
	return since
}
