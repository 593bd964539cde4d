package service

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// triggerStory is what the database holds of one trigger about the task:
// the trigger, its leases, and its receipts oldest first (a lease's
// receipts name its trigger, so they are among them).
type triggerStory struct {
	t  lease.Trigger
	ls []lease.Lease
	rs []receipt.Receipt
}

// timelineEvent is an entry with its place among those of one instant: the
// receipt's id, so what one transaction wrote keeps its order.
type timelineEvent struct {
	e   api.TimelineEntry
	seq int64
}

// summaryInText bounds a checkpoint's summary in the one line of text (the
// entry's Summary field has it whole): a timeline is read at a glance.
const summaryInText = 160

// timeline tells the task's story from the engine's receipts, triggers,
// leases and checkpoints, and from the last observation (res, when the
// engine runs): oldest first, each entry with its time. Nothing is made up
// that the database does not hold: renewals after the first leave no
// receipt, so only the first and (while the lease lives) the latest are told.
func timeline(ctx context.Context, st *store.Store, res api.ExplainResult, stories []triggerStory) ([]api.TimelineEntry, error) {
	var evs []timelineEvent
	for _, s := range stories {
		manual := api.WokenBy(s.t) == "operator"
		leases := map[string]lease.Lease{}
		checkpoints := map[string][]lease.Checkpoint{}
		for _, l := range s.ls {
			leases[l.ID] = l
			cps, err := st.Checkpoints.CheckpointsOfLease(ctx, l.ID)
			if err != nil {
				return nil, err
			}
			checkpoints[l.ID] = cps
		}
		if !slices.ContainsFunc(s.rs, func(r receipt.Receipt) bool { return r.Kind == store.KindTriggerObserved }) {
			// Its receipt was purged: the trigger itself still says when it
			// was observed.
			evs = append(evs, timelineEvent{e: judgedEntry(s.t, s.t.ObservedAt, s.t.SourceRevision), seq: -1})
		}
		for _, r := range s.rs {
			e, ok := receiptEntry(s.t, leases[r.LeaseID], r, checkpoints[r.LeaseID])
			if !ok {
				continue
			}
			e.Manual = manual
			evs = append(evs, timelineEvent{e: e, seq: r.ID})
		}
		for _, l := range s.ls {
			if e, ok := lastRenewal(l, s.rs); ok {
				e.Manual = manual
				evs = append(evs, timelineEvent{e: e, seq: math.MaxInt64})
			}
		}
	}
	if res.ObservedAt != nil {
		// First among what happened in the same millisecond: the look
		// began before what it judged was recorded.
		evs = append(evs, timelineEvent{e: observedEntry(res), seq: math.MinInt64})
	}
	// Receipts keep milliseconds and the look's time has more: compared
	// whole, a look in the millisecond of its own judging sorted after it.
	slices.SortStableFunc(evs, func(a, b timelineEvent) int {
		return cmp.Or(a.e.At.Truncate(time.Millisecond).Compare(b.e.At.Truncate(time.Millisecond)), cmp.Compare(a.seq, b.seq))
	})
	out := make([]api.TimelineEntry, 0, len(evs))
	for _, ev := range evs {
		ev.e.At = ev.e.At.UTC()
		out = append(out, ev.e)
	}
	return out, nil
}

// observedEntry is the last look at State Hub: the task as it was then, or
// that it was not there.
func observedEntry(res api.ExplainResult) api.TimelineEntry {
	e := api.TimelineEntry{At: *res.ObservedAt, Kind: api.TimelineObserved}
	if !res.Observed {
		e.Text = "last observed State Hub: it has no task " + res.Task
		return e
	}
	e.Status, e.Revision, e.Gate = res.Status, res.Revision, res.Gate
	e.Text = fmt.Sprintf("last observed in State Hub: %s, revision %s", res.Status, res.Revision)
	if !res.Actionable && res.Waiting != "" {
		e.Text += "; not actionable: " + res.Waiting
	}
	if res.Gate != "" {
		e.Text += "; gate " + res.Gate + why(res.GateReason)
	}
	if res.Skipped != "" {
		e.Text += "; skipped by the engine: " + res.Skipped
	}
	return e
}

// judgedEntry is a trigger's creation: the operator's wake, or what State
// Hub showed.
func judgedEntry(t lease.Trigger, at time.Time, revision string) api.TimelineEntry {
	e := api.TimelineEntry{At: at, Kind: api.TimelineJudged, TriggerID: t.ID, Reason: string(t.Reason), Revision: revision}
	if api.WokenBy(t) == "operator" {
		e.Kind, e.By, e.Revision = api.TimelineManualWake, lease.ByOperator, ""
		e.Text = fmt.Sprintf("manual wake by the operator (coordination-engine wake): trigger %s for %s", t.ID, t.TargetRepo)
		return e
	}
	e.Text = fmt.Sprintf("judged %s (%s revision %s): trigger %s for %s", t.Reason, t.Source, revision, t.ID, t.TargetRepo)
	return e
}

// receiptEntry is the timeline entry of one receipt about the task, false
// for receipts that tell nothing of its story. l is the receipt's lease
// (zero for a trigger's receipt), cps its checkpoints.
func receiptEntry(t lease.Trigger, l lease.Lease, r receipt.Receipt, cps []lease.Checkpoint) (api.TimelineEntry, bool) {
	str := func(k string) string { s, _ := r.Detail[k].(string); return s }
	num := func(k string) int { f, _ := r.Detail[k].(float64); return int(f) }
	e := api.TimelineEntry{At: r.At, TriggerID: r.TriggerID, LeaseID: r.LeaseID, Attempt: r.Attempt, Reason: r.Reason,
		By: str("by"), ByRepo: str("by_repo"), Result: str("result"), Gate: str("gate")}
	if l.ID != "" {
		e.MaxAttempts = l.Attempts() // as the lease says it: every attempt, the first and its retries
	}
	if !r.NextRetryAt.IsZero() {
		until := r.NextRetryAt.UTC()
		e.Until = &until
	}
	by := ""
	if w := whoText(e.By, e.ByRepo); w != "" {
		by = " by " + w
	}
	switch r.Kind {
	case store.KindTriggerObserved:
		j := judgedEntry(t, r.At, cmp.Or(str("source_revision"), t.SourceRevision))
		return j, true
	case store.KindGateOverridden:
		// Its reason says who went through which gate.
		e.Kind, e.Gate, e.Text = api.TimelineGateOverridden, r.Status, r.Reason
	case store.KindTriggerGated:
		e.Kind, e.Text = api.TimelineGated, "held at gate "+r.Reason
		if e.Until != nil {
			e.Text += "; checked again at " + e.Until.Format(time.RFC3339)
		}
	case store.KindTriggerStopped:
		e.Kind, e.Text = api.TimelineStopped, "stopped at gate "+r.Reason+"; no lease, no wake"
	case store.KindTriggerWaiting:
		e.Kind, e.Text = api.TimelineWaiting, "waiting"+why(r.Reason)
		if d := str("waiting"); d != "" {
			e.Text = "waiting: " + d + why(r.Reason)
		}
	case store.KindTriggerSuperseded:
		e.Kind, e.Text = api.TimelineSuperseded, "trigger "+r.TriggerID+" superseded"
		if r.Reason != "" {
			e.Text += ": " + r.Reason
		}
	case store.KindLeaseOffered:
		e.Kind, e.Text = api.TimelineLeased, fmt.Sprintf("lease %s offered for %s, attempt %d of %d", r.LeaseID, str("target_repo"), r.Attempt, e.MaxAttempts)
	case store.KindLeaseReoffered:
		e.Kind, e.Text = api.TimelineLeased, fmt.Sprintf("lease %s offered again%s, attempt %d of %d", r.LeaseID, why(r.Reason), r.Attempt, e.MaxAttempts)
	case store.KindWakeSent:
		e.Kind, e.Status, e.MessageID = api.TimelineWoken, r.Status, r.LocalMessageID
		if r.Status == string(lease.WakeUnavailable) {
			e.Text = fmt.Sprintf("wake of attempt %d: tamq has no window to take it%s", r.Attempt, why(r.Reason))
		} else {
			// The wire word ("resumed") alone reads as resumed from a
			// checkpoint: the text says what it means.
			e.Text = fmt.Sprintf("wake of attempt %d sent: tamq message %s (%s)", r.Attempt, r.LocalMessageID, wakeMeaning(r.Status))
		}
		if stale, _ := r.Detail["stale"].(bool); stale {
			e.Text += "; the lease had moved on"
		}
	case store.KindWakeFailed:
		e.Kind, e.Text = api.TimelineWakeFailed, fmt.Sprintf("wake of attempt %d failed: %s", r.Attempt, r.Reason)
	case store.KindLeaseAcknowledged:
		e.Kind, e.Text = api.TimelineAcked, fmt.Sprintf("lease %s acknowledged%s, attempt %d", r.LeaseID, by, r.Attempt)
	case store.KindLeaseRunning:
		e.Kind, e.Text = api.TimelineRenewed, fmt.Sprintf("lease %s renewed%s: the first renewal (later ones leave no receipt)", r.LeaseID, by)
	case store.KindCheckpointRecorded:
		e.Kind, e.FilesChanged = api.TimelineCheckpoint, num("files_changed")
		e.Text = fmt.Sprintf("checkpoint recorded%s: %s changed", by, files(e.FilesChanged))
		if b := str("blocked_reason"); b != "" {
			e.Text += "; blocked: " + b
		}
		// The checkpoint and its receipt are written in one transaction,
		// stamped with the same time.
		if i := slices.IndexFunc(cps, func(c lease.Checkpoint) bool { return c.RecordedAt.Equal(r.At) }); i >= 0 {
			e.Summary = cps[i].Summary
			e.Text += "; summary: " + textsafe.Cut(cps[i].Summary, summaryInText)
		}
	case store.KindLeaseCompleted:
		e.Kind, e.Text = api.TimelineReleased, "released completed"+by+why(r.Reason)
	case store.KindLeaseRetryWait:
		next := ""
		if e.Until != nil {
			next = fmt.Sprintf("; retry_wait until %s, then attempt %d of %d", e.Until.Format(time.RFC3339), r.Attempt, e.MaxAttempts)
		}
		if e.Result != "" {
			e.Kind, e.Text = api.TimelineReleased, "released ("+r.Reason+")"+by+next
		} else {
			e.Kind, e.Text = api.TimelineRetryWait, fmt.Sprintf("attempt %d ended: %s%s", num("ended_attempt"), r.Reason, next)
		}
	case store.KindLeaseStopped:
		switch {
		case e.Result != "":
			e.Kind, e.Text = api.TimelineReleased, "released ("+r.Reason+")"+by+"; lease "+r.LeaseID+" stopped"
		case str("expiry") != "":
			e.Kind, e.Text = api.TimelineStopped, fmt.Sprintf("lease %s stopped: %s (attempt %d %s)", r.LeaseID, r.Reason, r.Attempt, str("expiry"))
		default:
			e.Kind, e.Text = api.TimelineStopped, fmt.Sprintf("lease %s stopped: %s", r.LeaseID, r.Reason)
		}
	default:
		return e, false
	}
	return e, true
}

// lastRenewal is the latest renewal of a live lease: only the first one
// writes a receipt, so a held lease changed after its last receipt was
// renewed then (nothing else changes a held lease without one).
func lastRenewal(l lease.Lease, rs []receipt.Receipt) (api.TimelineEntry, bool) {
	if l.State != lease.Running && l.State != lease.Checkpointed {
		return api.TimelineEntry{}, false
	}
	var last time.Time
	for _, r := range rs {
		if r.LeaseID == l.ID && r.At.After(last) {
			last = r.At
		}
	}
	if !l.UpdatedAt.After(last) {
		return api.TimelineEntry{}, false
	}
	until := l.ExpiresAt.UTC()
	return api.TimelineEntry{At: l.UpdatedAt, Kind: api.TimelineRenewed, TriggerID: l.TriggerID, LeaseID: l.ID,
		Attempt: l.Attempt, MaxAttempts: l.Attempts(), Until: &until,
		Text: fmt.Sprintf("lease %s renewed, the latest renewal: it holds until %s", l.ID, until.Format(time.RFC3339))}, true
}

// files counts changed files in words.
func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// whoText names who acted, as a receipt records it.
func whoText(by, repo string) string {
	switch by {
	case lease.ByBroker:
		return "the broker"
	case lease.ByAgent:
		if repo != "" {
			return "the agent in " + repo
		}
		return "the agent"
	case lease.ByOperator:
		return "the operator"
	case lease.ByTamq:
		return "tamq"
	case "statehub":
		return "State Hub"
	}
	return by
}

// wakeMeaning is a wake's outcome in words (lease.WakeOutcome.Meaning), or
// the outcome itself when it has none.
func wakeMeaning(status string) string {
	if m := lease.WakeOutcome(status).Meaning(); m != "" {
		return m
	}
	return status
}
