// Package notify decides when the engine tells a person a task needs them
// ([notify] in the config, docs/notify.md), and runs the command that tells
// them. The decision (Transitions) is a pure function of what was last told
// and the standings of the engine's latest look; the runner (Runner) is the
// adapter that runs the operator's argv.
package notify

import (
	"slices"
	"strings"
)

// Event is what a notice says of a task.
type Event string

const (
	// NeedsYou: the task started needing a person (or needs them for
	// another reason than last told).
	NeedsYou Event = "needs_you"
	// Resolved: the task no longer needs a person.
	Resolved Event = "resolved"
)

// Need is a task that needs a person at the latest look, as the standing
// says it (internal/engine/standing's needs_you kind). Only codes and ids
// go in: never a message body, a prompt or a reason an agent wrote.
type Need struct {
	Task, Repo string
	// Gate, Skipped, Wait, Dialog and Words are the standing's fields that
	// say why; Reason reads them.
	Gate, Wait, Dialog, Words string
	Skipped                   bool
}

// Told is what the engine last told a person of a task that needed them:
// its repo and reason. It is kept across restarts.
type Told struct {
	Repo   string `json:"repo"`
	Reason string `json:"reason"`
}

// Notice is one run of the command.
type Notice struct {
	Event  Event  `json:"event"`
	Task   string `json:"task"`
	Repo   string `json:"repo"`
	Reason string `json:"reason"`
	Action string `json:"action"`
}

// Reason is a stable code for why n needs a person: a program may match on
// it, and it carries no free text from State Hub or an agent.
func (n Need) Reason() string {
	switch {
	case n.Gate != "":
		return "gate_" + strings.ReplaceAll(n.Gate, "-", "_")
	case n.Skipped:
		return "skipped"
	case n.Dialog != "":
		return "dialog"
	case n.Wait == "no_agent" || n.Wait == "no_window":
		return n.Wait
	case strings.Contains(n.Words, "retries exhausted"):
		return "retries_exhausted"
	case strings.Contains(n.Words, "blocked"):
		return "blocked"
	}
	return "needs_you"
}

// Action says how to act on a notice of reason for task, of repo: fixed
// words per reason, with the commands to run spelt out whole (the repo's
// wake, the task's explain), ready to copy.
func Action(event Event, task, repo, reason string) string {
	explain := "coordination-engine explain " + task
	if event == Resolved {
		return "nothing to do; " + explain + " shows what happened"
	}
	var what string
	switch {
	case reason == "gate_secret":
		what = "provide the secret the task needs, or decide in State Hub"
	case strings.HasPrefix(reason, "gate_"):
		what = "decide the gate in State Hub, or wake it through the gate (coordination-engine wake " + repo + " --task " + task +
			" --override-gate " + strings.TrimPrefix(reason, "gate_") + ")"
	case reason == "skipped":
		what = "mend the task in State Hub"
	case reason == "dialog":
		what = "answer the dialog in the agent's window (tmux attach -t tamq)"
	case reason == "no_agent":
		what = "start the agent again in its window"
	case reason == "no_window":
		what = "open the repo's window again (tamq open)"
	case reason == "retries_exhausted":
		what = "look at why its attempts failed, then wake it again"
	case reason == "blocked":
		what = "unblock the task in State Hub"
	default:
		what = "see what it waits for"
	}
	return what + "; " + explain
}

// Transitions are the notices the latest look calls for, given what was
// told before (told, by task) and the tasks that need a person now (needs):
// a task that needs a person for a reason not told yet gets a needs_you
// notice; a task told of that needs no one now gets a resolved one. A
// standing that stays gets none, so a person hears of each once per task
// and reason. next is what has been told after the notices. Notices come
// in task order, resolved ones first.
func Transitions(told map[string]Told, needs []Need) (notices []Notice, next map[string]Told) {
	next = make(map[string]Told, len(needs))
	now := map[string]bool{}
	for _, n := range needs {
		now[n.Task] = true
		t := Told{Repo: n.Repo, Reason: n.Reason()}
		next[n.Task] = t
		if told[n.Task] != t {
			notices = append(notices, Notice{Event: NeedsYou, Task: n.Task, Repo: n.Repo, Reason: t.Reason,
				Action: Action(NeedsYou, n.Task, n.Repo, t.Reason)})
		}
	}
	for task, t := range told {
		if !now[task] {
			notices = append(notices, Notice{Event: Resolved, Task: task, Repo: t.Repo, Reason: t.Reason,
				Action: Action(Resolved, task, t.Repo, t.Reason)})
		}
	}
	slices.SortStableFunc(notices, func(a, b Notice) int {
		if a.Event != b.Event {
			if a.Event == Resolved {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Task, b.Task)
	})
	return notices, next
}
