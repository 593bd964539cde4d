package service

import (
	"log/slog"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/prompt"
	"github.com/tmux-amq/tamq/internal/secretscan"
)

// prompts build the continuation prompt of a trigger's wake, and scan it
// before anything of the trigger is stored.
type prompts struct {
	log    *slog.Logger
	config *config.Loaded
	timing lease.Timing
	// taskBodies: State Hub's tasks have descriptions (task show).
	taskBodies bool
}

// scanLeaseID stands in for the lease id when a trigger's prompt is scanned
// before it has a lease: ids are ours and never secret.
const scanLeaseID = "00000000-0000-0000-0000-000000000000"

// promptInput is what the prompt of a trigger's wake is made from: the
// trigger (with its task or message), the lease and attempt, and the
// continuation templates of the repo. The latest checkpoint is added by the
// caller.
func (pr *prompts) promptInput(t lease.Trigger, leaseID string, attempt, attempts int, reg func() (*gita.Registry, error)) prompt.Input {
	in := prompt.Input{
		Program: string(paths.Engine), LeaseID: leaseID, Attempt: attempt, MaxAttempts: attempts,
		Repo:       t.TargetRepo,
		Trigger:    prompt.Trigger{Source: string(t.Source), SourceID: t.SourceID, SourceRevision: t.SourceRevision, Reason: string(t.Reason)},
		Templates:  pr.templatesFor(t.TargetRepo, reg),
		TaskBodies: pr.taskBodies,
		HoldFor:    pr.timing.HoldFor(),
		// Configuration, not the repo's: where a perspective entry goes.
		PerspectiveDestination: pr.config.Coordination.PerspectiveDestination,
	}
	switch t.Source {
	case lease.SourceMessage:
		in.Message = &prompt.Message{ID: t.SourceID, Subject: t.Title, From: t.Sender}
	default:
		if t.TaskID != "" {
			in.Task = &prompt.Task{ID: t.TaskID, Title: t.Title, Workplan: t.WorkplanID}
		}
	}
	return in
}

// templatesFor is the continuation templates for repo: the repo's own file
// when it has a valid one, else the configuration's, else the built-in
// ones. A broken file is reported and passed over.
func (pr *prompts) templatesFor(repo string, registry func() (*gita.Registry, error)) []string {
	if reg, err := registry(); err == nil {
		if r, ok := reg.Lookup(repo); ok {
			ts, found, err := prompt.LoadRepoTemplates(r.Path)
			switch {
			case err != nil:
				pr.log.Warn("the repo's continuation templates are not usable; using the configured ones", "repo", repo, "error", err.Error())
			case found:
				return ts
			}
		}
	}
	return pr.config.Coordination.ContinuationTemplates
}

// scanPrompt builds the first prompt a trigger would make and scans it for
// secret material; rule names what was found (never the text). Both forms
// of the prompt hold the same tracker text, so one is scanned.
func (pr *prompts) scanPrompt(t lease.Trigger, reg func() (*gita.Registry, error)) (string, bool) {
	in := pr.promptInput(t, scanLeaseID, 1, 1+pr.timing.MaxRetries, reg)
	f, hit := secretscan.Scan(prompt.Build(in))
	return f.Rule, hit
}

// bothPrompts are a wake's two prompts: the one for an agent tamq's broker
// reads (the broker acknowledges and renews the lease for it), and the one
// for an agent it cannot read, which does that itself. The engine cannot
// know which agent a window runs when the wake is queued (a person may
// start another in it at any time), so tamq, which does, picks.
func bothPrompts(in prompt.Input) (brokerAcks, agentAcks string) {
	in.AgentAcks = false
	brokerAcks = prompt.Build(in)
	in.AgentAcks = true
	return brokerAcks, prompt.Build(in)
}
