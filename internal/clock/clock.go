// Package clock is the one clock both daemons' services take: the system's
// in production, a fake that tests move by hand, so deadlines, backoffs and
// polls are tested without sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits. Every service that keeps a deadline, a
// backoff or an interval takes one instead of calling package time.
type Clock interface {
	// Now is the time in UTC to the millisecond: what the databases keep
	// (Unix milliseconds), so a time reported equals a time stored.
	Now() time.Time
	// After delivers the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// System is the real clock.
var System Clock = system{}

type system struct{}

func (system) Now() time.Time { return Trunc(time.Now()) }

func (system) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Trunc is t as a Clock reports it: UTC, to the millisecond.
func Trunc(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// Fake is a clock that moves only when told to. Its waits fire when Advance
// passes their deadline; Waiting lets a test wait until a service is parked
// on the clock before moving it.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waits   []wait
	changed chan struct{} // closed and replaced whenever a wait is added
}

type wait struct {
	at time.Time
	ch chan time.Time
}

// NewFake is a fake clock showing start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: Trunc(start), changed: make(chan struct{})}
}

// Now is the fake's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After fires once the fake has been advanced by d; at once for d <= 0.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waits = append(f.waits, wait{at: f.now.Add(d), ch: ch})
	close(f.changed)
	f.changed = make(chan struct{})
	return ch
}

// Advance moves the fake forward by d and fires, in order, every wait whose
// time has come.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	sort.SliceStable(f.waits, func(i, j int) bool { return f.waits[i].at.Before(f.waits[j].at) })
	kept := f.waits[:0]
	for _, w := range f.waits {
		if w.at.After(f.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- w.at
	}
	f.waits = kept
}

// Waiting is how many waits have not fired yet, and a channel closed when
// another is added: a test waits for a service to park before it advances.
func (f *Fake) Waiting() (int, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waits), f.changed
}

// BlockUntil returns once at least n waits are pending, or when done closes
// (then it reports false).
func (f *Fake) BlockUntil(n int, done <-chan struct{}) bool {
	for {
		have, changed := f.Waiting()
		if have >= n {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}
