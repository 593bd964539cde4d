package service

import (
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/lease"
)

// The timeline docs/coordination.md gives for the spec's defaults (ack
// 30 s, renew 10 s, three missed renewals, backoff 5/15/60/300 s, four
// retries), for an agent that never answers: when each attempt is offered
// and runs out, and when the lease stops.
func TestDefaultTimeline(t *testing.T) {
	tm := Timing(config.Default())
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	l, err := lease.Offer(lease.Trigger{ID: "T", TargetRepo: "alpha"}, "L", t0, tm)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	at := func(what string, when time.Time) { got = append(got, what+" +"+when.Sub(t0).String()) }
	at("offered 1", l.AcquiredAt)
	for l.State != lease.Stopped {
		l.WakeOutcome = lease.WakeResumed // tamq took the wake; the agent never answers
		now := l.ExpiresAt
		if l, _, err = l.Expire(now, tm); err != nil {
			t.Fatal(err)
		}
		at("ran out", now)
		if l.State == lease.Stopped {
			break
		}
		if l, _, err = l.Reoffer(l.NextRetryAt, tm); err != nil {
			t.Fatal(err)
		}
		at("offered "+string(rune('0'+l.Attempt)), l.AcquiredAt)
	}
	want := []string{"offered 1 +0s", "ran out +30s", "offered 2 +35s", "ran out +1m5s", "offered 3 +1m20s", "ran out +1m50s",
		"offered 4 +2m50s", "ran out +3m20s", "offered 5 +8m20s", "ran out +8m50s"}
	if !slices.Equal(got, want) || l.StopReason != lease.StopExhausted {
		t.Errorf("timeline %v (%s), want %v", got, l.StopReason, want)
	}
	// An agent that acknowledged and then went quiet is offered the work
	// again 30 s (three renewal intervals) after its last ack, renewal or
	// checkpoint.
	held, _, _ := lease.Lease{ID: "L", State: lease.Offered, Attempt: 1, ExpiresAt: t0.Add(tm.AckTimeout)}.Ack(t0.Add(2*time.Second), tm, 1)
	if d := held.ExpiresAt.Sub(t0); d != 32*time.Second {
		t.Errorf("an ack at +2s holds the lease until +%s, want +32s", d)
	}
}
