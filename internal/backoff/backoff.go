// Package backoff is the one retry pacing both daemons use: a wait that
// doubles from a floor to a ceiling after each failure, spread by jitter.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is how a retry loop waits after failures.
type Policy struct {
	// Min is the first wait, Max the longest; each failure doubles the wait.
	Min, Max time.Duration
}

// Next is the wait after prev when the work failed again: Min at first,
// then doubling, never more than Max.
func (p Policy) Next(prev time.Duration) time.Duration {
	return min(max(2*prev, p.Min), p.Max)
}

// Jitter spreads a wait by up to a fifth either way, so many processes that
// lost the same peer together do not come back in step.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
