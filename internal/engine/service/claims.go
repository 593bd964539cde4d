package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/cluster"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Claims are what the engine needs of the cluster's claim store
// (internal/cluster over etcd): one live claim per piece of work across
// every host that runs an engine against the same State Hub.
type Claims interface {
	Claim(ctx context.Context, work string, h cluster.Holder, ttl time.Duration) (cluster.Holder, bool, error)
	Renew(ctx context.Context, work, leaseID string) error
	Release(ctx context.Context, work, leaseID string) error
	Settle(ctx context.Context, work, leaseID, outcome string, keep time.Duration) error
	PutCheckpoint(ctx context.Context, work, leaseID string, data []byte, ttl time.Duration) error
	Checkpoint(ctx context.Context, work, leaseID, repo string) (cluster.Resume, bool, error)
	// Held is every claim, by work, in one read.
	Held(ctx context.Context) (map[string]cluster.Holder, error)
}

// claimer claims work across hosts before the engine offers a lease of it,
// keeps each claim alive exactly while its local lease is live (Run), and
// settles it when the lease ends (other hosts leave the work alone until
// State Hub changes it). With no cluster configured (claims nil)
// every claim is won at once and nothing else happens: the engine's own
// SQLite is the only lease store, as on one machine.
type claimer struct {
	claims Claims
	store  *store.Store
	log    *slog.Logger
	clock  clock.Clock
	host   string
	engine string
	ttl    time.Duration
	// ends follows the leases the keeper stops; their claims are this
	// claimer's to settle.
	ends attemptEnds

	mu sync.Mutex
	// kept is when each live lease's claim was last confirmed in etcd, by
	// lease id (zero: not yet, since this run began): past kept+ttl
	// another host may hold the work, and the local lease stops.
	kept map[string]keptClaim
	// lastErr is the cluster's last failure, for status ("" while it
	// answers), and failedAt its time: claims fail at once for a while
	// after (retryEvery), rather than each wait out its own timeout.
	lastErr  string
	failedAt time.Time
	// reported are the keys of etcd the engine passed over and reported
	// (distrust), once each while it runs; made at the first.
	reported *seenSet
	// others are the live claims of other hosts, by work, as the last
	// read of every claim (look) saw them, and readAt its time; lapsed
	// the work they held whose claim has gone since, while its holder may
	// take it back (grace).
	others map[string]cluster.Holder
	readAt time.Time
	lapsed map[string]lapse
}

// lapse is a claim of another host found gone: since when, and whose.
type lapse struct {
	holder cluster.Holder
	since  time.Time
}

type keptClaim struct {
	work string
	at   time.Time
}

// settledFor is how long a settled claim stands in the cluster: far longer
// than any host takes to see State Hub's change of the work, which ends
// its standing sooner (a new revision of the work is anyone's to claim).
const settledFor = time.Hour

// newClaimer is the claimer of host's engine in the cluster (claims nil:
// none configured, and it claims nothing). ends follows the leases its
// keeper stops, the claims of which it settles itself.
func newClaimer(claims Claims, st *store.Store, log *slog.Logger, clk clock.Clock, host, engine string, ttl time.Duration, ends attemptEnds) *claimer {
	c := &claimer{claims: claims, store: st, log: log, clock: clk, host: host, engine: engine, ttl: ttl, kept: map[string]keptClaim{}}
	ends.claims = c
	c.ends = ends
	return c
}

// ClaimTTL is how long a claim outlives its engine: the longest a local
// lease stays live without a word from its agent or tamq (its ack
// deadline, or its renewals missed).
func ClaimTTL(t lease.Timing) time.Duration {
	return max(t.AckTimeout, t.RenewInterval*time.Duration(t.MissedRenewals))
}

// workKey is the cluster's name for the work a trigger is about: its task,
// or its message; "" for work no other host can see (an operator's wake of
// a repo without a task).
func workKey(t lease.Trigger) string {
	switch {
	case t.TaskID != "":
		return t.TaskID
	case t.Source == lease.SourceMessage:
		return "message:" + t.SourceID
	}
	return ""
}

// grace is how long past its TTL a claim etcd could not confirm keeps its
// local lease live, and how long a host waits, once a claim of another
// host it saw is gone, before it claims the work: etcd may have been away
// (every claim's TTL runs out together then), and the host whose agent
// works on it re-takes its claim first when etcd answers. Twice the TTL
// covers an outage of about twice the TTL; a host that died is taken over
// after the TTL and the grace.
func (c *claimer) grace() time.Duration { return 2 * c.ttl }

// look reads every claim under the prefix at once (one range read, at
// each look at State Hub): what other hosts hold shows in tasks, explain
// and status, and a claim of another host that has gone since the last
// read makes its work wait a grace (see grace) before this host claims it.
// While etcd does not answer, the last read stands.
func (c *claimer) look(ctx context.Context) {
	if !c.on() {
		return
	}
	now := c.clock.Now()
	if _, down := c.down(now); down {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	held, err := c.claims.Held(rctx)
	cancel()
	if err != nil {
		c.failed(err)
		c.log.Warn("cannot read the claims in the cluster", "error", err.Error())
		return
	}
	c.answered()
	others := map[string]cluster.Holder{}
	for work, h := range held {
		if h.HostID != c.host && h.Settled == "" {
			others[work] = h
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lapsed == nil {
		c.lapsed = map[string]lapse{}
	}
	for work, h := range c.others {
		if _, still := held[work]; !still {
			if _, known := c.lapsed[work]; !known {
				c.lapsed[work] = lapse{holder: h, since: now}
			}
		}
	}
	for work, l := range c.lapsed {
		if _, again := held[work]; again || now.Sub(l.since) >= c.grace() {
			delete(c.lapsed, work)
		}
	}
	c.others, c.readAt = others, now
}

// heldElsewhere is another host's claim of work as the last read saw it
// (lapsed: gone since, and its holder may still take it back until until).
func (c *claimer) heldElsewhere(work string, now time.Time) (h cluster.Holder, lapsed bool, until time.Time, ok bool) {
	if !c.on() {
		return cluster.Holder{}, false, time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, in := c.lapsed[work]; in && now.Before(l.since.Add(c.grace())) {
		return l.holder, true, l.since.Add(c.grace()), true
	}
	h, ok = c.others[work]
	return h, false, time.Time{}, ok
}

// elsewhere is the wait of t's work while another host holds it, as the
// last look saw the claims ("" when none does): the claim is not asked for
// again, and the look sees when it ends.
func (c *claimer) elsewhere(t lease.Trigger) (lease.Wait, string) {
	now := c.clock.Now()
	if held := c.heldFacts(workKey(t), now); held != nil {
		return lease.WaitHeldElsewhere, held.Words(now)
	}
	return "", ""
}

// heldFacts is another host's claim of a task, for its standing.
func (c *claimer) heldFacts(task string, now time.Time) *standing.Held {
	if task == "" {
		return nil
	}
	h, lapsed, until, ok := c.heldElsewhere(task, now)
	if !ok {
		return nil
	}
	return &standing.Held{Host: h.HostID, LeaseID: h.LeaseID, Lapsed: lapsed, Until: until}
}

// explainHeld says in res who holds its task when another host does: the
// verdict too, unless State Hub says the task ended or a lease of this
// engine's is live on it.
func (c *claimer) explainHeld(res *api.ExplainResult) {
	now := c.clock.Now()
	held := c.heldFacts(res.Task, now)
	if held == nil {
		return
	}
	res.HeldBy, res.Held = held.Host, held.Words(now)
	if res.Status == "done" || res.Status == "cancelled" {
		return
	}
	for _, t := range res.Triggers {
		for _, l := range t.Leases {
			if lease.State(l.State).Live() {
				return
			}
		}
	}
	res.Verdict = "waiting: " + res.Held + "; another host's agent is on it"
}

// on says whether a cluster is configured.
func (c *claimer) on() bool { return c != nil && c.claims != nil }

// claim claims the work of t for the lease leaseID's attempt. It returns
// what the work waits for when another host holds it or etcd does not
// answer ("" when the claim is this engine's).
func (c *claimer) claim(ctx context.Context, t lease.Trigger, leaseID string, attempt int) (lease.Wait, string) {
	work := workKey(t)
	if !c.on() || work == "" {
		return "", ""
	}
	now := c.clock.Now()
	if why, down := c.down(now); down {
		return lease.WaitCluster, "etcd does not answer: " + why
	}
	if wait, why := c.elsewhere(t); wait != "" {
		return wait, why
	}
	h := cluster.Holder{HostID: c.host, EngineID: c.engine, LeaseID: leaseID, Attempt: attempt, ClaimedAt: now, Revision: t.SourceRevision,
		Repo: t.TargetRepo}
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	holder, won, err := c.claims.Claim(cctx, work, h, c.ttl)
	cancel()
	if err != nil {
		c.failed(err)
		c.log.Warn("cannot claim work in the cluster; it waits", "work", work, "error", err.Error())
		if errs.Is(err, errs.Unavailable) {
			return lease.WaitCluster, "etcd does not answer: " + err.Error()
		}
		return lease.WaitCluster, "the cluster cannot claim it: " + err.Error()
	}
	c.answered()
	if holder.Replaced != "" {
		c.distrust(ctx, "claim", work, "", holder.Replaced)
	}
	if !won && holder.Settled == "" && holder.HostID != c.host {
		// Seen held: should its claim go, the next looks wait a grace.
		c.mu.Lock()
		if c.others == nil {
			c.others = map[string]cluster.Holder{}
		}
		c.others[work] = holder
		c.mu.Unlock()
	}
	switch {
	case !won && holder.Settled != "":
		return lease.WaitHeldElsewhere, "settled by host " + holder.HostID + " (lease " + holder.LeaseID + " " + holder.Settled + "); State Hub will say so"
	case !won:
		return lease.WaitHeldElsewhere, "held by host " + holder.HostID + " (lease " + holder.LeaseID + ")"
	}
	return "", ""
}

// hold has the keeper keep the claim of a lease offered on it alive. Until
// then the keeper leaves the claim alone: the lease is not in the database
// yet.
func (c *claimer) hold(t lease.Trigger, leaseID string) {
	if work := workKey(t); c.on() && work != "" {
		c.mu.Lock()
		c.kept[leaseID] = keptClaim{work: work, at: c.clock.Now()}
		c.mu.Unlock()
	}
}

// release gives up the claim of a lease that was never offered.
func (c *claimer) release(ctx context.Context, work, leaseID string) { c.end(ctx, work, leaseID, "") }

// leaseEnded settles the claim of a lease that is no longer live: the
// other hosts leave the work alone until State Hub changes it.
func (c *claimer) leaseEnded(ctx context.Context, l lease.Lease) {
	if !c.on() || l.State.Live() {
		return
	}
	c.mu.Lock()
	k, ok := c.kept[l.ID]
	c.mu.Unlock()
	if !ok {
		t, err := c.store.Triggers.Trigger(ctx, l.TriggerID)
		if err != nil {
			return
		}
		k.work = workKey(t)
	}
	c.settle(ctx, k.work, l.ID, string(l.State))
}

// settle marks the claim of a lease that ended settled.
func (c *claimer) settle(ctx context.Context, work, leaseID, outcome string) {
	c.end(ctx, work, leaseID, outcome)
}

// end stops keeping a claim and ends it in etcd: settled with the lease's
// outcome, or deleted ("": the lease was never offered). A failure is
// logged: the claim's TTL ends it, and a host whose look predates the end
// may then take the work again.
func (c *claimer) end(ctx context.Context, work, leaseID, outcome string) {
	if !c.on() || work == "" {
		return
	}
	c.mu.Lock()
	delete(c.kept, leaseID)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	defer cancel()
	var err error
	if outcome == "" {
		err = c.claims.Release(ctx, work, leaseID)
	} else {
		err = c.claims.Settle(ctx, work, leaseID, outcome, settledFor)
	}
	if err != nil {
		c.failed(err)
		c.log.Warn("cannot end a claim in the cluster; its TTL ends it", "work", work, "lease", leaseID, "outcome", outcome, "error", err.Error())
	}
}

// shareCheckpoint puts a lease's latest checkpoint where every host finds
// it: the host that takes the work after this one dies resumes from it.
// Only the holder of the work's claim can (the cluster checks): under its
// host's keys, for its claim's repo, for the claim's TTL and a grace after.
func (c *claimer) shareCheckpoint(ctx context.Context, t lease.Trigger, cp *lease.Checkpoint) {
	work := workKey(t)
	if !c.on() || work == "" || cp == nil {
		return
	}
	data, err := json.Marshal(cp)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, c.callTimeout())
		// The host that takes the work over, after the claim's TTL and
		// the grace, must still find it.
		err = c.claims.PutCheckpoint(pctx, work, cp.LeaseID, data, c.ttl+c.grace())
		cancel()
	}
	if err != nil {
		if !errs.Is(err, errs.Conflict) {
			c.failed(err)
		}
		c.log.Warn("cannot share a checkpoint in the cluster", "work", work, "lease", cp.LeaseID, "error", err.Error())
	}
}

// sharedCheckpoint is the checkpoint the lease leaseID of t's work may
// resume from, shared by the host that held the work's previous claim (nil
// when none, or no cluster). What the cluster does not vouch for (another
// task, repo or lease than that claim's, a key written by hand) is never
// returned: it is logged and reported once (distrust), and the prompt goes
// without it.
func (c *claimer) sharedCheckpoint(ctx context.Context, t lease.Trigger, leaseID string) *lease.Checkpoint {
	work := workKey(t)
	if !c.on() || work == "" {
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	r, ok, err := c.claims.Checkpoint(gctx, work, leaseID, t.TargetRepo)
	cancel()
	switch {
	case errors.Is(err, cluster.ErrUntrusted):
		c.distrust(ctx, "checkpoint", work, leaseID, err.Error())
		return nil
	case err != nil:
		c.log.Warn("cannot read the checkpoint shared in the cluster; the wake goes without it", "work", work, "lease", leaseID, "error", err.Error())
		return nil
	case !ok:
		return nil
	}
	var cp lease.Checkpoint
	switch {
	case json.Unmarshal(r.Data, &cp) != nil:
		c.distrust(ctx, "checkpoint", work, leaseID, "the checkpoint shared by host "+r.HostID+" is not one the engine records")
		return nil
	case cp.LeaseID != r.LeaseID || cp.TaskID != t.TaskID:
		// The cluster checked the envelope; the checkpoint inside must say
		// the same.
		c.distrust(ctx, "checkpoint", work, leaseID, fmt.Sprintf("the checkpoint shared by host %s names lease %q and task %q, not lease %q and task %q",
			r.HostID, cp.LeaseID, cp.TaskID, r.LeaseID, t.TaskID))
		return nil
	}
	return &cp
}

// kindClusterRefused is the receipt of a key in etcd the engine passed
// over: a claim key that holds no claim, a shared checkpoint it does not
// trust.
const kindClusterRefused = "cluster.refused"

// distrust reports, once while the engine runs, a key of the cluster it
// passed over: in the log and with a receipt (what: "claim" or
// "checkpoint"; leaseID the lease it was read for, if any).
func (c *claimer) distrust(ctx context.Context, what, work, leaseID, why string) {
	c.mu.Lock()
	if c.reported == nil {
		c.reported = newSeenSet(maxInvalidSeen)
	}
	seen := c.reported
	c.mu.Unlock()
	if !seen.add(what + "\x00" + work + "\x00" + why) {
		return
	}
	why = textsafe.Escape(why)
	c.log.Warn("a key in the cluster is passed over: the engine does not take it", "what", what, "work", textsafe.Escape(work), "lease", leaseID, "reason", why)
	detail := map[string]any{"what": what, "work": work, "problem": why}
	if !strings.HasPrefix(work, "message:") {
		detail["task_id"] = work
	}
	if err := c.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: kindClusterRefused, LeaseID: leaseID, Status: "skipped",
		Reason: "untrusted_cluster_key", Detail: detail}); err != nil {
		c.log.Error("cannot record a key of the cluster passed over", "error", err.Error())
	}
}

// Run keeps the claims of the live leases alive, a third of their TTL
// apart. A claim found lost (its key gone or another host's) stops its
// local lease at once; one etcd could not confirm stops it at the last
// look before its TTL would have run out in etcd, since another host may
// take the work then.
func (c *claimer) Run(ctx context.Context) {
	if !c.on() {
		return
	}
	for {
		wait := c.keepEvery()
		if !c.keepAlive(ctx) {
			wait = c.retryEvery() // etcd did not answer: look again sooner
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(wait):
		}
	}
}

// keepEvery is how often the claims are kept alive: three times per TTL,
// so one lost call leaves two more before the claim runs out.
func (c *claimer) keepEvery() time.Duration { return max(c.ttl/3, 100*time.Millisecond) }

// retryEvery is how soon the keeper looks again after etcd did not answer,
// and callTimeout bounds each call to it: together they bound how late the
// keeper can find a claim past its TTL.
func (c *claimer) retryEvery() time.Duration  { return c.keepEvery() / 4 }
func (c *claimer) callTimeout() time.Duration { return c.keepEvery() / 2 }

// keepAlive renews the claim of every live lease once, and says whether
// etcd answered every time.
func (c *claimer) keepAlive(ctx context.Context) bool {
	// The claims held are copied before the live leases are read: every
	// lease held by then is live below unless it ended, and one offered in
	// between is found live, never taken for one that ended.
	c.mu.Lock()
	kept := make(map[string]keptClaim, len(c.kept))
	for id, k := range c.kept {
		kept[id] = k
	}
	c.mu.Unlock()
	live := map[string]lease.Lease{}
	for _, st := range lease.States {
		if !st.Live() {
			continue
		}
		ls, err := c.store.LeaseLists.List(ctx, string(st), 0, 0)
		if err != nil {
			c.log.Error("cannot read the live leases to keep their claims", "error", err.Error())
			return true
		}
		for _, l := range ls {
			live[l.ID] = l
		}
	}
	for id, l := range live {
		if _, ok := kept[id]; ok {
			continue
		}
		c.mu.Lock()
		k, held := c.kept[id] // offered since the copy
		c.mu.Unlock()
		if !held {
			// A live lease of an earlier run. When its claim was last
			// confirmed is not known: until a renewal confirms it, it
			// counts as unconfirmed, and a failed renewal stops it.
			t, err := c.store.Triggers.Trigger(ctx, l.TriggerID)
			if err != nil || workKey(t) == "" {
				continue
			}
			k = keptClaim{work: workKey(t)}
			c.mu.Lock()
			c.kept[id] = k
			c.mu.Unlock()
		}
		kept[id] = k
	}
	answered := true
	for id, k := range kept {
		l, ok := live[id]
		if !ok {
			c.settle(ctx, k.work, id, "ended") // ended while etcd did not answer
			continue
		}
		// etcd restarts the TTL when it takes the renewal, after this
		// moment: counting from here errs on the safe side.
		sent := c.clock.Now()
		rctx, cancel := context.WithTimeout(ctx, c.callTimeout())
		err := c.claims.Renew(rctx, k.work, id)
		cancel()
		switch {
		case err == nil:
			c.answered()
			c.mu.Lock()
			if _, still := c.kept[id]; still {
				c.kept[id] = keptClaim{work: k.work, at: sent}
			}
			c.mu.Unlock()
		case errs.Is(err, errs.Conflict):
			if !c.retake(ctx, l, k) {
				c.stop(ctx, l, "the cluster claim on "+k.work+" was lost: another host may hold it")
			}
		default:
			// etcd does not answer. The claim may run out in etcd a TTL
			// after it was last confirmed, but another host that saw it
			// waits a grace more before it claims the work (look): the
			// lease stops at the last look before that (the next one may
			// come a wait and a call later), so it never runs on where
			// another host may have taken the work. An outage shorter
			// than that leaves the work with this host's agent.
			answered = false
			c.failed(err)
			if c.clock.Now().Add(c.retryEvery() + c.callTimeout()).After(k.at.Add(c.ttl + c.grace())) {
				c.stop(ctx, l, "etcd has not confirmed the cluster claim on "+k.work+" within its TTL and grace ("+(c.ttl+c.grace()).String()+")")
			}
		}
	}
	return answered
}

// retake claims again, for its live lease, work whose claim was found
// gone (etcd was away longer than the TTL, and the claim ran out there):
// the agent is still at work on it, and the other hosts that saw the claim
// wait a grace before they claim the work, so this host takes it back
// first. Only within that grace; a claim another host holds now is lost.
func (c *claimer) retake(ctx context.Context, l lease.Lease, k keptClaim) bool {
	now := c.clock.Now()
	if k.at.IsZero() || now.Add(c.callTimeout()).After(k.at.Add(c.ttl+c.grace())) {
		return false
	}
	t, err := c.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return false
	}
	h := cluster.Holder{HostID: c.host, EngineID: c.engine, LeaseID: l.ID, Attempt: l.Attempt, ClaimedAt: now, Revision: t.SourceRevision,
		Repo: t.TargetRepo}
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	_, won, err := c.claims.Claim(cctx, k.work, h, c.ttl)
	cancel()
	if err != nil || !won {
		return false
	}
	c.log.Info("cluster claim taken back: it had run out while etcd was away", "work", k.work, "lease", l.ID)
	c.mu.Lock()
	if _, still := c.kept[l.ID]; still {
		c.kept[l.ID] = keptClaim{work: k.work, at: now}
	}
	c.mu.Unlock()
	return true
}

// stop stops a local lease whose claim cannot be vouched for.
func (c *claimer) stop(ctx context.Context, l lease.Lease, why string) {
	c.log.Warn("lease stopped: its cluster claim is lost", "lease", l.ID, "reason", why)
	to, err := c.store.Leases.StopLease(ctx, l.ID, "", why)
	if err != nil {
		if !errs.Is(err, errs.LeaseState) {
			c.log.Error("cannot stop a lease whose claim is lost", "lease", l.ID, "error", err.Error())
		}
		return
	}
	c.mu.Lock()
	delete(c.kept, l.ID)
	c.mu.Unlock()
	c.ends.attemptEnded(ctx, l, to, "the lease stopped: "+why)
}

func (c *claimer) failed(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	if errs.Is(err, errs.Unavailable) {
		c.failedAt = c.clock.Now()
	}
	c.mu.Unlock()
}

// down says whether etcd failed so recently that a claim would too.
func (c *claimer) down(now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr, !c.failedAt.IsZero() && now.Sub(c.failedAt) < c.retryEvery()
}

func (c *claimer) answered() {
	c.mu.Lock()
	c.lastErr, c.failedAt = "", time.Time{}
	c.mu.Unlock()
}

// reportOthers counts the tasks other hosts hold, by host, as the last
// read of the claims saw them, and when that was (nil before the first).
func (c *claimer) reportOthers() (map[string]int, *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() {
		return nil, nil
	}
	by := map[string]int{}
	for _, h := range c.others {
		by[h.HostID]++
	}
	at := c.readAt.UTC()
	return by, &at
}

// report is the cluster's part of status.
func (c *claimer) report() (held int, lastErr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.kept), c.lastErr
}
