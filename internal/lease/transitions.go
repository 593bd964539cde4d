package lease

import (
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The lease rules. Each transition is a pure function of the lease, the time
// and the Timing: it returns the new lease and whether anything changed, or
// an *errs.Error (the lease unchanged). The rules:
//
//   - Attempts. A lease is offered at most 1+MaxRetries times: the first
//     attempt plus MaxRetries retries (MaxRetries 0: no retry), as tamq's
//     max_attempts counts redeliveries. The retry keeps the lease id.
//   - Offer. A new lease is offered as attempt 1; expires_at (its ack
//     deadline) is offered_at + AckTimeout.
//   - Deadline. Once now reaches expires_at, the attempt is over for the
//     agent, swept or not: ack, renew, checkpoint and release are refused
//     with lease_expired, so the answer never depends on when the sweep ran.
//   - Which attempt. An agent's request may name its attempt (the prompt's
//     commands do). A request of an attempt older than the current one is
//     refused with lease_expired: a newer attempt was offered, and its
//     prompt is the one to follow. A request that names none and would
//     renew, checkpoint or release an attempt after the first that is still
//     only offered can only come from the attempt before: refused the same
//     way (an ack that names none acknowledges the current attempt).
//   - Ack (offered → acknowledged): expires_at = now + RenewInterval ×
//     MissedRenewals. Acking an acknowledged, running or checkpointed lease
//     again changes nothing and succeeds (agents may repeat). A lease in
//     retry_wait or past its deadline: lease_expired (a new attempt will wake
//     the agent); completed or stopped: lease_state.
//   - Renew: acknowledged → running; running and checkpointed stay; expires_at
//     = now + RenewInterval × MissedRenewals. An offered lease: lease_state
//     (acknowledge it first), unless the request names the current attempt
//     (TakesUp).
//   - Taken up: a renewal, checkpoint or release that names the offered
//     attempt (the prompt's commands do) shows the agent has that attempt's
//     prompt and works on it: the lease is acknowledged first, by that
//     request's caller, as if it had acked. tamq's broker acknowledges for
//     the agent once it sees it take the prompt; a quick agent may run its
//     first command before that, and is not refused for it.
//   - Checkpoint: acknowledged, running or checkpointed → checkpointed;
//     last_checkpoint_at = now and expires_at extended as by a renewal. The
//     checkpoint must pass Checkpoint.Check. A checkpoint with a blocked
//     reason ends the lease at once as a release blocked does: the agent
//     stopped for someone else, and nothing offers the work again.
//   - Release: the result is required; failed and blocked need a reason.
//     Completed: acknowledged, running or checkpointed → completed. Failed:
//     ends the attempt as an expiry does (retry_wait, or stopped when the
//     attempts are used up), with reason "failed: <reason>". Blocked: stopped
//     with "blocked: <reason>", never retried. An offered lease: lease_state
//     (acknowledge it first), unless taken up. Released records the result.
//   - Expire: an offered, acknowledged, running or checkpointed lease whose
//     expires_at has come ends its attempt n. An offered attempt whose wake
//     never reached tamq (no answer) is withdrawn: it waits in retry_wait as
//     the next attempt, due at once, and costs nothing of the budget (the
//     agent never saw it; the next attempt gets a wake of its own). Otherwise,
//     if n < 1+MaxRetries it waits in retry_wait as attempt n+1,
//     next_retry_at = now + Backoff[min(n-1, len-1)], with tamq's message id
//     of the old wake cleared; else it is stopped, "exhausted".
//   - Withdraw: tamq answered that no window can take the wake (and queued
//     nothing): the offered attempt is withdrawn at once and offered again,
//     under the same number, when the caller says (a window may open
//     first): waiting never grows the attempt count or the budget.
//   - Held wakes. At the ack deadline of an attempt whose wake tamq queued,
//     the engine asks tamq whether it was ever written. One tamq holds
//     unwritten behind a dialog or a window without an agent was never
//     delivered: Hold starts its ack deadline again, and it goes in when
//     the cause clears. One held where nothing will write it (its endpoint
//     gone or forgotten) is withdrawn (WithdrawHeld), as above, under a new
//     number, and its next attempt routed afresh.
//   - Reoffer: a retry_wait lease whose next_retry_at has come is offered
//     again: acquired_at = now, expires_at = now + AckTimeout, next_retry_at
//     and the wake outcome cleared (the new attempt gets its own wake).
//     Postpone moves a due next_retry_at on while the attempt cannot be
//     offered yet (no window for the repo).
//   - Stop: any live lease is stopped for good with a reason (a gate closed,
//     the task was done or cancelled in State Hub).
//   - Completed and stopped are final: every transition from them is
//     refused with lease_state.

// StopExhausted is the stop reason of a lease whose attempts are used up.
const StopExhausted = "exhausted"

// MaxReason bounds a release reason, in bytes: it is kept in receipts.
const MaxReason = 200

// Offer starts a lease for a trigger: attempt 1, offered until the ack
// deadline. A trigger that completed or was superseded takes no lease.
func Offer(tr Trigger, id string, now time.Time, t Timing) (Lease, error) {
	if tr.State == TriggerCompleted || tr.State == TriggerSuperseded {
		return Lease{}, errs.New(errs.Conflict, "trigger %s is %s; it takes no new lease", tr.ID, tr.State)
	}
	return Lease{
		ID: id, TriggerID: tr.ID, Owner: Owner, TargetRepo: tr.TargetRepo, TargetAgent: tr.TargetAgent,
		State: Offered, Attempt: 1, MaxRetries: max(t.MaxRetries, 0),
		AcquiredAt: now, ExpiresAt: now.Add(t.AckTimeout), UpdatedAt: now,
	}, nil
}

func stateError(l Lease, action, hint string) error {
	e := errs.New(errs.LeaseState, "lease %s is %s; cannot %s", l.ID, l.State, action)
	if hint != "" {
		e = e.WithHint("%s", hint)
	}
	return e
}

// endedError refuses a request of the agent on an attempt that has ended.
func endedError(l Lease) error {
	if l.State == RetryWait {
		return errs.New(errs.LeaseExpired, "lease %s expired; attempt %d is due at %s", l.ID, l.Attempt, l.NextRetryAt.Format(time.RFC3339)).
			WithHint("stop working on it: a new attempt will wake the agent")
	}
	return errs.New(errs.LeaseExpired, "lease %s expired at %s", l.ID, l.ExpiresAt.Format(time.RFC3339)).
		WithHint("stop working on it: a new attempt will wake the agent")
}

// supersededError refuses a request of an attempt after a newer one was
// offered.
func supersededError(l Lease, attempt int) error {
	return errs.New(errs.LeaseExpired, "attempt %d of lease %s is over: attempt %d was offered at %s", attempt, l.ID, l.Attempt, l.AcquiredAt.Format(time.RFC3339)).
		WithHint("stop working on attempt %d; follow the prompt of attempt %d", attempt, l.Attempt)
}

// agentCheck is what every request of the agent (ack, renew, checkpoint,
// release) checks first: the lease is not final, the request is of its
// current attempt (attempt, 0 when the request names none), and that
// attempt has not ended.
func (l Lease) agentCheck(now time.Time, action string, attempt int) error {
	switch {
	case !l.State.Live():
		return stateError(l, action, "")
	case attempt < 0 || attempt > l.Attempt:
		return errs.New(errs.BadRequest, "lease %s has no attempt %d (it is at attempt %d)", l.ID, attempt, l.Attempt)
	case attempt > 0 && attempt < l.Attempt:
		return supersededError(l, attempt)
	case attempt == 0 && action != actionAck && l.State == Offered && l.Attempt > 1:
		return supersededError(l, l.Attempt-1)
	case l.State == RetryWait, !now.Before(l.ExpiresAt):
		return endedError(l)
	}
	return nil
}

// The agent's requests, as agentCheck names them.
const (
	actionAck        = "acknowledge it"
	actionRenew      = "renew it"
	actionCheckpoint = "checkpoint it"
	actionRelease    = "release it"
)

// Ack records the agent's acknowledgement of an offered lease; attempt is
// the attempt the request names (0: none).
func (l Lease) Ack(now time.Time, t Timing, attempt int) (Lease, bool, error) {
	if err := l.agentCheck(now, actionAck, attempt); err != nil {
		return l, false, err
	}
	if l.State != Offered {
		return l, false, nil // a repeated ack
	}
	l.State, l.ExpiresAt, l.UpdatedAt = Acknowledged, now.Add(t.HoldFor()), now
	return l, true, nil
}

// TakesUp says whether a request of the agent's naming attempt (0: none)
// acknowledges the lease before it acts: the lease is offered, and the
// request names that very attempt, which only its prompt gives.
func (l Lease) TakesUp(attempt int) bool {
	return l.State == Offered && attempt > 0 && attempt == l.Attempt
}

// Renew extends a held lease; the first renewal marks it running.
func (l Lease) Renew(now time.Time, t Timing, attempt int) (Lease, bool, error) {
	if err := l.agentCheck(now, actionRenew, attempt); err != nil {
		return l, false, err
	}
	if l.State == Offered {
		return l, false, stateError(l, actionRenew, "acknowledge it first")
	}
	if l.State == Acknowledged {
		l.State = Running
	}
	l.ExpiresAt, l.UpdatedAt = now.Add(t.HoldFor()), now
	return l, true, nil
}

// Checkpoint records c on a held lease and returns it stamped with the
// lease and the time. A checkpoint with a blocked reason stops the lease
// (blocked) in the same step.
func (l Lease) Checkpoint(c Checkpoint, now time.Time, t Timing, attempt int) (Lease, Checkpoint, error) {
	if err := l.agentCheck(now, actionCheckpoint, attempt); err != nil {
		return l, c, err
	}
	if l.State == Offered {
		return l, c, stateError(l, actionCheckpoint, "acknowledge it first")
	}
	if err := c.Check(); err != nil {
		return l, c, err
	}
	c.LeaseID, c.RecordedAt = l.ID, now
	l.State, l.LastCheckpointAt = Checkpointed, now
	l.ExpiresAt, l.UpdatedAt = now.Add(t.HoldFor()), now
	if c.BlockedReason != "" {
		l.State, l.StopReason, l.Released = Stopped, ReleaseReason(ResultBlocked, "checkpoint: "+string(c.BlockedReason)), ResultBlocked
	}
	return l, c, nil
}

// ReleaseReason is how a release is recorded: "failed: <reason>",
// "blocked: <reason>" (the result alone without a reason), or the reason of
// a completion.
func ReleaseReason(result Result, reason string) string {
	if result == ResultCompleted {
		return reason
	}
	if reason == "" {
		return string(result)
	}
	return string(result) + ": " + reason
}

// Release ends the agent's attempt with its result.
func (l Lease) Release(result Result, reason string, now time.Time, t Timing, attempt int) (Lease, bool, error) {
	if err := CheckRelease(result, reason); err != nil {
		return l, false, err
	}
	if err := l.agentCheck(now, actionRelease, attempt); err != nil {
		return l, false, err
	}
	if l.State == Offered {
		return l, false, stateError(l, actionRelease, "acknowledge it first")
	}
	l.UpdatedAt, l.Released = now, result
	switch result {
	case ResultCompleted:
		l.State = Completed
	case ResultBlocked:
		l.State, l.StopReason = Stopped, ReleaseReason(result, reason)
	default:
		l.endAttempt(now, t, ReleaseReason(result, reason))
	}
	return l, true, nil
}

// CheckRelease holds a release to its rules: a known result, stated; a
// reason for failed and blocked; a reason of one line that fits a receipt.
func CheckRelease(result Result, reason string) error {
	if !slices.Contains(Results, result) {
		return errs.New(errs.BadRequest, "release result %q is not one of completed, failed, blocked", result).
			WithHint("say how the work ended: --result completed, failed or blocked")
	}
	if err := checkText("release reason", reason, MaxReason, false); err != nil {
		return err
	}
	if result != ResultCompleted && !hasText(reason) {
		return errs.New(errs.BadRequest, "a release %s needs a reason", result).WithHint("say why with --reason (no secrets)")
	}
	return nil
}

// Stop ends a live lease for good with reason (a gate closed on it, its
// task was done or cancelled in State Hub): no further attempt.
func (l Lease) Stop(reason string, now time.Time) (Lease, bool, error) {
	if !l.State.Live() {
		return l, false, stateError(l, "stop it", "")
	}
	l.State, l.StopReason, l.UpdatedAt = Stopped, reason, now
	return l, true, nil
}

// Expire ends an attempt whose deadline has come.
func (l Lease) Expire(now time.Time, t Timing) (Lease, bool, error) {
	if !l.State.held() && l.State != Offered {
		return l, false, stateError(l, "expire it", "")
	}
	if now.Before(l.ExpiresAt) {
		return l, false, errs.New(errs.Conflict, "lease %s does not expire until %s", l.ID, l.ExpiresAt.Format(time.RFC3339))
	}
	l.UpdatedAt = now
	if l.State == Offered && l.WakeOutcome == "" {
		l.withdraw(now, true) // tamq may have queued it, its answer lost
		return l, true, nil
	}
	l.endAttempt(now, t, StopExhausted)
	return l, true, nil
}

// endAttempt moves on to the next attempt after the backoff, or stops the
// lease with stopReason when it has made 1+MaxRetries.
func (l *Lease) endAttempt(now time.Time, t Timing, stopReason string) {
	if l.Attempt >= 1+l.MaxRetries {
		l.State, l.StopReason = Stopped, stopReason
		return
	}
	l.State, l.NextRetryAt = RetryWait, now.Add(t.backoff(l.Attempt))
	l.Attempt++
	l.LocalLeaseID = ""
	l.AckedBy, l.AckedAt = "", time.Time{} // the next attempt is to be acknowledged anew
}

// Withdraw takes back an offered attempt whose wake no window could take
// (tamq answered unavailable, and queued nothing): it costs nothing, and the
// same attempt is offered again when it is due at until (it is judged again
// then, or when a window opens). Its number stays: tamq holds nothing under
// it, and a wait that lasts never grows the attempt count or the budget.
func (l Lease) Withdraw(now, until time.Time) (Lease, bool, error) {
	if l.State != Offered {
		return l, false, stateError(l, "withdraw its attempt (only an offered one can be)", "")
	}
	l.UpdatedAt = now
	l.withdraw(until, false)
	return l, true, nil
}

// WithdrawHeld takes back an offered attempt whose wake tamq queued but
// never wrote, and that waits where nothing will write it (its endpoint is
// gone or forgotten): it costs nothing, and the next attempt, due at until,
// is routed afresh (the repo's live window, or it waits for one).
func (l Lease) WithdrawHeld(now, until time.Time) (Lease, bool, error) {
	if l.State != Offered || l.WakeOutcome == "" || l.WakeOutcome == WakeUnavailable {
		return l, false, stateError(l, "withdraw its held wake (only an offered attempt whose wake tamq queued can be)", "")
	}
	l.UpdatedAt = now
	l.withdraw(until, true)
	return l, true, nil
}

// withdraw moves on to the next attempt, due at due, without spending the
// budget. rekey: tamq holds (or may hold) a message under the attempt's
// number, which is the wake's key there, so the next one must differ, and
// the budget grows with it; otherwise the attempt is offered again as it is.
func (l *Lease) withdraw(due time.Time, rekey bool) {
	l.State, l.NextRetryAt = RetryWait, due
	if rekey {
		l.Attempt++
		l.MaxRetries++
	}
	l.LocalLeaseID, l.WakeOutcome = "", ""
	l.AckedBy, l.AckedAt = "", time.Time{}
}

// Hold keeps an offered attempt whose wake tamq holds unwritten (its
// window shows a dialog, or runs no agent) from running out: its ack
// deadline starts again at until. The agent never saw the prompt, so the
// wait costs no attempt; the wake goes in when the cause clears.
func (l Lease) Hold(now, until time.Time) (Lease, bool, error) {
	if l.State != Offered || l.WakeOutcome == "" || l.WakeOutcome == WakeUnavailable {
		return l, false, stateError(l, "hold its wake (only an offered attempt whose wake tamq queued can be)", "")
	}
	if !until.After(l.ExpiresAt) {
		return l, false, nil
	}
	l.ExpiresAt, l.UpdatedAt = until, now
	return l, true, nil
}

// Withdrawn reports whether the move from -> l withdrew an attempt.
func Withdrawn(from, l Lease) bool { return l.MaxRetries > from.MaxRetries }

// Reoffer offers a lease waiting in retry_wait again, as its next attempt.
func (l Lease) Reoffer(now time.Time, t Timing) (Lease, bool, error) {
	if l.State != RetryWait {
		return l, false, stateError(l, "offer it again (only a lease in retry_wait can be)", "")
	}
	if now.Before(l.NextRetryAt) {
		return l, false, errs.New(errs.Conflict, "lease %s is not due for attempt %d until %s", l.ID, l.Attempt, l.NextRetryAt.Format(time.RFC3339))
	}
	l.State, l.AcquiredAt, l.ExpiresAt, l.UpdatedAt = Offered, now, now.Add(t.AckTimeout), now
	l.NextRetryAt, l.WakeOutcome, l.LocalLeaseID = time.Time{}, "", ""
	return l, true, nil
}

// Postpone moves the next attempt of a lease in retry_wait to until: it
// cannot be offered yet, and is judged again then (or sooner, when a window
// opens).
func (l Lease) Postpone(until, now time.Time) (Lease, bool, error) {
	if l.State != RetryWait {
		return l, false, stateError(l, "postpone its next attempt", "")
	}
	if !until.After(l.NextRetryAt) {
		return l, false, nil
	}
	l.NextRetryAt, l.UpdatedAt = until, now
	return l, true, nil
}

// Woken records tamq's answer to the wake of an attempt: its outcome, its
// message id and the endpoint that took it. The answer for an attempt that
// is no longer the current one changes nothing: the lease moved on.
func (l Lease) Woken(attempt int, outcome WakeOutcome, messageID, tamqEndpointID, coordinationEndpointID string, now time.Time) (Lease, bool, error) {
	if !slices.Contains(WakeOutcomes, outcome) {
		return l, false, errs.New(errs.BadRequest, "unknown wake capability %q; want resumed, started or unavailable", outcome)
	}
	if attempt != l.Attempt || l.State == RetryWait {
		return l, false, nil
	}
	l.WakeOutcome, l.LocalLeaseID, l.UpdatedAt = outcome, messageID, now
	if tamqEndpointID != "" {
		l.TamqEndpointID = tamqEndpointID
	}
	if coordinationEndpointID != "" {
		l.CoordinationEndpointID = coordinationEndpointID
	}
	return l, true, nil
}

// Due reports whether the lease has something due at now: its deadline
// (a live lease not in retry_wait) or its next attempt (retry_wait).
func (l Lease) Due(now time.Time) bool {
	switch {
	case l.State == RetryWait:
		return !now.Before(l.NextRetryAt)
	case l.State.Live():
		return !now.Before(l.ExpiresAt)
	}
	return false
}

// ExpiryReason says, for receipts, how an attempt in state from ran out.
func ExpiryReason(from State) string {
	if from == Offered {
		return "not acknowledged in time"
	}
	return "not renewed in time"
}
