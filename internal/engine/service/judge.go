package service

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// judge turns what the observer saw into triggers, gates, leases and
// wakes (docs/observation.md): each look's candidates, the offered leases
// whose work ended, and each lease's next attempt when the lease clock finds
// it due. It remembers the triggers past waiting, so a look that sees them
// again costs a map lookup, not a write transaction.
type judge struct {
	store    *store.Store
	log      *slog.Logger
	clock    clock.Clock
	config   *config.Loaded
	registry func() (*gita.Registry, error)
	timing   lease.Timing
	// latest is the observer's last observation.
	latest *hubView
	// router says where work goes, or why it waits or stops.
	router interface {
		judgeRoute(ctx context.Context, t lease.Trigger, reg func() (*gita.Registry, error), ask routeAsk) (observe.Routing, lease.Wait, error)
		hostsOf(ctx context.Context, repo, endpoint string) ([]lease.Endpoint, error)
	}
	// prompts finds secret material in the prompt a trigger would make.
	prompts interface {
		scanPrompt(t lease.Trigger, reg func() (*gita.Registry, error)) (string, bool)
	}
	// problems reports what State Hub holds that the engine cannot act on.
	problems interface {
		recordProblems(ctx context.Context, ps []observe.Problem)
		skipCheckpoint(cp contract.Checkpoint, why string)
	}
	// offers offers the leases of the work that may go, and wakes them
	// (the offerer).
	offers leaseOffers
	// ends follows the attempts the judge ends.
	ends attemptEnds
	// deadlinesChanged wakes the lease clock: attempts were brought
	// forward.
	deadlinesChanged wakeup.Signal
	// claims says what other hosts hold (the claimer).
	claims interface {
		look(ctx context.Context)
		elsewhere(t lease.Trigger) (lease.Wait, string)
	}
	// settledKeys are trigger keys past waiting (leased, stopped, done):
	// seen again, they cost a map lookup, not a write transaction. Each
	// names a trigger in the store, and goes when the retention (or the
	// operator's purge) deletes that trigger (forget).
	settledKeys sync.Map
}

// judgeCandidates takes every candidate as far as it can go now: the observation's
// tasks when all is judged again (State Hub or the windows changed), the
// messages asking for action, checkpoints that resume work, and the
// triggers still waiting; then the postponed next attempts of leases are
// judged again by the clock when all was.
func (j *judge) judgeCandidates(ctx context.Context, obs observe.Observation, inbox, resume []observe.Candidate, all bool) error {
	// Otherwise only the triggers still waiting are judged (for a window,
	// the repo's agent, another lease of their task, or a gate check): an
	// idle poll stays a few cheap requests.
	var candidates []observe.Candidate
	if all {
		candidates = obs.Candidates
	}
	// Every claim of the cluster in one read: what other hosts hold waits
	// for them without a claim asked per task, and shows as theirs.
	j.claims.look(ctx)
	candidates = slices.Concat(candidates, inbox, resume)
	waiting, err := j.waitingCandidates(ctx, obs, inbox)
	if err != nil {
		return err
	}
	candidates = append(candidates, waiting...)
	// One lease at a time per repo, in priority order: the candidates go
	// most urgent first (lower priority numbers), the order of each kind
	// kept otherwise.
	slices.SortStableFunc(candidates, func(a, b observe.Candidate) int { return cmp.Compare(a.Priority, b.Priority) })
	reg := j.registryOnce() // read once per look, not per task
	// A repo whose agent this look found busy stays busy for the rest of
	// the look: a lease ending meanwhile must not let a less urgent task
	// in ahead of the more urgent one judged busy a moment before.
	busy := map[string]string{}
	seen := make(map[string]bool, len(candidates))
	for _, cand := range candidates {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if key := triggerKey(cand.Trigger); seen[key] {
			continue
		} else {
			seen[key] = true
		}
		err := j.consider(ctx, cand, reg, busy)
		switch {
		case errs.Is(err, errs.BadRequest):
			// The object breaks a rule of ours (an id too long to keep):
			// skipped, reported once; the others go on.
			j.problems.recordProblems(ctx, []observe.Problem{{Kind: string(cand.Trigger.Source), ID: textsafe.Escape(cand.Trigger.SourceID), Reason: err.Error()}})
		case err != nil:
			return err
		}
	}
	if all {
		// Postponed next attempts may go now (a window opened, a task is
		// actionable again): the clock judges them.
		if n, err := j.store.Deadlines.BringForward(ctx); err != nil {
			return err
		} else if n > 0 {
			j.deadlinesChanged.Wake()
		}
	}
	return nil
}

// forget drops the settled keys of triggers the purge deleted: the judge
// holds no more keys than the store holds triggers.
func (j *judge) forget(deleted []lease.Trigger) {
	for _, t := range deleted {
		j.settledKeys.Delete(triggerKey(t))
	}
}

// registryOnce reads gita's registry at most once for its caller: a look
// judges many candidates against one reading.
func (j *judge) registryOnce() func() (*gita.Registry, error) {
	return sync.OnceValues(j.registry)
}

// triggerKey is a trigger's idempotency key as one string.
func triggerKey(t lease.Trigger) string {
	return string(t.Source) + "\x00" + t.SourceID + "\x00" + t.SourceRevision + "\x00" + t.TargetRepo
}

// waitingCandidates are the candidates of the triggers still waiting, as
// this look sees them: a task's trigger while the task is still
// actionable at that revision, a message's while it is unread and asks for
// action, a checkpoint's as it was. A trigger whose source moved on is
// superseded.
func (j *judge) waitingCandidates(ctx context.Context, obs observe.Observation, inbox []observe.Candidate) ([]observe.Candidate, error) {
	trs, err := j.store.Triggers.WaitingTriggers(ctx)
	if err != nil || len(trs) == 0 {
		return nil, err
	}
	current := make(map[string]observe.Candidate, len(obs.Candidates)+len(inbox))
	for _, c := range slices.Concat(obs.Candidates, inbox) {
		current[triggerKey(c.Trigger)] = c
	}
	var out []observe.Candidate
	for _, t := range trs {
		key := t
		// A trigger made again after its workplan's gate cleared is the
		// same revision of its task (consider makes it anew under the
		// workplan's current revision).
		key.SourceRevision, _, _ = strings.Cut(t.SourceRevision, observe.WorkplanRevisionSep)
		if c, ok := current[triggerKey(key)]; ok {
			out = append(out, c)
			continue
		}
		switch t.Source {
		case lease.SourceCheckpoint:
			// Seen once (the cursor moved on): it stands as recorded, while
			// its task is open.
			if v, ok := obs.Tasks[t.TaskID]; ok && !v.Open() {
				if err := j.store.Triggers.Supersede(ctx, t.ID, "the task is "+v.Status); err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, observe.Candidate{Trigger: t})
		case lease.SourceTask, lease.SourceMessage:
			if operatorWake(t) {
				// An operator's wake waits as asked, unless the task it
				// names ended in State Hub meanwhile.
				if v, ok := obs.Tasks[t.TaskID]; ok && !v.Open() {
					if err := j.store.Triggers.Supersede(ctx, t.ID, "the task is "+v.Status); err != nil {
						return nil, err
					}
					continue
				}
				out = append(out, observe.Candidate{Trigger: t, Priority: obs.Tasks[t.TaskID].Priority})
				continue
			}
			why := "the message is read or no longer asks for action"
			if t.Source == lease.SourceTask {
				v, ok := obs.Tasks[t.SourceID]
				switch {
				case !ok:
					why = "the task is in no workplan"
				case v.Revision != t.SourceRevision:
					why = "revision " + v.Revision + " observed"
				default:
					why = "the task is no longer actionable: " + v.Waiting
				}
			}
			if err := j.store.Triggers.Supersede(ctx, t.ID, why); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// applyCheckpoints handles the checkpoints agents posted to State Hub: one
// on a live lease of ours is recorded as if given to the engine (a blocked
// one stops the lease). One whose lease is gone resumes the work
// (checkpoint_resume) only when all of these hold: it is the newest for its
// task (the engine's own checkpoints count), its task is open in State Hub,
// it has a next action and no blocked reason, no lease of the task is live,
// and the lease it names did not end by release (completed, failed or
// blocked: that leaves history, not a request). One with a blocked reason
// stops with it (a blocked task wakes again only when State Hub changes it).
func (j *judge) applyCheckpoints(ctx context.Context, cps []contract.Checkpoint, obs observe.Observation) ([]observe.Candidate, error) {
	var out []observe.Candidate
	newest := map[string]time.Time{} // by task, in this batch
	for _, cp := range cps {
		if cp.TaskID != "" && cp.RecordedAt.After(newest[cp.TaskID]) {
			newest[cp.TaskID] = cp.RecordedAt
		}
	}
	for _, cp := range cps {
		// A checkpoint in State Hub counts only for a lease the engine
		// issued, to the repo and task it names: anyone who can post to
		// State Hub could otherwise put words in another repo's next
		// prompt, or wake a task stopped at a gate.
		if cp.LeaseID == "" {
			continue
		}
		// A checkpoint posted to State Hub is kept and put in a prompt as
		// one handed to the engine is: without what looks like a secret.
		logWithheld(j.log, cp.LeaseID, withholdCheckpoint(&cp.Summary, &cp.NextAction, cp.FilesChanged))
		l, err := j.store.LeaseLists.Lease(ctx, cp.LeaseID)
		if errs.Is(err, errs.NotFound) {
			j.problems.skipCheckpoint(cp, "it names lease "+cp.LeaseID+", which coordination-engine never issued")
			continue
		} else if err != nil {
			return nil, err
		}
		t, err := j.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return nil, err
		}
		task := t.TaskID
		switch {
		case cp.Repo != l.TargetRepo:
			j.problems.skipCheckpoint(cp, "it names repo "+cp.Repo+" but lease "+l.ID+" is "+l.TargetRepo+"'s")
			continue
		case cp.TaskID != "" && cp.TaskID != task:
			j.problems.skipCheckpoint(cp, "it names task "+cp.TaskID+" but lease "+l.ID+" works on "+cmp.Or(task, "no task"))
			continue
		case l.State.Live():
			from := l
			to, err := j.store.Leases.Checkpoint(ctx, lease.Checkpoint{
				SourceID: cp.ID, LeaseID: cp.LeaseID, TaskID: task, Summary: cp.Summary, FilesChanged: cp.FilesChanged,
				NextAction: cp.NextAction, BlockedReason: lease.BlockedReason(cp.BlockedReason),
			}, 0, store.Who{By: "statehub"}, j.timing)
			if err != nil {
				j.log.Info("a State Hub checkpoint was not recorded on its lease", "checkpoint", cp.ID, "lease", cp.LeaseID, "error", err.Error())
			} else {
				j.ends.attemptEnded(ctx, from, to, "the agent stopped: blocked ("+cp.BlockedReason+")")
			}
			continue
		case l.Released != "":
			continue // the agent released it: history, not a request
		}
		v, observed := obs.Tasks[task]
		switch {
		case cp.NextAction == "" && cp.BlockedReason == "":
			continue
		case task == "" || !observed || !v.Open():
			continue // nothing open in State Hub to resume
		case cp.RecordedAt.Before(newest[task]):
			continue // a newer checkpoint of the task came with it
		}
		if latest, err := j.store.Checkpoints.LatestCheckpointOfTask(ctx, task); err != nil {
			return nil, err
		} else if latest.After(cp.RecordedAt) {
			continue // the engine recorded a newer one
		}
		if _, live, err := j.store.LeaseLists.LiveLeaseOfTask(ctx, task); err != nil || live {
			if err != nil {
				return nil, err
			}
			continue
		}
		cand := observe.Candidate{Trigger: lease.Trigger{
			Source: lease.SourceCheckpoint, SourceID: cp.ID, SourceRevision: cp.ID, TargetRepo: l.TargetRepo,
			TaskID: task, WorkplanID: v.Workplan, Reason: lease.CheckpointResume,
			Resume: &lease.Checkpoint{LeaseID: cp.LeaseID, TaskID: task, Summary: cp.Summary, FilesChanged: cp.FilesChanged,
				NextAction: cp.NextAction, BlockedReason: lease.BlockedReason(cp.BlockedReason), RecordedAt: cp.RecordedAt},
		}, Priority: v.Priority}
		switch {
		case v.Gate != "":
			// The task's own gates hold for a resume as for any change.
			cand.Gate, cand.GateReason = v.Gate, v.GateReason
		case cp.BlockedReason != "":
			cand.Gate, cand.GateReason = cp.BlockedReason, "the checkpoint is blocked"
			if !slices.Contains(lease.BlockedReasons, lease.BlockedReason(cp.BlockedReason)) {
				cand.Gate = observe.GatePolicy
			}
		}
		out = append(out, cand)
	}
	return out, nil
}

// consider records a candidate's trigger (once per key) and takes it as far
// as it can go now: stopped or held at a gate, left waiting (with why) while
// it must, or leased and woken. busy holds the repos this look found busy,
// with why; consider adds to it.
func (j *judge) consider(ctx context.Context, cand observe.Candidate, reg func() (*gita.Registry, error), busy map[string]string) error {
	tr := cand.Trigger
	key := triggerKey(tr)
	if _, done := j.settledKeys.Load(key); done {
		return nil
	}
	gate, reason := cand.Gate, cand.GateReason
	// The prompt this trigger would make is scanned before anything of it
	// is stored: a secret in a title never reaches SQLite.
	if rule, hit := j.prompts.scanPrompt(tr, reg); hit {
		tr.Title, tr.Sender = "", ""
		if gate == "" {
			gate, reason = observe.GateSecret, "the prompt would carry secret material ("+rule+")"
		}
	}
	t, _, err := j.store.Triggers.AddTrigger(ctx, tr)
	if err != nil {
		return err
	}
	if t.State == lease.TriggerStopped && t.GateReason != "" && gate == "" && tr.Source == lease.SourceTask && cand.WorkplanRevision != "" {
		// The gate that stopped this revision of the task has cleared (a
		// gate of its workplan: the task's own revision did not change).
		// The workplan's revision makes the trigger new, and it is judged
		// like any other.
		tr.SourceRevision += observe.WorkplanRevisionSep + cand.WorkplanRevision
		if t, _, err = j.store.Triggers.AddTrigger(ctx, tr); err != nil {
			return err
		}
		key = triggerKey(tr)
	}
	now := j.clock.Now()
	switch {
	case t.State == lease.TriggerGated && now.Before(t.NextCheckAt):
		return nil
	case t.State == lease.TriggerStopped && t.GateReason != "":
		return nil // a gate stopped it; a cleared gate of its workplan makes a new one
	case t.State != lease.TriggerPending && t.State != lease.TriggerGated:
		j.settledKeys.Store(key, true)
		return nil
	}
	if gate != "" {
		return j.gate(ctx, t, gate, reason)
	}
	// Work another host holds waits for it, whatever this host's window
	// is doing.
	if wait, why := j.claims.elsewhere(t); wait != "" {
		return j.store.Triggers.WaitTrigger(ctx, t.ID, wait, why)
	}
	if why, ok := busy[t.TargetRepo]; ok {
		return j.store.Triggers.WaitTrigger(ctx, t.ID, lease.WaitBusy, why)
	}
	r, wait, err := j.router.judgeRoute(ctx, t, reg, routeAsk{})
	if err != nil {
		return err
	}
	switch {
	case r.Gate != "":
		return j.gate(ctx, t, r.Gate, r.Reason)
	case wait != "":
		if wait == lease.WaitBusy {
			busy[t.TargetRepo] = r.Reason
		}
		return j.store.Triggers.WaitTrigger(ctx, t.ID, wait, r.Reason)
	}
	// Across hosts, the work is claimed first: the host that wins wakes.
	if _, wait, why, err := j.offers.offer(ctx, t, r.EndpointID, nil); wait != "" {
		return j.store.Triggers.WaitTrigger(ctx, t.ID, wait, why)
	} else if err != nil {
		return err
	}
	j.settledKeys.Store(key, true)
	return nil
}

// routeAsk narrows what judgeRoute judges: Endpoint names one endpoint
// (by either of its ids); Force, the operator asked for another lease of a
// busy repo; Lease, the lease whose next attempt is judged, which holds
// its task and repo already and does not count against itself.
type routeAsk struct {
	Endpoint string
	Force    bool
	Lease    string
}

// gate stops a trigger at a gate, or holds it for a later check when the
// policy allows gated work to be retried and checks remain.
func (j *judge) gate(ctx context.Context, t lease.Trigger, gate, reason string) error {
	checks := 0
	if t.State == lease.TriggerGated {
		checks = t.GateChecks + 1
	}
	if max := j.config.EffectiveSafetyGatedMaxRetries(); checks < max {
		recheck := j.clock.Now().Add(j.timing.Backoff[min(checks, len(j.timing.Backoff)-1)])
		j.log.Info("trigger held at a gate", "trigger", t.ID, "gate", gate, "check", checks+1, "of", max)
		return j.store.Triggers.HoldTrigger(ctx, t.ID, gate, reason, recheck)
	}
	j.log.Info("trigger stopped at a gate", "trigger", t.ID, "repo", t.TargetRepo, "gate", gate)
	return j.store.Triggers.StopTrigger(ctx, t.ID, gate, reason)
}

// operatorWake says whether a trigger is an operator's coordination-engine
// wake rather than something observed in State Hub.
func operatorWake(t lease.Trigger) bool { return api.WokenBy(t) == "operator" }
