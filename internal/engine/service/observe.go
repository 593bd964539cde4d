package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The observer polls State Hub every statehub_poll_interval_seconds, and at
// once on each hint of its event stream; each look turns what it saw into
// triggers, gates, leases and wakes. While State Hub cannot be reached it
// backs off (doubling from a second, never longer than one interval, with
// jitter), so it is back within one interval of State Hub's return. tamq's
// local messaging never waits on any of it.

// checkpointsCursor is the observer_state key of the checkpoint cursor.
const checkpointsCursor = "checkpoints_cursor"

// hubView is what the observer knows of State Hub, for status and explain.
type hubView struct {
	mu sync.Mutex
	// LastPoll is the last look that got an answer; LastError the last
	// failure (cleared by an answer); Paused says State Hub refused the
	// credentials.
	LastPoll        time.Time
	LastError       string
	Paused          bool
	Polls           int
	EventsConnected bool
	EventsOffered   bool // false once the server answered 404
	// LastPublish is when the outbox last published receipts;
	// PublishError why it could not since.
	LastPublish  time.Time
	PublishError string
	obs          observe.Observation
	// inbox are the ids of the unread messages that ask for action, as
	// last observed: a message's next attempt is judged by it;
	// inboxCandidates the same as candidates.
	inbox           map[string]bool
	inboxCandidates []observe.Candidate
	observed        bool
}

func (v *hubView) update(f func(v *hubView)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

// observedTask is task id as the last look at State Hub saw it.
func (s *Service) observedTask(id string) (v observe.TaskView, ok bool) {
	s.hub.view.update(func(hv *hubView) { v, ok = hv.obs.Tasks[id] })
	return v, ok
}

// profilePolicy is the active policy profile as the observation asks it.
type profilePolicy struct{ p policy.Profile }

func (pp profilePolicy) Known(c string) bool {
	return slices.Contains(policy.Known, policy.Category(c))
}
func (pp profilePolicy) RequiresHuman(c string) bool {
	return pp.p.RequiresHuman(policy.Category(c))
}

// runObserver is the observer worker.
func (s *Service) runObserver(ctx context.Context) {
	interval := time.Duration(s.opts.Config.Coordination.StateHubPollIntervalSeconds) * time.Second
	delay := time.Duration(0) // the backoff, zero while State Hub answers
	for {
		wait := interval
		if err := s.observeOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = backoff.Policy{Min: time.Second, Max: interval}.Next(delay)
			wait = backoff.Jitter(delay)
			s.noteFailure(err)
		} else {
			if delay > 0 {
				s.log.Info("State Hub answers again")
				kick(s.outboxKick) // the receipts that waited go now, not at the outbox's own backoff
			}
			delay = 0
		}
		if next, ok, err := s.store.Triggers.NextGateCheck(ctx); err == nil && ok {
			// Not sooner than a second: a check that cannot be made yet
			// (tamq not attached since the start) leaves it due.
			wait = min(wait, max(next.Sub(s.opts.Clock.Now()), time.Second))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.observeKick:
		case <-s.opts.Clock.After(wait):
		}
	}
}

// noteFailure records why a look failed: a refusal of the credentials
// pauses observation until they work, anything else is an outage.
func (s *Service) noteFailure(err error) {
	paused := errs.Is(err, errs.PermissionDeny)
	first := false
	s.hub.view.update(func(v *hubView) {
		first = v.LastError == ""
		v.LastError, v.Paused = err.Error(), paused
	})
	switch {
	case first && paused:
		s.log.Warn("State Hub refused the credentials; observation paused", "error", err.Error())
	case first && (errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Timeout)):
		s.log.Warn("State Hub is not reachable; backing off", "error", err.Error())
	case first:
		s.log.Warn("observation failed; backing off", "error", err.Error())
	default:
		s.log.Debug("State Hub still not answering", "error", err.Error())
	}
}

// runEvents follows State Hub's event stream and kicks the observer on each
// event, reconnecting with a backoff; a server without the stream is not
// asked again until restart.
func (s *Service) runEvents(ctx context.Context) {
	delay := time.Duration(0)
	for {
		err := s.hub.client.Events(ctx, func() {
			delay = 0
			s.hub.view.update(func(v *hubView) { v.EventsConnected = true })
			kick(s.observeKick) // look now: changes may have been missed while away
		}, func() { kick(s.observeKick) })
		s.hub.view.update(func(v *hubView) { v.EventsConnected = false })
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, statehub.ErrNoEvents):
			s.hub.view.update(func(v *hubView) { v.EventsOffered = false })
			s.log.Info("State Hub has no event stream; polling alone")
			return
		}
		delay = backoff.Policy{Min: time.Second, Max: 30 * time.Second}.Next(delay)
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(backoff.Jitter(delay)):
		}
	}
}

// observeOnce looks at State Hub once and acts on what it saw. When the
// look fails but the windows changed (tamq attached, a window opened), the
// work waiting for a window is judged against the last observation: tamq's
// return does not wait for State Hub's.
func (s *Service) observeOnce(ctx context.Context) (err error) {
	routes := s.routesChanged.Swap(false)
	defer func() {
		if err != nil && routes {
			s.routesChanged.Store(true)
		}
	}()
	c := s.hub.client
	wps, changed, invalid, err := c.Workplans(ctx)
	if err != nil {
		s.judgeLast(ctx, routes)
		return err
	}
	changed = s.rejudge.Swap(false) || changed
	defer func() {
		if err != nil && changed {
			s.rejudge.Store(true)
		}
	}()
	msgs, badMsgs, err := c.UnreadMessages(ctx)
	if err != nil {
		s.judgeLast(ctx, routes)
		return err
	}
	cursor, err := s.store.Observer.ObserverValue(ctx, checkpointsCursor)
	if err != nil {
		return err
	}
	cps, next, badCps, err := c.Checkpoints(ctx, cursor)
	if err != nil {
		s.judgeLast(ctx, routes)
		return err
	}
	s.recordInvalid(ctx, slices.Concat(invalid, badMsgs, badCps))
	inbox := observe.Messages(msgs)
	var obs observe.Observation
	s.hub.view.update(func(v *hubView) {
		if changed || !v.observed {
			v.obs, v.observed = observe.Tasks(wps, profilePolicy{s.opts.Config.ActiveProfile()}), true
		}
		obs = v.obs
		v.inboxCandidates = inbox
		v.inbox = make(map[string]bool, len(inbox))
		for _, c := range inbox {
			v.inbox[c.Trigger.SourceID] = true
		}
		v.LastPoll, v.LastError, v.Paused = s.opts.Clock.Now(), "", false
		v.Polls++
	})
	if changed {
		s.recordProblems(ctx, obs.Problems)
		defer s.freeMemory.Reset(releaseAfter) // once this look's work is done
	}
	// Leases offered and not yet taken up: one whose task ended or was
	// gated since, or whose message was read, stops before its agent takes
	// it up (and its wake is cancelled in tamq).
	if err := s.judgeOffered(ctx); err != nil {
		return err
	}
	resume, err := s.applyCheckpoints(ctx, cps, obs)
	if err != nil {
		return err
	}
	if err := s.judge(ctx, obs, inbox, resume, changed || routes); err != nil {
		return err
	}
	if next != cursor {
		return s.store.Observer.SetObserverValue(ctx, checkpointsCursor, next)
	}
	return nil
}

// judgeLast judges the waiting work against the last observation, when
// the windows changed but State Hub cannot be looked at now.
func (s *Service) judgeLast(ctx context.Context, routes bool) {
	var obs observe.Observation
	var inbox []observe.Candidate
	observed := false
	s.hub.view.update(func(v *hubView) { obs, inbox, observed = v.obs, v.inboxCandidates, v.observed })
	if !routes || !observed {
		return
	}
	if err := s.judge(ctx, obs, inbox, nil, true); err != nil {
		s.log.Warn("cannot judge the waiting work against the last observation", "error", err.Error())
	}
}

// judge takes every candidate as far as it can go now: the observation's
// tasks when all is judged again (State Hub or the windows changed), the
// messages asking for action, checkpoints that resume work, and the
// triggers still waiting; then the postponed next attempts of leases are
// judged again by the clock when all was.
func (s *Service) judge(ctx context.Context, obs observe.Observation, inbox, resume []observe.Candidate, all bool) error {
	// Otherwise only the triggers still waiting are judged (for a window,
	// the repo's agent, another lease of their task, or a gate check): an
	// idle poll stays a few cheap requests.
	var candidates []observe.Candidate
	if all {
		candidates = obs.Candidates
	}
	candidates = slices.Concat(candidates, inbox, resume)
	waiting, err := s.waitingCandidates(ctx, obs, inbox)
	if err != nil {
		return err
	}
	candidates = append(candidates, waiting...)
	// One lease at a time per repo, in priority order: the candidates go
	// most urgent first (lower priority numbers), the order of each kind
	// kept otherwise.
	slices.SortStableFunc(candidates, func(a, b observe.Candidate) int { return cmp.Compare(a.Priority, b.Priority) })
	reg := s.registryOnce() // read once per look, not per task
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
		err := s.consider(ctx, cand, reg, busy)
		switch {
		case errs.Is(err, errs.BadRequest):
			// The object breaks a rule of ours (an id too long to keep):
			// skipped, reported once; the others go on.
			s.recordProblems(ctx, []observe.Problem{{Kind: string(cand.Trigger.Source), ID: textsafe.Escape(cand.Trigger.SourceID), Reason: err.Error()}})
		case err != nil:
			return err
		}
	}
	if all {
		// Postponed next attempts may go now (a window opened, a task is
		// actionable again): the clock judges them.
		if n, err := s.store.Deadlines.BringForward(ctx); err != nil {
			return err
		} else if n > 0 {
			kick(s.clockKick)
		}
	}
	return nil
}

// workplanRevision joins a task's revision and its workplan's in the
// revision of a trigger made again when a gate of the workplan cleared.
const workplanRevision = "+wp."

// registryOnce reads gita's registry at most once for its caller: a look
// judges many candidates against one reading.
func (s *Service) registryOnce() func() (*gita.Registry, error) {
	return sync.OnceValues(s.opts.Registry)
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
func (s *Service) waitingCandidates(ctx context.Context, obs observe.Observation, inbox []observe.Candidate) ([]observe.Candidate, error) {
	trs, err := s.store.Triggers.WaitingTriggers(ctx)
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
		key.SourceRevision, _, _ = strings.Cut(t.SourceRevision, workplanRevision)
		if c, ok := current[triggerKey(key)]; ok {
			out = append(out, c)
			continue
		}
		switch t.Source {
		case lease.SourceCheckpoint:
			// Seen once (the cursor moved on): it stands as recorded, while
			// its task is open.
			if v, ok := obs.Tasks[t.TaskID]; ok && !v.Open() {
				if err := s.store.Triggers.Supersede(ctx, t.ID, "the task is "+v.Status); err != nil {
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
					if err := s.store.Triggers.Supersede(ctx, t.ID, "the task is "+v.Status); err != nil {
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
			if err := s.store.Triggers.Supersede(ctx, t.ID, why); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// recordInvalid writes a receipt for each object State Hub sent that the
// contract does not allow, once per object and reason while the engine runs.
func (s *Service) recordInvalid(ctx context.Context, bad []statehub.Invalid) {
	for _, b := range bad {
		s.recordProblems(ctx, []observe.Problem{{Kind: b.Kind, ID: b.ID, Reason: b.Reason}})
	}
}

func (s *Service) recordProblems(ctx context.Context, ps []observe.Problem) {
	for _, p := range ps {
		key := p.Kind + "\x00" + p.ID + "\x00" + p.Reason
		if !s.invalidSeen.add(key) {
			continue
		}
		s.log.Warn("State Hub object skipped", "kind", p.Kind, "id", p.ID, "reason", p.Reason)
		if err := s.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: store.KindSourceInvalid, Status: "skipped", Reason: "invalid_source_object",
			Detail: map[string]any{"kind": p.Kind, "id": p.ID, "problem": p.Reason}}); err != nil {
			s.log.Error("cannot record a skipped object", "error", err.Error())
		}
	}
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
func (s *Service) applyCheckpoints(ctx context.Context, cps []contract.Checkpoint, obs observe.Observation) ([]observe.Candidate, error) {
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
		s.logWithheld(cp.LeaseID, withholdCheckpoint(&cp.Summary, &cp.NextAction, cp.FilesChanged))
		l, err := s.store.LeaseLists.Lease(ctx, cp.LeaseID)
		if errs.Is(err, errs.NotFound) {
			s.skipCheckpoint(cp, "it names lease "+cp.LeaseID+", which coordination-engine never issued")
			continue
		} else if err != nil {
			return nil, err
		}
		t, err := s.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return nil, err
		}
		task := t.TaskID
		switch {
		case cp.Repo != l.TargetRepo:
			s.skipCheckpoint(cp, "it names repo "+cp.Repo+" but lease "+l.ID+" is "+l.TargetRepo+"'s")
			continue
		case cp.TaskID != "" && cp.TaskID != task:
			s.skipCheckpoint(cp, "it names task "+cp.TaskID+" but lease "+l.ID+" works on "+cmp.Or(task, "no task"))
			continue
		case l.State.Live():
			from := l
			to, err := s.store.Leases.Checkpoint(ctx, lease.Checkpoint{
				SourceID: cp.ID, LeaseID: cp.LeaseID, TaskID: task, Summary: cp.Summary, FilesChanged: cp.FilesChanged,
				NextAction: cp.NextAction, BlockedReason: lease.BlockedReason(cp.BlockedReason),
			}, 0, store.Who{By: "statehub"}, s.timing)
			if err != nil {
				s.log.Info("a State Hub checkpoint was not recorded on its lease", "checkpoint", cp.ID, "lease", cp.LeaseID, "error", err.Error())
			} else {
				s.attemptEnded(ctx, from, to, "the agent stopped: blocked ("+cp.BlockedReason+")")
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
		if latest, err := s.store.Checkpoints.LatestCheckpointOfTask(ctx, task); err != nil {
			return nil, err
		} else if latest.After(cp.RecordedAt) {
			continue // the engine recorded a newer one
		}
		if _, live, err := s.store.LeaseLists.LiveLeaseOfTask(ctx, task); err != nil || live {
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

// skipCheckpoint reports, once, a State Hub checkpoint the engine does not
// take.
func (s *Service) skipCheckpoint(cp contract.Checkpoint, why string) {
	if s.invalidSeen.add("checkpoint:" + cp.ID) {
		s.log.Warn("a State Hub checkpoint is ignored", "checkpoint", textsafe.Escape(cp.ID), "reason", textsafe.Escape(why))
	}
}

// consider records a candidate's trigger (once per key) and takes it as far
// as it can go now: stopped or held at a gate, left waiting (with why) while
// it must, or leased and woken. busy holds the repos this look found busy,
// with why; consider adds to it.
func (s *Service) consider(ctx context.Context, cand observe.Candidate, reg func() (*gita.Registry, error), busy map[string]string) error {
	tr := cand.Trigger
	key := triggerKey(tr)
	if _, done := s.settledKeys.Load(key); done {
		return nil
	}
	gate, reason := cand.Gate, cand.GateReason
	// The prompt this trigger would make is scanned before anything of it
	// is stored: a secret in a title never reaches SQLite.
	if rule, hit := s.scanPrompt(tr, reg); hit {
		tr.Title, tr.Sender = "", ""
		if gate == "" {
			gate, reason = observe.GateSecret, "the prompt would carry secret material ("+rule+")"
		}
	}
	t, _, err := s.store.Triggers.AddTrigger(ctx, tr)
	if err != nil {
		return err
	}
	if t.State == lease.TriggerStopped && t.GateReason != "" && gate == "" && tr.Source == lease.SourceTask && cand.WorkplanRevision != "" {
		// The gate that stopped this revision of the task has cleared (a
		// gate of its workplan: the task's own revision did not change).
		// The workplan's revision makes the trigger new, and it is judged
		// like any other.
		tr.SourceRevision += workplanRevision + cand.WorkplanRevision
		if t, _, err = s.store.Triggers.AddTrigger(ctx, tr); err != nil {
			return err
		}
		key = triggerKey(tr)
	}
	now := s.opts.Clock.Now()
	switch {
	case t.State == lease.TriggerGated && now.Before(t.NextCheckAt):
		return nil
	case t.State == lease.TriggerStopped && t.GateReason != "":
		return nil // a gate stopped it; a cleared gate of its workplan makes a new one
	case t.State != lease.TriggerPending && t.State != lease.TriggerGated:
		s.settledKeys.Store(key, true)
		return nil
	}
	if gate != "" {
		return s.gate(ctx, t, gate, reason)
	}
	if why, ok := busy[t.TargetRepo]; ok {
		return s.store.Triggers.WaitTrigger(ctx, t.ID, lease.WaitBusy, why)
	}
	r, wait, err := s.judgeRoute(ctx, t, reg, routeAsk{})
	if err != nil {
		return err
	}
	switch {
	case r.Gate != "":
		return s.gate(ctx, t, r.Gate, r.Reason)
	case wait != "":
		if wait == lease.WaitBusy {
			busy[t.TargetRepo] = r.Reason
		}
		return s.store.Triggers.WaitTrigger(ctx, t.ID, wait, r.Reason)
	}
	l, err := s.store.Leases.Offer(ctx, t.ID, r.EndpointID, s.timing)
	if err != nil {
		return err
	}
	s.settledKeys.Store(key, true)
	s.log.Info("lease offered", "lease", l.ID, "trigger", t.ID, "repo", t.TargetRepo, "reason", string(t.Reason))
	kick(s.clockKick)
	if _, err := s.sendWake(ctx, l); err != nil {
		s.log.Warn("wake not sent yet; the waker tries again", "lease", l.ID, "error", err.Error())
		kick(s.wakerKick)
	}
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

// judgeRoute says where a trigger's wake may go now, or the gate that stops
// it, or what it waits for (wait; r.Reason says it in words): another live
// lease of its task, a window, or the repo's agent busy with other work.
func (s *Service) judgeRoute(ctx context.Context, t lease.Trigger, reg func() (*gita.Registry, error), ask routeAsk) (observe.Routing, lease.Wait, error) {
	if t.TaskID != "" {
		if l, live, err := s.store.LeaseLists.LiveLeaseOfTask(ctx, t.TaskID); err != nil || live && l.ID != ask.Lease {
			// One agent at a time on a task, whatever revision woke it.
			return observe.Routing{Reason: fmt.Sprintf("lease %s of task %s is %s", l.ID, t.TaskID, l.State)}, lease.WaitTaskLeased, err
		}
	}
	r, err := s.route(ctx, reg, t.TargetRepo, ask.Endpoint)
	if err != nil || r.Gate != "" || r.Wait != "" {
		return r, r.Wait, err
	}
	if !ask.Force {
		busy, err := s.busyWith(ctx, t.TargetRepo, ask.Lease)
		if err != nil || busy != "" {
			return observe.Routing{Reason: busy}, lease.WaitBusy, err
		}
	}
	return r, "", nil
}

// gate stops a trigger at a gate, or holds it for a later check when the
// policy allows gated work to be retried and checks remain.
func (s *Service) gate(ctx context.Context, t lease.Trigger, gate, reason string) error {
	checks := 0
	if t.State == lease.TriggerGated {
		checks = t.GateChecks + 1
	}
	if max := s.opts.Config.EffectiveSafetyGatedMaxAttempts(); checks < max {
		recheck := s.opts.Clock.Now().Add(s.timing.Backoff[min(checks, len(s.timing.Backoff)-1)])
		s.log.Info("trigger held at a gate", "trigger", t.ID, "gate", gate, "check", checks+1, "of", max)
		return s.store.Triggers.HoldTrigger(ctx, t.ID, gate, reason, recheck)
	}
	s.log.Info("trigger stopped at a gate", "trigger", t.ID, "repo", t.TargetRepo, "gate", gate)
	return s.store.Triggers.StopTrigger(ctx, t.ID, gate, reason)
}

// route says which endpoint a wake for repo goes to (endpoint narrows the
// choice to one, by either of its ids), or the gate that stops it, or what
// it waits for.
func (s *Service) route(ctx context.Context, registry func() (*gita.Registry, error), repo, endpoint string) (observe.Routing, error) {
	reg, err := registry()
	if err != nil {
		return observe.Routing{}, err
	}
	r, registered := reg.Lookup(repo)
	eps, err := s.hostsOf(ctx, repo, endpoint)
	if err != nil {
		return observe.Routing{}, err
	}
	var hosts []observe.Host
	for _, ep := range eps {
		for _, w := range ep.Windows {
			if w.Repo == repo {
				hosts = append(hosts, observe.Host{EndpointID: ep.ID, Path: w.Path, Mode: w.Mode, NoAgent: w.NoAgent})
			}
		}
	}
	attached := len(hosts) > 0
	if !attached {
		// No window for the repo: is any tamq attached at all?
		if attached, err = s.store.Endpoints.AnyAttached(ctx); err != nil {
			return observe.Routing{}, err
		}
	}
	return observe.Route(repo, r.Path, registered, hosts, attached), nil
}

// operatorWake says whether a trigger is an operator's coordination-engine
// wake rather than something observed in State Hub.
func operatorWake(t lease.Trigger) bool { return api.WokenBy(t) == "operator" }
