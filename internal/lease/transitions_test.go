package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Every rule with explicit times: t0 is when the lease was (re)offered, and
// each case says when the step happens.

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var timing = Timing{
	AckTimeout:     30 * time.Second,
	RenewInterval:  time.Minute,
	MissedRenewals: 3,
	Backoff:        []time.Duration{5 * time.Second, 15 * time.Second, time.Minute},
	MaxRetries:     2,
}

// deadline is the expires_at of every lease a case starts from.
var deadline = at(time.Minute)

// in is a lease in state s at attempt n (of 1+2), its deadline a minute
// after t0, its wake answered.
func in(s State, n int) Lease {
	l := Lease{
		ID: "L1", TriggerID: "T1", Owner: Owner, TargetRepo: "net", State: s, Attempt: n, MaxRetries: 2,
		AcquiredAt: t0, ExpiresAt: deadline, CoordinationEndpointID: "ce-1", TamqEndpointID: "tmux-amq-1",
		LocalLeaseID: "m1", WakeOutcome: WakeResumed, PolicyProfile: "default@1", ConfigVersion: "cfg", UpdatedAt: t0,
	}
	if s == RetryWait {
		l.NextRetryAt, l.LocalLeaseID = at(2*time.Minute), ""
	}
	return l
}

// with is l changed by f: what a case wants.
func with(l Lease, f func(*Lease)) Lease {
	f(&l)
	return l
}

type step func(Lease) (Lease, bool, error)

type transitionCase struct {
	name    string
	from    Lease
	step    step
	want    Lease // when code is ""
	changed bool
	code    errs.Code // a refusal: the lease comes back unchanged
}

func runCases(t *testing.T, tests []transitionCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := tt.step(tt.from)
			if tt.code != "" {
				if !errs.Is(err, tt.code) {
					t.Fatalf("got %v, want %s", err, tt.code)
				}
				if got != tt.from || changed {
					t.Errorf("a refusal changed the lease (changed=%v):\n%+v\nwas\n%+v", changed, got, tt.from)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
			if got != tt.want {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func ack(now time.Time) step { return ackOf(0, now) }

// ackOf is an ack naming its attempt (0: none).
func ackOf(attempt int, now time.Time) step {
	return func(l Lease) (Lease, bool, error) { return l.Ack(now, timing, attempt) }
}

func renew(now time.Time) step { return renewOf(0, now) }

func renewOf(attempt int, now time.Time) step {
	return func(l Lease) (Lease, bool, error) { return l.Renew(now, timing, attempt) }
}

func release(r Result, reason string, now time.Time) step { return releaseOf(0, r, reason, now) }

func releaseOf(attempt int, r Result, reason string, now time.Time) step {
	return func(l Lease) (Lease, bool, error) { return l.Release(r, reason, now, timing, attempt) }
}

func expire(now time.Time, tm Timing) step {
	return func(l Lease) (Lease, bool, error) { return l.Expire(now, tm) }
}

func reoffer(now time.Time) step {
	return func(l Lease) (Lease, bool, error) { return l.Reoffer(now, timing) }
}

// held is 3 missed renewals of a minute.
const held = 3 * time.Minute

func TestAck(t *testing.T) {
	now := at(10 * time.Second)
	runCases(t, []transitionCase{
		{name: "offered is acknowledged", from: in(Offered, 1), step: ack(now), changed: true,
			want: with(in(Offered, 1), func(l *Lease) { l.State, l.ExpiresAt, l.UpdatedAt = Acknowledged, now.Add(held), now })},
		{name: "a repeated ack", from: in(Acknowledged, 1), step: ack(now), want: in(Acknowledged, 1)},
		{name: "an ack while running", from: in(Running, 1), step: ack(now), want: in(Running, 1)},
		{name: "an ack while checkpointed", from: in(Checkpointed, 2), step: ack(now), want: in(Checkpointed, 2)},
		{name: "just before the deadline", from: in(Offered, 1), step: ack(deadline.Add(-time.Millisecond)), changed: true,
			want: with(in(Offered, 1), func(l *Lease) {
				l.State, l.ExpiresAt, l.UpdatedAt = Acknowledged, deadline.Add(held-time.Millisecond), deadline.Add(-time.Millisecond)
			})},
		{name: "at the deadline, not yet swept", from: in(Offered, 1), step: ack(deadline), code: errs.LeaseExpired},
		{name: "a repeated ack past the deadline", from: in(Acknowledged, 1), step: ack(deadline.Add(time.Second)), code: errs.LeaseExpired},
		{name: "in retry_wait", from: in(RetryWait, 2), step: ack(now), code: errs.LeaseExpired},
		{name: "attempt 1 after attempt 2 was offered", from: in(Offered, 2), step: ackOf(1, now), code: errs.LeaseExpired},
		{name: "naming none acks the current attempt", from: in(Offered, 2), step: ack(now), changed: true,
			want: with(in(Offered, 2), func(l *Lease) { l.State, l.ExpiresAt, l.UpdatedAt = Acknowledged, now.Add(held), now })},
		{name: "completed", from: in(Completed, 1), step: ack(now), code: errs.LeaseState},
		{name: "stopped", from: in(Stopped, 3), step: ack(now), code: errs.LeaseState},
	})
}

func TestRenew(t *testing.T) {
	now := at(50 * time.Second)
	extended := func(s State) func(*Lease) {
		return func(l *Lease) { l.State, l.ExpiresAt, l.UpdatedAt = s, now.Add(held), now }
	}
	runCases(t, []transitionCase{
		{name: "the first renewal runs it", from: in(Acknowledged, 1), step: renew(now), changed: true,
			want: with(in(Acknowledged, 1), extended(Running))},
		{name: "running stays running", from: in(Running, 1), step: renew(now), changed: true,
			want: with(in(Running, 1), extended(Running))},
		{name: "checkpointed stays checkpointed", from: in(Checkpointed, 1), step: renew(now), changed: true,
			want: with(in(Checkpointed, 1), extended(Checkpointed))},
		{name: "offered: acknowledge first", from: in(Offered, 1), step: renew(now), code: errs.LeaseState},
		{name: "past the deadline", from: in(Running, 1), step: renew(deadline), code: errs.LeaseExpired},
		{name: "in retry_wait", from: in(RetryWait, 2), step: renew(now), code: errs.LeaseExpired},
		{name: "attempt 1 after attempt 2 was offered", from: in(Offered, 2), step: renewOf(1, now), code: errs.LeaseExpired},
		{name: "naming none after attempt 2 was offered", from: in(Offered, 2), step: renew(now), code: errs.LeaseExpired},
		{name: "attempt 1 while attempt 2 runs", from: in(Running, 2), step: renewOf(1, now), code: errs.LeaseExpired},
		{name: "naming its own attempt", from: in(Running, 2), step: renewOf(2, now), changed: true,
			want: with(in(Running, 2), extended(Running))},
		{name: "completed", from: in(Completed, 1), step: renew(now), code: errs.LeaseState},
		{name: "stopped", from: in(Stopped, 1), step: renew(now), code: errs.LeaseState},
	})
}

func TestRelease(t *testing.T) {
	now := at(40 * time.Second)
	runCases(t, []transitionCase{
		{name: "completed from acknowledged", from: in(Acknowledged, 1), step: release(ResultCompleted, "", now), changed: true,
			want: with(in(Acknowledged, 1), func(l *Lease) { l.State, l.Released, l.UpdatedAt = Completed, ResultCompleted, now })},
		{name: "completed from running", from: in(Running, 2), step: release(ResultCompleted, "merged", now), changed: true,
			want: with(in(Running, 2), func(l *Lease) { l.State, l.Released, l.UpdatedAt = Completed, ResultCompleted, now })},
		{name: "completed from checkpointed", from: in(Checkpointed, 3), step: release(ResultCompleted, "", now), changed: true,
			want: with(in(Checkpointed, 3), func(l *Lease) { l.State, l.Released, l.UpdatedAt = Completed, ResultCompleted, now })},
		{name: "completed naming its attempt", from: in(Running, 2), step: releaseOf(2, ResultCompleted, "", now), changed: true,
			want: with(in(Running, 2), func(l *Lease) { l.State, l.Released, l.UpdatedAt = Completed, ResultCompleted, now })},
		{name: "failed with attempts left waits for the next", from: in(Running, 1), step: release(ResultFailed, "tests broke", now), changed: true,
			want: with(in(Running, 1), func(l *Lease) {
				l.State, l.Attempt, l.NextRetryAt, l.LocalLeaseID, l.Released, l.UpdatedAt = RetryWait, 2, now.Add(5*time.Second), "", ResultFailed, now
			})},
		{name: "failed on the last attempt stops", from: in(Running, 3), step: release(ResultFailed, "tests broke", now), changed: true,
			want: with(in(Running, 3), func(l *Lease) {
				l.State, l.StopReason, l.Released, l.UpdatedAt = Stopped, "failed: tests broke", ResultFailed, now
			})},
		{name: "blocked stops at once", from: in(Checkpointed, 1), step: release(ResultBlocked, "needs a human", now), changed: true,
			want: with(in(Checkpointed, 1), func(l *Lease) {
				l.State, l.StopReason, l.Released, l.UpdatedAt = Stopped, "blocked: needs a human", ResultBlocked, now
			})},
		{name: "blocked without a reason", from: in(Running, 1), step: release(ResultBlocked, "", now), code: errs.BadRequest},
		{name: "failed without a reason", from: in(Running, 1), step: release(ResultFailed, " ", now), code: errs.BadRequest},
		{name: "no result stated", from: in(Running, 1), step: release("", "", now), code: errs.BadRequest},
		{name: "a superseded attempt", from: in(Running, 2), step: releaseOf(1, ResultCompleted, "", now), code: errs.LeaseExpired},
		{name: "the attempt before, still offered, naming none", from: in(Offered, 2), step: release(ResultCompleted, "", now), code: errs.LeaseExpired},
		{name: "an attempt not offered yet", from: in(Running, 2), step: releaseOf(3, ResultCompleted, "", now), code: errs.BadRequest},
		{name: "offered: acknowledge first", from: in(Offered, 1), step: release(ResultCompleted, "", now), code: errs.LeaseState},
		{name: "completed", from: in(Completed, 1), step: release(ResultCompleted, "", now), code: errs.LeaseState},
		{name: "stopped", from: in(Stopped, 1), step: release(ResultFailed, "x", now), code: errs.LeaseState},
		{name: "in retry_wait", from: in(RetryWait, 2), step: release(ResultCompleted, "", now), code: errs.LeaseExpired},
		{name: "past the deadline", from: in(Running, 1), step: release(ResultCompleted, "", deadline), code: errs.LeaseExpired},
		{name: "an unknown result", from: in(Running, 1), step: release("done", "", now), code: errs.BadRequest},
		{name: "a reason on two lines", from: in(Running, 1), step: release(ResultFailed, "a\nb", now), code: errs.BadRequest},
		{name: "a reason too long", from: in(Running, 1), step: release(ResultFailed, strings.Repeat("x", MaxReason+1), now), code: errs.BadRequest},
	})
}

func TestExpire(t *testing.T) {
	late := deadline.Add(time.Second)
	retry := func(attempt int, wait time.Duration) func(*Lease) {
		return func(l *Lease) {
			l.State, l.Attempt, l.NextRetryAt, l.LocalLeaseID, l.UpdatedAt = RetryWait, attempt, late.Add(wait), "", late
		}
	}
	noRetry := timing
	noRetry.MaxRetries = 0
	noBackoff := timing
	noBackoff.Backoff = nil
	runCases(t, []transitionCase{
		{name: "not acknowledged: attempt 2 after the first backoff", from: in(Offered, 1), step: expire(late, timing), changed: true,
			want: with(in(Offered, 1), retry(2, 5*time.Second))},
		{name: "at exactly its deadline", from: in(Offered, 1), step: expire(deadline, timing), changed: true,
			want: with(in(Offered, 1), func(l *Lease) {
				l.State, l.Attempt, l.NextRetryAt, l.LocalLeaseID, l.UpdatedAt = RetryWait, 2, deadline.Add(5*time.Second), "", deadline
			})},
		{name: "acknowledged, not renewed", from: in(Acknowledged, 1), step: expire(late, timing), changed: true,
			want: with(in(Acknowledged, 1), retry(2, 5*time.Second))},
		{name: "running on attempt 2: the second backoff", from: in(Running, 2), step: expire(late, timing), changed: true,
			want: with(in(Running, 2), retry(3, 15*time.Second))},
		{name: "checkpointed", from: in(Checkpointed, 1), step: expire(late, timing), changed: true,
			want: with(in(Checkpointed, 1), retry(2, 5*time.Second))},
		{name: "the last attempt is exhausted", from: in(Running, 3), step: expire(late, timing), changed: true,
			want: with(in(Running, 3), func(l *Lease) { l.State, l.StopReason, l.UpdatedAt = Stopped, StopExhausted, late })},
		{name: "no retries: the first attempt is the last", from: with(in(Offered, 1), func(l *Lease) { l.MaxRetries = 0 }),
			step: expire(late, noRetry), changed: true,
			want: with(in(Offered, 1), func(l *Lease) { l.MaxRetries, l.State, l.StopReason, l.UpdatedAt = 0, Stopped, StopExhausted, late })},
		{name: "the lease's budget, not today's configuration", from: in(Offered, 1), step: expire(late, noRetry), changed: true,
			want: with(in(Offered, 1), retry(2, 5*time.Second))},
		{name: "beyond the backoff list: its last entry", from: with(in(Running, 5), func(l *Lease) { l.MaxRetries = 9 }),
			step: expire(late, timing), changed: true,
			want: with(in(Running, 5), func(l *Lease) { l.MaxRetries = 9; retry(6, time.Minute)(l) })},
		{name: "no backoff configured: due at once", from: in(Offered, 1), step: expire(late, noBackoff), changed: true,
			want: with(in(Offered, 1), retry(2, 0))},
		{name: "offered, its wake never answered: withdrawn, nothing spent", from: with(in(Offered, 2), func(l *Lease) { l.WakeOutcome, l.LocalLeaseID = "", "" }),
			step: expire(late, timing), changed: true,
			want: with(in(Offered, 2), func(l *Lease) {
				l.State, l.Attempt, l.MaxRetries, l.NextRetryAt, l.LocalLeaseID, l.WakeOutcome, l.UpdatedAt = RetryWait, 3, 3, late, "", "", late
			})},
		{name: "before its deadline", from: in(Running, 1), step: expire(deadline.Add(-time.Millisecond), timing), code: errs.Conflict},
		{name: "in retry_wait", from: in(RetryWait, 2), step: expire(late, timing), code: errs.LeaseState},
		{name: "completed", from: in(Completed, 1), step: expire(late, timing), code: errs.LeaseState},
		{name: "stopped", from: in(Stopped, 1), step: expire(late, timing), code: errs.LeaseState},
	})
}

func TestReoffer(t *testing.T) {
	due := at(2 * time.Minute) // in(RetryWait) is due then
	runCases(t, []transitionCase{
		{name: "due", from: in(RetryWait, 2), step: reoffer(due), changed: true,
			want: with(in(RetryWait, 2), func(l *Lease) {
				l.State, l.AcquiredAt, l.ExpiresAt, l.UpdatedAt = Offered, due, due.Add(30*time.Second), due
				l.NextRetryAt, l.WakeOutcome = time.Time{}, ""
			})},
		{name: "late", from: in(RetryWait, 3), step: reoffer(due.Add(time.Hour)), changed: true,
			want: with(in(RetryWait, 3), func(l *Lease) {
				l.State, l.AcquiredAt, l.ExpiresAt, l.UpdatedAt = Offered, due.Add(time.Hour), due.Add(time.Hour+30*time.Second), due.Add(time.Hour)
				l.NextRetryAt, l.WakeOutcome = time.Time{}, ""
			})},
		{name: "not due", from: in(RetryWait, 2), step: reoffer(due.Add(-time.Millisecond)), code: errs.Conflict},
		{name: "offered", from: in(Offered, 1), step: reoffer(due), code: errs.LeaseState},
		{name: "running", from: in(Running, 1), step: reoffer(due), code: errs.LeaseState},
		{name: "stopped", from: in(Stopped, 3), step: reoffer(due), code: errs.LeaseState},
	})
}

func TestWithdrawPostponeStop(t *testing.T) {
	now, until := at(10*time.Second), at(time.Hour)
	runCases(t, []transitionCase{
		// Issue 39: waiting never grows the attempt count or the budget.
		{name: "withdrawn: the same attempt is due later and costs nothing", from: in(Offered, 3),
			step: func(l Lease) (Lease, bool, error) { return l.Withdraw(now, until) }, changed: true,
			want: with(in(Offered, 3), func(l *Lease) {
				l.State, l.NextRetryAt, l.LocalLeaseID, l.WakeOutcome, l.UpdatedAt = RetryWait, until, "", "", now
			})},
		{name: "only an offered attempt is withdrawn", from: in(Running, 1),
			step: func(l Lease) (Lease, bool, error) { return l.Withdraw(now, until) }, code: errs.LeaseState},
		{name: "a held wake withdrawn: a new number, the budget grown with it", from: in(Offered, 2),
			step: func(l Lease) (Lease, bool, error) { return l.WithdrawHeld(now, until) }, changed: true,
			want: with(in(Offered, 2), func(l *Lease) {
				l.State, l.Attempt, l.MaxRetries, l.NextRetryAt, l.LocalLeaseID, l.WakeOutcome, l.UpdatedAt = RetryWait, 3, 3, until, "", "", now
			})},
		{name: "a wake never queued is not held", from: with(in(Offered, 1), func(l *Lease) { l.WakeOutcome = "" }),
			step: func(l Lease) (Lease, bool, error) { return l.WithdrawHeld(now, until) }, code: errs.LeaseState},
		{name: "held: the ack deadline starts again, nothing spent", from: in(Offered, 2),
			step: func(l Lease) (Lease, bool, error) { return l.Hold(now, until) }, changed: true,
			want: with(in(Offered, 2), func(l *Lease) { l.ExpiresAt, l.UpdatedAt = until, now })},
		{name: "held to an earlier deadline: no change", from: in(Offered, 2),
			step: func(l Lease) (Lease, bool, error) { return l.Hold(now, t0) }, want: in(Offered, 2)},
		{name: "an acknowledged attempt is not held", from: in(Acknowledged, 1),
			step: func(l Lease) (Lease, bool, error) { return l.Hold(now, until) }, code: errs.LeaseState},
		{name: "an unavailable wake is not held", from: with(in(Offered, 1), func(l *Lease) { l.WakeOutcome = WakeUnavailable }),
			step: func(l Lease) (Lease, bool, error) { return l.Hold(now, until) }, code: errs.LeaseState},
		{name: "postponed", from: in(RetryWait, 2),
			step: func(l Lease) (Lease, bool, error) { return l.Postpone(until, now) }, changed: true,
			want: with(in(RetryWait, 2), func(l *Lease) { l.NextRetryAt, l.UpdatedAt = until, now })},
		{name: "postponed to earlier: no change", from: in(RetryWait, 2),
			step: func(l Lease) (Lease, bool, error) { return l.Postpone(at(time.Minute), now) }, want: in(RetryWait, 2)},
		{name: "only a lease waiting for its next attempt is postponed", from: in(Offered, 1),
			step: func(l Lease) (Lease, bool, error) { return l.Postpone(until, now) }, code: errs.LeaseState},
		{name: "stopped from retry_wait", from: in(RetryWait, 2),
			step: func(l Lease) (Lease, bool, error) { return l.Stop("task_done", now) }, changed: true,
			want: with(in(RetryWait, 2), func(l *Lease) { l.State, l.StopReason, l.UpdatedAt = Stopped, "task_done", now })},
		{name: "a stopped lease stops no more", from: in(Stopped, 1),
			step: func(l Lease) (Lease, bool, error) { return l.Stop("x", now) }, code: errs.LeaseState},
	})
	if !Withdrawn(in(Offered, 1), with(in(Offered, 1), func(l *Lease) { l.MaxRetries++ })) || Withdrawn(in(Offered, 1), in(RetryWait, 2)) {
		t.Error("Withdrawn")
	}
}

func TestWoken(t *testing.T) {
	now := at(time.Second)
	fresh := with(in(Offered, 2), func(l *Lease) { l.LocalLeaseID, l.WakeOutcome, l.TamqEndpointID = "", "", "" })
	woken := func(attempt int, o WakeOutcome, msg, tamqEP, ceEP string) step {
		return func(l Lease) (Lease, bool, error) { return l.Woken(attempt, o, msg, tamqEP, ceEP, now) }
	}
	runCases(t, []transitionCase{
		{name: "resumed", from: fresh, step: woken(2, WakeResumed, "m2", "tmux-amq-2", "ce-2"), changed: true,
			want: with(fresh, func(l *Lease) {
				l.WakeOutcome, l.LocalLeaseID, l.TamqEndpointID, l.CoordinationEndpointID, l.UpdatedAt = WakeResumed, "m2", "tmux-amq-2", "ce-2", now
			})},
		{name: "unavailable stays offered", from: fresh, step: woken(2, WakeUnavailable, "", "tmux-amq-2", ""), changed: true,
			want: with(fresh, func(l *Lease) { l.WakeOutcome, l.TamqEndpointID, l.UpdatedAt = WakeUnavailable, "tmux-amq-2", now })},
		{name: "the agent acked before the answer was recorded", from: in(Acknowledged, 2), step: woken(2, WakeStarted, "m3", "", ""), changed: true,
			want: with(in(Acknowledged, 2), func(l *Lease) { l.WakeOutcome, l.LocalLeaseID, l.UpdatedAt = WakeStarted, "m3", now })},
		{name: "an answer for an earlier attempt", from: fresh, step: woken(1, WakeResumed, "m1", "", ""), want: fresh},
		{name: "an answer while waiting for the next attempt", from: in(RetryWait, 2), step: woken(2, WakeResumed, "m1", "", ""), want: in(RetryWait, 2)},
		{name: "an unknown capability", from: fresh, step: woken(2, "typed", "m1", "", ""), code: errs.BadRequest},
	})
}

func TestCheckpointTransition(t *testing.T) {
	now := at(20 * time.Second)
	c := Checkpoint{TaskID: "T-7", Summary: "did x", FilesChanged: []string{"a.go"}, NextAction: "do y"}
	for _, from := range []State{Acknowledged, Running, Checkpointed} {
		got, rec, err := in(from, 1).Checkpoint(c, now, timing, 0)
		if err != nil {
			t.Fatalf("from %s: %v", from, err)
		}
		want := with(in(from, 1), func(l *Lease) {
			l.State, l.LastCheckpointAt, l.ExpiresAt, l.UpdatedAt = Checkpointed, now, now.Add(held), now
		})
		if got != want {
			t.Errorf("from %s:\n%+v\nwant\n%+v", from, got, want)
		}
		if rec.LeaseID != "L1" || !rec.RecordedAt.Equal(now) || rec.Summary != "did x" || rec.BlockedReason != "" {
			t.Errorf("from %s: checkpoint %+v", from, rec)
		}
	}
	// A checkpoint with a blocked reason ends the lease as a release
	// blocked does: nothing offers the work again.
	blocked := c
	blocked.BlockedReason = BlockedHuman
	got, rec, err := in(Running, 2).Checkpoint(blocked, now, timing, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := with(in(Running, 2), func(l *Lease) {
		l.State, l.LastCheckpointAt, l.ExpiresAt, l.UpdatedAt = Stopped, now, now.Add(held), now
		l.StopReason, l.Released = "blocked: checkpoint: human", ResultBlocked
	})
	if got != want || rec.BlockedReason != BlockedHuman {
		t.Errorf("blocked checkpoint:\n%+v\nwant\n%+v", got, want)
	}
	refused := []struct {
		name string
		from Lease
		now  time.Time
		c    Checkpoint
		code errs.Code
	}{
		{"offered: acknowledge first", in(Offered, 1), now, c, errs.LeaseState},
		{"past the deadline", in(Running, 1), deadline, c, errs.LeaseExpired},
		{"in retry_wait", in(RetryWait, 2), now, c, errs.LeaseExpired},
		{"completed", in(Completed, 1), now, c, errs.LeaseState},
		{"stopped", in(Stopped, 1), now, c, errs.LeaseState},
		{"no summary", in(Running, 1), now, Checkpoint{Summary: " \n"}, errs.BadRequest},
		{"the attempt before, still offered", in(Offered, 2), now, c, errs.LeaseExpired},
	}
	for _, tt := range refused {
		got, _, err := tt.from.Checkpoint(tt.c, tt.now, timing, 0)
		if !errs.Is(err, tt.code) {
			t.Errorf("%s: got %v, want %s", tt.name, err, tt.code)
		}
		if got != tt.from {
			t.Errorf("%s: the lease changed", tt.name)
		}
	}
}

func TestCheckpointCheck(t *testing.T) {
	files := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "f.go"
		}
		return out
	}
	ok := []Checkpoint{
		{Summary: "did x"},
		{Summary: "two\nlines\tand a tab", NextAction: "then\ny"},
		{Summary: strings.Repeat("é", MaxSummary/2)}, // exactly 4 KiB of UTF-8
		{Summary: "s", FilesChanged: files(MaxFiles)},
		{Summary: "s", BlockedReason: BlockedHuman, TaskID: "T-1"},
	}
	for _, c := range ok {
		if err := c.Check(); err != nil {
			t.Errorf("%.40q: %v", c.Summary, err)
		}
	}
	bad := []struct {
		name string
		c    Checkpoint
	}{
		{"empty summary", Checkpoint{}},
		{"blank summary", Checkpoint{Summary: " \t\n"}},
		{"summary over 4 KiB", Checkpoint{Summary: strings.Repeat("x", MaxSummary+1)}},
		{"summary not UTF-8", Checkpoint{Summary: "bad \xff"}},
		{"summary with an escape", Checkpoint{Summary: "paste \x1b[201~ end"}},
		{"summary with a carriage return", Checkpoint{Summary: "a\rb"}},
		{"too many files", Checkpoint{Summary: "s", FilesChanged: files(MaxFiles + 1)}},
		{"an empty file name", Checkpoint{Summary: "s", FilesChanged: []string{""}}},
		{"a file name on two lines", Checkpoint{Summary: "s", FilesChanged: []string{"a\nb"}}},
		{"an unknown blocked reason", Checkpoint{Summary: "s", BlockedReason: "bored"}},
		{"a task id with a tab", Checkpoint{Summary: "s", TaskID: "T\t1"}},
		{"next action with C1", Checkpoint{Summary: "s", NextAction: "x\u0085"}},
	}
	for _, tt := range bad {
		if err := tt.c.Check(); !errs.Is(err, errs.BadRequest) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestTriggerCheck(t *testing.T) {
	good := Trigger{Source: SourceTask, SourceID: "T-1", SourceRevision: "3", TargetRepo: "net", Reason: TaskActionable}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Trigger){
		"unknown source":   func(tr *Trigger) { tr.Source = "email" },
		"unknown reason":   func(tr *Trigger) { tr.Reason = "bored" },
		"no source id":     func(tr *Trigger) { tr.SourceID = "" },
		"no revision":      func(tr *Trigger) { tr.SourceRevision = "" },
		"no repo":          func(tr *Trigger) { tr.TargetRepo = "" },
		"agent on 2 lines": func(tr *Trigger) { tr.TargetAgent = "a\nb" },
		"long task id":     func(tr *Trigger) { tr.TaskID = strings.Repeat("x", MaxID+1) },
	} {
		tr := good
		f(&tr)
		if err := tr.Check(); !errs.Is(err, errs.BadRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestOffer(t *testing.T) {
	tr := Trigger{ID: "T1", TargetRepo: "net", TargetAgent: "codex", State: TriggerPending}
	l, err := Offer(tr, "L1", t0, timing)
	if err != nil {
		t.Fatal(err)
	}
	want := Lease{ID: "L1", TriggerID: "T1", Owner: Owner, TargetRepo: "net", TargetAgent: "codex", State: Offered,
		Attempt: 1, MaxRetries: 2, AcquiredAt: t0, ExpiresAt: at(30 * time.Second), UpdatedAt: t0}
	if l != want {
		t.Errorf("got\n%+v\nwant\n%+v", l, want)
	}
	for _, s := range []TriggerState{TriggerLeased, TriggerGated, TriggerStopped} {
		tr.State = s
		if _, err := Offer(tr, "L2", t0, timing); err != nil {
			t.Errorf("a %s trigger: %v", s, err)
		}
	}
	for _, s := range []TriggerState{TriggerCompleted, TriggerSuperseded} {
		tr.State = s
		if _, err := Offer(tr, "L2", t0, timing); !errs.Is(err, errs.Conflict) {
			t.Errorf("a %s trigger: %v", s, err)
		}
	}
}

// TestAttempts follows a lease no agent ever answers through all its
// attempts: offered 1+MaxRetries times, then stopped.
func TestAttempts(t *testing.T) {
	for _, maxAttempts := range []int{0, 1, 2, 5} {
		tm := timing
		tm.MaxRetries = maxAttempts
		now := t0
		l, err := Offer(Trigger{ID: "T1", TargetRepo: "net"}, "L1", now, tm)
		if err != nil {
			t.Fatal(err)
		}
		offers := 1
		for l.State != Stopped {
			l.WakeOutcome = WakeResumed // tamq took every wake
			if l.Due(l.ExpiresAt.Add(-time.Millisecond)) || !l.Due(l.ExpiresAt) {
				t.Fatalf("attempt %d: due is wrong around %v", l.Attempt, l.ExpiresAt)
			}
			now = l.ExpiresAt
			if l, _, err = l.Expire(now, tm); err != nil {
				t.Fatal(err)
			}
			if l.State == Stopped {
				break
			}
			if want := now.Add(tm.backoff(l.Attempt - 1)); !l.NextRetryAt.Equal(want) {
				t.Errorf("attempt %d due %v, want %v", l.Attempt, l.NextRetryAt, want)
			}
			if !l.Due(l.NextRetryAt) || l.Due(l.NextRetryAt.Add(-time.Millisecond)) {
				t.Fatalf("attempt %d: due is wrong around %v", l.Attempt, l.NextRetryAt)
			}
			now = l.NextRetryAt
			if l, _, err = l.Reoffer(now, tm); err != nil {
				t.Fatal(err)
			}
			offers++
		}
		if offers != 1+maxAttempts || l.Attempt != 1+maxAttempts || l.StopReason != StopExhausted || l.Due(now.Add(time.Hour)) {
			t.Errorf("max_attempts %d: %d offers, ended %+v", maxAttempts, offers, l)
		}
	}
}

func TestStates(t *testing.T) {
	live := map[State]bool{Offered: true, Acknowledged: true, Running: true, Checkpointed: true, RetryWait: true}
	for _, s := range States {
		if s.Live() != live[s] {
			t.Errorf("%s.Live() = %v", s, s.Live())
		}
	}
	if ReleaseReason(ResultCompleted, "merged") != "merged" || ReleaseReason(ResultFailed, "") != "failed" ||
		ReleaseReason(ResultBlocked, "human") != "blocked: human" {
		t.Error("ReleaseReason")
	}
	if ExpiryReason(Offered) == ExpiryReason(Running) {
		t.Error("ExpiryReason does not tell an ack timeout from a missed renewal")
	}
	ep := Endpoint{Windows: []Window{{Repo: "net"}}}
	if !ep.Hosts("net") || ep.Hosts("railiance") {
		t.Error("Hosts")
	}
}

// A request names the offered attempt only with its prompt in hand: that
// takes the attempt up. One that names none, or another attempt, or a lease
// not offered, does not.
func TestTakesUp(t *testing.T) {
	offered2 := Lease{State: Offered, Attempt: 2}
	for _, c := range []struct {
		l       Lease
		attempt int
		want    bool
	}{
		{offered2, 2, true}, {offered2, 0, false}, {offered2, 1, false},
		{Lease{State: Acknowledged, Attempt: 2}, 2, false}, {Lease{State: RetryWait, Attempt: 2}, 2, false},
	} {
		if got := c.l.TakesUp(c.attempt); got != c.want {
			t.Errorf("%s attempt %d, request of attempt %d: %v", c.l.State, c.l.Attempt, c.attempt, got)
		}
	}
}
