// Package observe is what coordination-engine decides from one observation
// of State Hub (docs/statehub-contract.md, "From observation to wake"): which
// tasks are actionable and why not, their dependencies across workplans, the
// gates that stop them, which unread messages ask for action, and where a
// wake may go. It is pure: the service feeds it what the State Hub client
// read, gita's registry and the attached endpoints, and acts on the result.
package observe

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Gates: the names a stopped trigger carries. A proposed action of a
// category the profile sends to a human stops with the category's name.
// No window (or no agent, a manual window, tamq away) is not a gate: the
// work waits (lease.Wait) and is judged again.
const (
	GateHuman  = "human"
	GateSecret = "secret"
	// GateUnregistered: the repo is not registered with gita.
	GateUnregistered = "unregistered"
	GateAmbiguous    = "ambiguous_ownership"
	GateIdentity     = "identity"
	// GatePolicy: a proposed action of a category no profile knows.
	GatePolicy = "policy"
)

// Policy is what the observation needs of the policy profile.
type Policy interface {
	// Known reports whether category is one of the profile's vocabulary.
	Known(category string) bool
	// RequiresHuman reports whether a proposed action of category must
	// stop for a human.
	RequiresHuman(category string) bool
}

// Dep is one dependency of a task as last observed.
type Dep struct {
	ID     string `json:"id"`
	Status string `json:"status,omitempty"` // "" when no workplan has it
	Repo   string `json:"repo,omitempty"`
	Found  bool   `json:"found"`
	// Outside: the tracker knows it, but not as a task (GitHub: an issue
	// nobody labelled, or of a repository nobody watches); Status is its
	// state in the contract's words.
	Outside bool `json:"outside,omitempty"`
}

// TaskView is one task as the observation judged it.
type TaskView struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Revision       string `json:"revision"`
	Repo           string `json:"repo"`
	Workplan       string `json:"workplan"`
	WorkplanStatus string `json:"workplan_status"`
	Priority       int    `json:"priority"`
	Deps           []Dep  `json:"depends_on,omitempty"`
	// Actionable: its workplan and status allow work and every dependency
	// is done; a gate may still stop it.
	Actionable bool `json:"actionable"`
	// Waiting says why it is not actionable.
	Waiting    string `json:"waiting,omitempty"`
	Gate       string `json:"gate,omitempty"`
	GateReason string `json:"gate_reason,omitempty"`
	// Skipped says why the engine cannot keep a trigger of the task (a
	// revision with a newline, an id too long): it is never woken while
	// State Hub sends it so, and is one of the observation's Problems.
	Skipped string `json:"skipped,omitempty"`
}

// WorkplanRevisionSep joins a task's revision and its workplan's in the
// revision of a trigger made again when a gate of the workplan cleared.
const WorkplanRevisionSep = "+wp."

// OtherRevision says whether State Hub's last look showed a task at another
// revision than triggerRevision, the State Hub revision a trigger of it was
// made for: the task changed since (a gate's label lifted, a dependency
// added), so what that trigger's gate said is no longer where it stands.
// False when the task was not observed (observed "").
func OtherRevision(observed, triggerRevision string) bool {
	rev, _, _ := strings.Cut(triggerRevision, WorkplanRevisionSep)
	return observed != "" && rev != observed
}

// Candidate is a trigger an observation wants recorded: actionable, or
// stopped by Gate.
type Candidate struct {
	Trigger    lease.Trigger
	Gate       string
	GateReason string
	Priority   int
	// WorkplanRevision is the task's workplan's revision: a gate of the
	// workplan that cleared wakes the task again under it (a task's own
	// revision does not change when its workplan's gate does).
	WorkplanRevision string
}

// Observation is what one look at State Hub gave.
type Observation struct {
	Tasks      map[string]TaskView
	Candidates []Candidate
	// Problems are objects the observation could not use (a task id that
	// two workplans claim), to be recorded as invalid.
	Problems []Problem
}

// Problem is an observed object skipped, and why.
type Problem struct{ Kind, ID, Reason string }

// MaxTitle bounds what is kept of a task title or message subject.
const MaxTitle = 1024

// Tasks judges every task of the workplans and returns the candidates in
// the order to dispatch them: lower priority first, then by id. outside
// are the statuses of dependencies that are not tasks (statehub.Board's
// Outside): a task waits on them as on any other.
func Tasks(workplans []contract.Workplan, outside map[string]string, p Policy) Observation {
	type owned struct {
		task contract.Task
		wp   *contract.Workplan
	}
	byID := make(map[string]owned)
	var obs Observation
	for i := range workplans {
		wp := &workplans[i]
		for _, t := range wp.Tasks {
			if prev, dup := byID[t.ID]; dup {
				obs.Problems = append(obs.Problems, Problem{Kind: "task", ID: t.ID,
					Reason: fmt.Sprintf("task id in workplans %s and %s; the second is ignored", prev.wp.ID, wp.ID)})
				continue
			}
			byID[t.ID] = owned{t, wp}
		}
	}
	obs.Tasks = make(map[string]TaskView, len(byID))
	for id, o := range byID {
		t, wp := o.task, o.wp
		v := TaskView{ID: id, Status: t.Status, Revision: t.Revision, Repo: t.Repo, Workplan: wp.ID,
			WorkplanStatus: wp.Status, Priority: t.Priority}
		for _, d := range t.DependsOn {
			dep := Dep{ID: d}
			if o, ok := byID[d]; ok {
				dep.Found, dep.Status, dep.Repo = true, o.task.Status, o.task.Repo
			} else if status, ok := outside[d]; ok {
				dep.Found, dep.Status, dep.Outside = true, status, true
			}
			v.Deps = append(v.Deps, dep)
		}
		v.Waiting = waiting(wp.Status, t.Status, v.Deps)
		v.Actionable = v.Waiting == ""
		// The gates are judged for every task, not only the actionable: the
		// next attempt of work already under way is judged by them too.
		v.Gate, v.GateReason = contentGate(*wp, t, p)
		reason := lease.TaskActionable
		if len(t.DependsOn) > 0 {
			reason = lease.DependencySatisfied
		}
		tr := lease.Trigger{
			Source: lease.SourceTask, SourceID: t.ID, SourceRevision: t.Revision,
			TargetRepo: t.Repo, TargetAgent: t.Agent, TaskID: t.ID, WorkplanID: wp.ID,
			Title: cut(t.Title, MaxTitle), Reason: reason,
		}
		// Judged for every task, not only the actionable: a task the engine
		// can never wake is said to be skipped, in explain and tasks, rather
		// than ready or waiting for something that would not wake it.
		switch err := tr.Check(); {
		case err != nil:
			v.Skipped = err.Error()
			// Keyed as the judge keys a trigger it refuses, so that either
			// reports the task once.
			obs.Problems = append(obs.Problems, Problem{Kind: string(lease.SourceTask), ID: textsafe.Escape(id), Reason: v.Skipped})
		case v.Actionable:
			obs.Candidates = append(obs.Candidates, Candidate{
				Trigger: tr, Gate: v.Gate, GateReason: v.GateReason, Priority: t.Priority, WorkplanRevision: wp.Revision,
			})
		}
		obs.Tasks[id] = v
	}
	slices.SortFunc(obs.Candidates, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Trigger.SourceID, b.Trigger.SourceID))
	})
	return obs
}

// waiting says why a task is not actionable: its workplan's or its own
// status, or a dependency not done; "" when it is.
func waiting(workplanStatus, status string, deps []Dep) string {
	switch {
	case workplanStatus != "active" && workplanStatus != "ready":
		return "its workplan is " + workplanStatus
	case status != "todo" && status != "ready":
		return "it is " + status
	}
	for _, d := range deps {
		switch {
		case !d.Found:
			return "dependency " + d.ID + " is in no workplan"
		case d.Outside && d.Status != "done":
			return "dependency " + d.ID + " is " + outsideWords(d.Status) + " (not a task: a person's work)"
		case d.Status != "done":
			return "dependency " + d.ID + " is " + d.Status
		}
	}
	return ""
}

// contentGate is the first gate State Hub's own data closes on a task: a
// human asked for (needs_human, or a note requesting review, on the task or
// its workplan), secrets, then a proposed action the profile sends to a
// human. Reasons name fields and ids, never note text or summaries.
func contentGate(wp contract.Workplan, t contract.Task, p Policy) (gate, reason string) {
	switch {
	case t.NeedsHuman:
		return GateHuman, "the task needs a human"
	case wp.NeedsHuman:
		return GateHuman, "its workplan " + wp.ID + " needs a human"
	}
	for _, notes := range []struct {
		of    string
		notes []contract.Note
	}{{"task", t.InterventionNotes}, {"workplan", wp.InterventionNotes}} {
		for _, n := range notes.notes {
			if n.RequestsReview {
				return GateHuman, fmt.Sprintf("note %s on the %s requests review", n.ID, notes.of)
			}
		}
	}
	if t.SecretsRequired {
		return GateSecret, "the task requires secrets"
	}
	for _, a := range t.ProposedActions {
		switch {
		case a.Category == "secrets":
			return GateSecret, "a proposed action needs secrets"
		case !p.Known(a.Category):
			return GatePolicy, fmt.Sprintf("a proposed action of unknown category %q", cut(a.Category, 64))
		case p.RequiresHuman(a.Category):
			return a.Category, "the policy profile sends " + a.Category + " actions to a human"
		}
	}
	return "", ""
}

// Messages returns the unread messages that request action as candidates,
// in the order observed.
func Messages(msgs []contract.Message) []Candidate {
	var out []Candidate
	for _, m := range msgs {
		if !m.RequestsAction || m.Read {
			continue
		}
		out = append(out, Candidate{Trigger: lease.Trigger{
			Source: lease.SourceMessage, SourceID: m.ID, SourceRevision: m.Revision,
			TargetRepo: m.ToRepo, TargetAgent: m.ToAgent, Title: cut(m.Subject, MaxTitle), Sender: cut(m.From, lease.MaxID),
			Reason: lease.InboxMessage,
		}})
	}
	return out
}

// Host is an attached endpoint's window of a repo.
type Host struct {
	EndpointID string
	Path       string
	Mode       lease.WindowMode
	// NoAgent: tamq says no agent runs in the window now.
	NoAgent bool
}

// Routing is where a wake may go: the endpoint, or the gate that stops it,
// or why it must wait (Reason says it in words for the last two).
type Routing struct {
	EndpointID string
	Gate       string
	Wait       lease.Wait
	Reason     string
}

// Route says where a wake for repo may go. registered is gita's path of the
// repo, ok false when gita does not register it; hosts are the attached
// endpoints' windows of the repo; attached says whether any tamq endpoint is
// attached at all. Only what a person must decide is a gate (an unregistered
// repo, several windows, a window in another directory); a window that is
// not there yet, runs no agent or is in manual mode is waited for.
func Route(repo, registered string, ok bool, hosts []Host, attached bool) Routing {
	switch {
	case !ok:
		return Routing{Gate: GateUnregistered, Reason: repo + " is not registered with gita"}
	case len(hosts) == 0 && !attached:
		return Routing{Wait: lease.WaitTamq, Reason: "no tamq is attached (not running, restarting, or not answering)"}
	case len(hosts) == 0:
		return Routing{Wait: lease.WaitNoWindow, Reason: "no window for repo " + repo}
	case len(hosts) > 1:
		return Routing{Gate: GateAmbiguous, Reason: fmt.Sprintf("%d tamq endpoints host %s", len(hosts), repo)}
	case filepath.Clean(hosts[0].Path) != filepath.Clean(registered):
		return Routing{Gate: GateIdentity, Reason: "the window of " + repo + " runs in another directory than gita registers"}
	case hosts[0].Mode == lease.ModeManual:
		return Routing{Wait: lease.WaitManual, Reason: "the window of " + repo + " is in manual mode"}
	case hosts[0].NoAgent:
		return Routing{Wait: lease.WaitNoAgent, Reason: "no agent running in the window of " + repo}
	}
	return Routing{EndpointID: hosts[0].EndpointID}
}

// Verdict is what the latest observation says of the next attempt of work
// on a task: go on (the zero Verdict), stop for good (Stop: a gate, or the
// task ended in State Hub), or wait (not actionable now).
type Verdict struct {
	Stop   bool
	Gate   string // the gate, when the stop is one
	Wait   bool
	Reason string
}

// Stop reasons of a lease whose task ended in State Hub.
const (
	StopTaskDone      = "task_done"
	StopTaskCancelled = "task_cancelled"
	StopTaskBlocked   = "task_blocked"
	StopTaskGone      = "task_gone"
)

// Attempt judges the next attempt of work on task id against the
// observation: a task done, cancelled, blocked or gone, or a gate on it or
// its workplan, ends the work; a paused workplan or a dependency not done
// makes it wait; todo, ready and in_progress (an agent at work on it) go on.
func (o Observation) Attempt(id string) Verdict {
	v, ok := o.Tasks[id]
	switch {
	case !ok:
		return Verdict{Stop: true, Reason: StopTaskGone + ": the task is in no workplan"}
	case v.Status == "done":
		return Verdict{Stop: true, Reason: StopTaskDone + ": the task is done in State Hub"}
	case v.Status == "cancelled":
		return Verdict{Stop: true, Reason: StopTaskCancelled + ": the task is cancelled in State Hub"}
	case v.Status == "blocked":
		return Verdict{Stop: true, Reason: StopTaskBlocked + ": the task is blocked in State Hub"}
	case v.Gate != "":
		return Verdict{Stop: true, Gate: v.Gate, Reason: v.GateReason}
	case v.WorkplanStatus != "active" && v.WorkplanStatus != "ready":
		return Verdict{Wait: true, Reason: "its workplan is " + v.WorkplanStatus}
	}
	for _, d := range v.Deps {
		if d.Status != "done" {
			return Verdict{Wait: true, Reason: waiting(v.WorkplanStatus, "todo", v.Deps)}
		}
	}
	return Verdict{}
}

// outsideWords say the state of a dependency that is not a task.
func outsideWords(status string) string {
	if status == "todo" {
		return "open"
	}
	return status
}

// Open reports whether a task is open in State Hub: todo, ready or in
// progress.
func (v TaskView) Open() bool {
	return v.Status == "todo" || v.Status == "ready" || v.Status == "in_progress"
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
