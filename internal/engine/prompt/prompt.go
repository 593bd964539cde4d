// Package prompt writes the continuation prompt a wake delivers (spec section
// 6): what woke the agent, its latest checkpoint, the standard continuation
// policy, and last the exact commands that acknowledge, renew, checkpoint
// and release the lease. It is pure: the same inputs give the same text, so
// a wake sent again after a crash is the identical request tamq recognizes.
package prompt

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Templates are the spec's continuation policy templates, in order. They are
// suggestions; a repository's own agent instructions may override them.
var Templates = []string{
	"inspect open work and implement the highest-priority actionable item;",
	"if no work is open, reconcile SCOPE.md with INTENT.md, record gaps under history/, and create/register a workplan for the most relevant gap;",
	"review pending work, refine it where needed, and implement the next safe item;",
	"if no safe work remains, close the session and write a perspective entry to the configured hall-of-helix destination.",
}

// Input is what a prompt is made from.
type Input struct {
	Program     string // the engine's command name, for the commands to run
	LeaseID     string
	Attempt     int
	MaxAttempts int // attempts the lease may have in all
	Repo        string
	Trigger     Trigger
	Checkpoint  *Checkpoint
}

// Trigger is the part of the trigger the agent is told.
type Trigger struct {
	Source, SourceID, SourceRevision, Reason string
}

// Checkpoint is the latest checkpoint of the lease.
type Checkpoint struct {
	Summary       string
	NextAction    string
	BlockedReason string
	FilesChanged  []string
	RecordedAt    time.Time
}

// MaxBytes is tamq's body limit; a prompt never exceeds it.
const MaxBytes = 8 * 1024

// maxSummary bounds the checkpoint's share of the prompt, so the commands
// at the end always fit.
const maxSummary = 4 * 1024

// Build writes the prompt for in.
func Build(in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "coordination-engine wakes %s: %s (%s %s, revision %s), lease %s, attempt %d of %d.\n",
		in.Repo, in.Trigger.Reason, in.Trigger.Source, in.Trigger.SourceID, in.Trigger.SourceRevision, in.LeaseID, in.Attempt, in.MaxAttempts)
	if cp := in.Checkpoint; cp != nil {
		fmt.Fprintf(&b, "Resume from your latest checkpoint (%s): %s\n", cp.RecordedAt.UTC().Format(time.RFC3339), cut(oneLine(cp.Summary), maxSummary))
		if cp.NextAction != "" {
			fmt.Fprintf(&b, "Next action you recorded: %s\n", cut(oneLine(cp.NextAction), 512))
		}
		if len(cp.FilesChanged) > 0 {
			fmt.Fprintf(&b, "Files you changed: %s\n", cut(strings.Join(cp.FilesChanged, ", "), 512))
		}
	}
	b.WriteString("Continue, in this order:\n")
	for i, t := range Templates {
		fmt.Fprintf(&b, "%d. %s\n", i+1, t)
	}
	b.WriteString("These are suggestions, not permission: anything that needs a human (secrets, destructive or live actions, scope changes) stops with a checkpoint and --blocked-reason.\n")
	p, l := in.Program, in.LeaseID
	fmt.Fprintf(&b, "While you work: %s lease renew %s (at least every lease_renew_interval_seconds)\n", p, l)
	fmt.Fprintf(&b, "Before yielding: %s checkpoint --lease %s --summary TEXT [--next TEXT] [--file F]...\n", p, l)
	fmt.Fprintf(&b, "When done: %s lease release %s --result completed (or failed|blocked --reason TEXT)\n", p, l)
	fmt.Fprintf(&b, "Acknowledge before you begin: %s lease ack %s", p, l)
	return b.String()
}

// oneLine folds a text onto one line: the prompt's lines are its structure.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
