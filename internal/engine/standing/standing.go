// Package standing says where a task stands for the person in the loop: what
// it waits for, in words they act on, and whether it needs them now. It is
// the one place that turns the engine's facts about a task (State Hub's last
// observation of it, its triggers and leases, a dialog its agent waits at)
// into those words, for `coordination-engine tasks`, the tmux status line and
// `tamq top` alike. It does no I/O.
package standing

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/reltime"
)

// Kind is what a task's standing asks of the person, ordered by how soon.
type Kind string

const (
	// NeedsYou: nothing moves until a person decides (a gate, retries
	// exhausted, a dialog open, work blocked).
	NeedsYou Kind = "needs_you"
	// Working: an agent holds a live lease on it.
	Working Kind = "working"
	// Retry: its lease waits for its next attempt.
	Retry Kind = "retry"
	// Waiting: it waits for something that moves by itself (a dependency,
	// a window, its workplan) and is judged again when that changes.
	Waiting Kind = "waiting"
	// Ready: actionable; the engine takes it at its next look.
	Ready Kind = "ready"
	// Done: State Hub says it is done (or cancelled).
	Done Kind = "done"
)

// Kinds are the kinds in the order a person reads them: what needs them first.
var Kinds = []Kind{NeedsYou, Working, Retry, Waiting, Ready, Done}

// Rank is k's place in Kinds (a lower rank is shown first).
func (k Kind) Rank() int {
	for i, o := range Kinds {
		if o == k {
			return i
		}
	}
	return len(Kinds)
}

// Facts are what the engine knows of one task.
type Facts struct {
	Task observe.TaskView
	// Triggers are the task's triggers, oldest first; Leases those
	// triggers' leases, oldest first.
	Triggers []lease.Trigger
	Leases   []lease.Lease
	// Dialogs are the windows whose agent waits at a dialog, by lease id,
	// as tamq's broker said at its last renewal.
	Dialogs map[string]string
	// Held is another host's claim of the task ([cluster]), as the
	// engine's last read of the claims saw it; nil when none.
	Held *Held
	Now  time.Time
}

// Held is another host's claim of a task: the host and its lease (the
// other host's, not one of this engine's), and, when the claim has gone since (etcd was away), until when that host
// may take it back before this one claims the work.
type Held struct {
	Host, LeaseID string
	Lapsed        bool
	Until         time.Time
}

// Standing is where a task stands: Words say it for a person ("needs you:
// secret required"); the other fields are the same facts for a program.
type Standing struct {
	Kind  Kind
	Words string
	// Gate is the gate that holds it, GateReason the gate's reason.
	Gate, GateReason string
	// Skipped is why the engine skips the task (observe.TaskView.Skipped):
	// what State Hub sends of it breaks the engine's rules, and a person
	// must mend it there.
	Skipped string
	// HeldBy is the host whose claim the task waits for ([cluster]).
	HeldBy string
	// Wait is why pending work waits (lease.Wait values), Dependency the
	// first dependency not done.
	Wait       string
	Dependency string
	// The live or last lease: its id, attempt of max, the window where a
	// dialog waits, who acknowledged it and when, its last renewal, and its
	// next attempt.
	LeaseID              string
	Attempt, MaxAttempts int
	Dialog               string
	AckedBy              string
	AckedAt              time.Time
	RenewedAt            time.Time
	RetryAt              time.Time
}

// Of is the standing of the task f describes.
func Of(f Facts) Standing {
	t := f.Task
	switch t.Status {
	case "done", "cancelled":
		return Standing{Kind: Done, Words: t.Status}
	}
	l := lastLease(f.Leases)
	if l != nil {
		switch {
		case l.State.Live() && l.State != lease.RetryWait:
			return working(f, *l)
		case l.State == lease.RetryWait:
			s := leaseStanding(Retry, *l)
			s.RetryAt = l.NextRetryAt
			if tr := triggerOf(f.Triggers, l.TriggerID); tr != nil && heldFor(*tr) {
				return waitsForPerson(s, *tr, "its next attempt waits")
			}
			s.Words = "retry at " + reltime.ClockTime(l.NextRetryAt, f.Now)
			if tr := triggerOf(f.Triggers, l.TriggerID); tr != nil && tr.Wait != "" {
				s.Wait = string(tr.Wait)
				s.Words += ", then " + waitWords(*tr)
			}
			return s
		}
	}
	// Another host's agent is on it: whatever this host would do with it
	// (a window busy here, a gate of this host's), that is where it stands.
	if h := f.Held; h != nil {
		s := Standing{Kind: Waiting, Wait: string(lease.WaitHeldElsewhere), HeldBy: h.Host}
		s.Words = "waiting: " + h.Words(f.Now)
		return s
	}
	// Work under way on an earlier revision goes on (above); otherwise a
	// task the engine skips is never woken, whatever else it waits for: it
	// needs a person to mend it in State Hub, not to wait.
	if t.Skipped != "" {
		return Standing{Kind: NeedsYou, Skipped: t.Skipped,
			Words: "needs you: skipped by the engine: " + t.Skipped + "; mend the task in State Hub"}
	}
	if l != nil {
		switch {
		case l.Released == lease.ResultBlocked && !newerTrigger(f.Triggers, l.TriggerID):
			s := leaseStanding(NeedsYou, *l)
			s.Words = "needs you: blocked" + paren(l.StopReason) + "; woken again when State Hub changes the task"
			return s
		case l.State == lease.Stopped && exhausted(*l) && !newerTrigger(f.Triggers, l.TriggerID):
			s := leaseStanding(NeedsYou, *l)
			s.Words = fmt.Sprintf("needs you: retries exhausted (lease %s, %d attempts)", l.ID, l.Attempt)
			if l.StopReason != lease.StopExhausted {
				s.Words += ": " + l.StopReason
			}
			return s
		}
	}
	tr := lastTrigger(f.Triggers)
	// A gate speaks for the revision it stopped; an operator's wake is a
	// revision of its own.
	if tr != nil && (tr.State == lease.TriggerGated || tr.State == lease.TriggerStopped) && tr.GateReason != "" &&
		(api.WokenBy(*tr) == "operator" || !observe.OtherRevision(t.Revision, tr.SourceRevision)) {
		return gated(tr.GateReason, t.GateReason)
	}
	// A gate on actionable work needs a person whatever else it waits for
	// (a window): it would stop at the gate when that came.
	if t.Actionable && t.Gate != "" {
		return gated(t.Gate, t.GateReason)
	}
	if tr != nil && tr.State == lease.TriggerPending && tr.Wait != "" {
		if tr.Wait == lease.WaitNoAgent {
			// Nothing starts the agent again but a person.
			return Standing{Kind: NeedsYou, Wait: string(tr.Wait), Words: "needs you: " + waitWords(*tr) + "; start it again"}
		}
		return Standing{Kind: Waiting, Wait: string(tr.Wait), Words: "waiting: " + waitWords(*tr)}
	}
	if !t.Actionable {
		if t.Status == "blocked" {
			return Standing{Kind: NeedsYou, Words: "needs you: blocked in State Hub"}
		}
		if d, ok := firstOpenDep(t.Deps); ok {
			s := Standing{Kind: Waiting, Dependency: d.ID}
			switch {
			case !d.Found:
				s.Words = "waiting: dependency " + d.ID + " (in no workplan)"
			default:
				s.Words = "waiting: dependency " + d.ID + " (" + d.Status + ", " + d.Repo + ")"
			}
			return s
		}
		return Standing{Kind: Waiting, Words: "waiting: " + t.Waiting}
	}
	return Standing{Kind: Ready, Words: "ready: woken at the engine's next look"}
}

// Words say who holds the task ("held by host H (lease L)"), as tasks and
// a trigger that waits for the claim say it.
func (h Held) Words(now time.Time) string {
	w := "held by host " + h.Host + " (lease " + h.LeaseID + ")"
	if h.Lapsed {
		w += " until its claim lapsed; it may take it back until " + reltime.ClockTime(h.Until, now)
	}
	return w
}

// working is the standing of a task whose lease is live.
func working(f Facts, l lease.Lease) Standing {
	s := leaseStanding(Working, l)
	if w, ok := f.Dialogs[l.ID]; ok {
		s.Kind, s.Dialog = NeedsYou, w
		s.Words = "needs you: dialog open in window " + w + " (lease " + l.ID + ")"
		return s
	}
	if tr := triggerOf(f.Triggers, l.TriggerID); l.State == lease.Offered && tr != nil && heldFor(*tr) {
		return waitsForPerson(s, *tr, fmt.Sprintf("its wake (attempt %d) waits", l.Attempt))
	}
	words := []string{fmt.Sprintf("working: lease %s attempt %d", l.ID, l.Attempt)}
	switch {
	case l.State == lease.Offered:
		words = append(words, "offered "+reltime.Ago(l.AcquiredAt, f.Now)+", not acknowledged yet")
		if tr := triggerOf(f.Triggers, l.TriggerID); tr != nil && tr.Wait == lease.WaitBusy {
			// Held in tamq while the agent works for someone else: it
			// goes in when the agent is back at its prompt.
			s.Wait = string(tr.Wait)
			words = append(words, "its wake waits: "+cmp.Or(tr.WaitDetail, "the agent is busy")+", no attempt used")
		}
	default:
		if l.AckedBy != "" {
			s.AckedBy, s.AckedAt = l.AckedBy, l.AckedAt
			words = append(words, "acked by "+l.AckedBy+" "+reltime.Ago(l.AckedAt, f.Now))
		}
		if !l.UpdatedAt.IsZero() {
			s.RenewedAt = l.UpdatedAt
			words = append(words, "renewed "+reltime.Ago(l.UpdatedAt, f.Now))
		}
	}
	s.Words = strings.Join(words, ", ")
	return s
}

func leaseStanding(k Kind, l lease.Lease) Standing {
	return Standing{Kind: k, LeaseID: l.ID, Attempt: l.Attempt, MaxAttempts: l.Attempts()}
}

// heldFor reports whether a leased trigger's work waits for what only a
// person clears: a dialog in its window, its agent not running, its window
// or endpoint gone. The wake never reached the agent, so it costs no
// attempt, but nothing moves it by itself (issue 39: waiting is not
// failing, and it is not hidden either).
func heldFor(t lease.Trigger) bool {
	return t.Wait == lease.WaitDialog || t.Wait == lease.WaitNoAgent || t.Wait == lease.WaitNoWindow
}

// waitsForPerson is the standing of a lease held by what heldFor names: s
// with what the person must do, and what of the lease waits meanwhile.
func waitsForPerson(s Standing, t lease.Trigger, what string) Standing {
	s.Kind, s.Wait = NeedsYou, string(t.Wait)
	waits := " (lease " + s.LeaseID + ": " + what + ", no attempt used)"
	switch t.Wait {
	case lease.WaitDialog:
		s.Dialog = t.TargetRepo
		s.Words = "needs you: dialog open in window " + t.TargetRepo + waits
	case lease.WaitNoAgent:
		s.Words = "needs you: " + waitWords(t) + "; start it again" + waits
	default:
		s.Words = "needs you: the window of " + t.TargetRepo + " is gone; open it again" + waits
	}
	return s
}

// gated is the standing of work a gate holds: a person decides.
func gated(gate, reason string) Standing {
	s := Standing{Kind: NeedsYou, Gate: gate, GateReason: reason}
	switch gate {
	case observe.GateHuman:
		s.Words = "needs you: human gate" + paren(reason)
	case observe.GateSecret:
		s.Words = "needs you: secret required"
	case observe.GatePolicy, observe.GateIdentity, observe.GateUnregistered, observe.GateAmbiguous:
		s.Words = "needs you: " + strings.ReplaceAll(gate, "_", " ") + " gate" + paren(reason)
	default: // a category the policy profile sends to a human
		s.Words = "needs you: " + gate + " action proposed"
	}
	return s
}

// waitWords says what pending work waits for.
func waitWords(t lease.Trigger) string {
	switch t.Wait {
	case lease.WaitNoWindow:
		return "no window for repo " + t.TargetRepo
	case lease.WaitTamq:
		return "tamq is not reachable"
	case lease.WaitManual:
		return "the window of " + t.TargetRepo + " is in manual mode"
	case lease.WaitNoAgent:
		return "no agent runs in the window of " + t.TargetRepo
	}
	if t.WaitDetail != "" {
		return t.WaitDetail
	}
	return strings.ReplaceAll(string(t.Wait), "_", " ")
}

// exhausted reports whether a stopped lease stopped because its attempts
// ran out: expired each time, or released as failed on the last one.
func exhausted(l lease.Lease) bool {
	return l.StopReason == lease.StopExhausted || l.Released == lease.ResultFailed
}

// newerTrigger reports whether a trigger came after the one of id: the task
// changed since and its own standing speaks.
func newerTrigger(ts []lease.Trigger, id string) bool {
	return len(ts) > 0 && ts[len(ts)-1].ID != id
}

func lastLease(ls []lease.Lease) *lease.Lease {
	if len(ls) == 0 {
		return nil
	}
	return &ls[len(ls)-1]
}

func lastTrigger(ts []lease.Trigger) *lease.Trigger {
	if len(ts) == 0 {
		return nil
	}
	return &ts[len(ts)-1]
}

func triggerOf(ts []lease.Trigger, id string) *lease.Trigger {
	for i := range ts {
		if ts[i].ID == id {
			return &ts[i]
		}
	}
	return nil
}

func firstOpenDep(deps []observe.Dep) (observe.Dep, bool) {
	for _, d := range deps {
		if !d.Found || d.Status != "done" {
			return d, true
		}
	}
	return observe.Dep{}, false
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
