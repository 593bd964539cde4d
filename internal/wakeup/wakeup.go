// Package wakeup is the one way a service tells a worker that there may be
// work: a signal that holds at most one wake, so many wakes before the
// worker looks cost one look, and a wake never blocks the one who sends it.
package wakeup

// Signal is a one-slot wake. The zero Signal is not usable: make one with
// New.
type Signal struct {
	c chan struct{}
}

// New makes a Signal with no wake pending.
func New() Signal { return Signal{c: make(chan struct{}, 1)} }

// Wake leaves a wake for the worker, unless one is pending already.
func (s Signal) Wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// C is where the worker waits for a wake; receiving takes it.
func (s Signal) C() <-chan struct{} { return s.c }
