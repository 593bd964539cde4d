package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Claim takes taskID for h unless another holds it: it creates the task's
// key only if absent (a transaction on CreateRevision == 0), its value h as
// JSON, attached to a new etcd lease of ttl (rounded up to whole seconds;
// etcd may raise a very short one to its minimum). won=false returns the
// holder that has it.
//
// Claiming again what h's lease (same host, same LeaseID) holds already is
// a success that keeps the etcd lease alive once more (KeepAliveOnce) and
// grants no second one: a retry, or the engine after a restart. A claim of
// this host under another LeaseID is not h's: won=false, and the caller
// releases it (with that LeaseID) first if it knows it stale. An etcd lease
// granted for a claim that was not won is revoked, so none leaks.
//
// A key that holds no claim (no etcd lease: written by hand, it would
// never run out and block the task on every host for ever; or a value that
// is not the engine's) does not hold the task: Claim takes its place, and
// says so in the returned holder's Replaced for the caller to report.
//
// The new claim keeps the record of the work's last claim that shared a
// checkpoint (Previous, from <prefix>/last/): the one checkpoint it may
// resume from (Checkpoint).
func (c *Claims) Claim(ctx context.Context, taskID string, h Holder, ttl time.Duration) (Holder, bool, error) {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return Holder{}, false, err
	}
	lk, _ := lastKey(c.cfg.Prefix, taskID)
	if h.LeaseID == "" {
		return Holder{}, false, errs.New(errs.BadRequest, "cluster: claim of task %s without a lease id", taskID)
	}
	if ttl <= 0 {
		return Holder{}, false, errs.New(errs.BadRequest, "cluster: claim of task %s with TTL %v", taskID, ttl)
	}
	if h.HostID == "" {
		h.HostID = c.cfg.HostID
	}
	if h.EngineID == "" {
		h.EngineID = c.cfg.EngineID
	}
	h.RecordLease, h.Replaced = 0, ""
	// A claim lost to a key that changed between our read and our write
	// (a lease that ran out, a stray key written meanwhile) is looked at
	// again, a few times.
	for range 3 {
		// Most claims are of a task nobody holds, or of one that another
		// holds; reading first spares the grant (and its revocation) when
		// the task is taken, and finds our own claim again.
		cctx, cancel := c.call(ctx)
		resp, err := c.cli.Txn(cctx).Then(clientv3.OpGet(key), clientv3.OpGet(lk)).Commit()
		cancel()
		if err != nil {
			return Holder{}, false, c.failed(ctx, err, "read the claim of task "+taskID)
		}
		cur := classify(resp.Responses[0].GetResponseRange().Kvs)
		h.Previous = previousOf(resp.Responses[1].GetResponseRange().Kvs)
		var cond clientv3.Cmp
		switch {
		case cur.kv == nil:
			cond = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		case cur.stray != "":
			h.Replaced = "the claim key of task " + taskID + " held no claim: " + cur.stray + "; it was passed over"
			cond = clientv3.Compare(clientv3.ModRevision(key), "=", cur.kv.ModRevision)
		case cur.h.Settled != "" && cur.h.Revision != h.Revision && c.cfg.Now().Sub(cur.h.SettledAt) >= SettledGrace:
			// The work was settled at another revision: State Hub changed
			// it since, and the new revision is anyone's to claim.
			cond = clientv3.Compare(clientv3.ModRevision(key), "=", cur.kv.ModRevision)
		case cur.h.Settled == "" && ours(cur.h, h):
			err := c.keepAlive(ctx, cur.h, taskID)
			if err == nil {
				return cur.h, true, nil
			}
			if !errs.Is(err, errs.Conflict) {
				return Holder{}, false, err
			}
			// Its etcd lease ran out as we looked: the key is gone with it,
			// so claim anew.
			cond = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		default:
			return cur.h, false, nil
		}
		got, won, again, err := c.create(ctx, key, taskID, h, ttl, cond)
		if !again {
			return got, won, err
		}
		h.Replaced = ""
	}
	return Holder{}, false, errs.New(errs.Unavailable, "cluster: the claim key of task %s kept changing as it was claimed", taskID).
		WithHint("the next look tries again")
}

// create grants an etcd lease and puts the claim with it if cond holds
// (the key is absent, or still what was read). again: the key changed
// since, and holds no claim now; look again.
func (c *Claims) create(ctx context.Context, key, taskID string, h Holder, ttl time.Duration, cond clientv3.Cmp) (Holder, bool, bool, error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	cctx, cancel := c.call(ctx)
	grant, err := c.cli.Grant(cctx, secs)
	cancel()
	if err != nil {
		return Holder{}, false, false, c.failed(ctx, err, "grant an etcd lease for task "+taskID)
	}
	h.EtcdLease = int64(grant.ID)
	if h.ClaimedAt.IsZero() {
		h.ClaimedAt = c.cfg.Now().UTC()
	}
	value, err := json.Marshal(h)
	if err != nil {
		c.revoke(ctx, grant.ID)
		return Holder{}, false, false, errs.Wrap(errs.Internal, err, "cluster: encode the holder")
	}
	cctx, cancel = c.call(ctx)
	resp, err := c.cli.Txn(cctx).
		If(cond).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	cancel()
	if err != nil {
		// Whether the key was made is unknown. Revoking the lease deletes
		// it if it was, so no claim stands that we do not know we won.
		c.revoke(ctx, grant.ID)
		return Holder{}, false, false, c.failed(ctx, err, "claim task "+taskID)
	}
	if resp.Succeeded {
		return h, true, false, nil
	}
	c.revoke(ctx, grant.ID)
	cur := classify(resp.Responses[0].GetResponseRange().Kvs)
	if cur.kv == nil || cur.stray != "" {
		return Holder{}, false, true, nil
	}
	if cur.h.Settled == "" && ours(cur.h, h) {
		// Our own concurrent claim of the task won the race.
		return cur.h, true, false, c.keepAlive(ctx, cur.h, taskID)
	}
	return cur.h, false, false, nil
}

// Renew keeps the claim of taskID by leaseID alive once more (the TTL it
// was granted with starts again). A claim that is gone or held by another
// lease is errs.Conflict: it was lost (its TTL ran out, or it was released)
// and the work under it must stop.
func (c *Claims) Renew(ctx context.Context, taskID, leaseID string) error {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	cur, err := c.get(ctx, key, "read the claim of task "+taskID)
	switch {
	case err != nil:
		return err
	case cur.kv == nil:
		return errs.New(errs.Conflict, "cluster: the claim of task %s by lease %s is gone: its TTL ran out or it was released", taskID, leaseID).
			WithHint("the claim was lost; another host may claim the task now")
	case cur.stray != "":
		return errs.New(errs.Conflict, "cluster: the claim of task %s by lease %s is gone: its key holds no claim now (%s)", taskID, leaseID, cur.stray).
			WithHint("the claim was lost; another host may claim the task now")
	case cur.h.LeaseID != leaseID:
		return errs.New(errs.Conflict, "cluster: task %s is claimed by %s, not lease %s", taskID, cur.h.describe(), leaseID).
			WithHint("the claim was lost; another host holds the task now")
	}
	return c.keepAlive(ctx, cur.h, taskID)
}

// Release deletes the claim of taskID if leaseID holds it (a transaction on
// the key's revision, so a claim taken since is never deleted) and revokes
// its etcd lease. Releasing what is not ours, or not there, is no error.
func (c *Claims) Release(ctx context.Context, taskID, leaseID string) error {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	cur, err := c.get(ctx, key, "read the claim of task "+taskID)
	if err != nil || !cur.claim() || cur.h.LeaseID != leaseID {
		return err // not there, not a claim, or not ours: nothing to delete
	}
	cctx, cancel := c.call(ctx)
	_, err = c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.kv.ModRevision)).
		Then(clientv3.OpDelete(key)).
		Commit()
	cancel()
	if err != nil {
		return c.failed(ctx, err, "release task "+taskID)
	}
	// The etcd lease was this claim's alone. Should revoking fail, it runs
	// out by its TTL. A shared checkpoint's record lease is left to run
	// out: the next host may still read it within its grace.
	c.revoke(ctx, clientv3.LeaseID(cur.h.EtcdLease))
	return nil
}

// Holder is who holds taskID's claim; false when nobody does (a key that
// holds no claim counts as nobody).
func (c *Claims) Holder(ctx context.Context, taskID string) (Holder, bool, error) {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return Holder{}, false, err
	}
	cur, err := c.get(ctx, key, "read the claim of task "+taskID)
	if err != nil || !cur.claim() {
		return Holder{}, false, err
	}
	return cur.h, true, nil
}

// keyRead is what a claim key holds: nothing (kv nil), a claim, or a stray
// value that is no claim (stray says why).
type keyRead struct {
	h     Holder
	kv    *mvccpb.KeyValue
	stray string
}

func (f keyRead) claim() bool { return f.kv != nil && f.stray == "" }

// get reads a claim key.
func (c *Claims) get(ctx context.Context, key, op string) (keyRead, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, key)
	cancel()
	if err != nil {
		return keyRead{}, c.failed(ctx, err, op)
	}
	return classify(resp.Kvs), nil
}

// classify tells a claim from what is not one. A claim is what Claim
// writes: a holder, attached to the etcd lease its value names. A key
// without an etcd lease never runs out: written by hand (`etcdctl put`),
// it would block the task on every host for ever, so it counts as no
// claim; so does a value that names another lease, or no holder.
func classify(kvs []*mvccpb.KeyValue) keyRead {
	if len(kvs) == 0 {
		return keyRead{}
	}
	kv := kvs[0]
	var h Holder
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.LeaseID == "" || h.HostID == "" {
		return keyRead{kv: kv, stray: "its value is not a claim of the engine's"}
	}
	switch {
	case kv.Lease == 0:
		return keyRead{h: h, kv: kv, stray: "it has no etcd lease (written by hand, as with `etcdctl put`?), so it would never run out"}
	case h.EtcdLease != kv.Lease:
		return keyRead{h: h, kv: kv, stray: fmt.Sprintf("its value names etcd lease %x, but the key is attached to lease %x", h.EtcdLease, kv.Lease)}
	}
	return keyRead{h: h, kv: kv}
}

// keepAlive renews a claim's etcd lease once, and the lease of its shared
// checkpoint with it; a claim lease that is gone is a lost claim. The
// checkpoint's lease running out loses nothing but the checkpoint (the
// next one shared grants another).
func (c *Claims) keepAlive(ctx context.Context, h Holder, taskID string) error {
	cctx, cancel := c.call(ctx)
	_, err := c.cli.KeepAliveOnce(cctx, clientv3.LeaseID(h.EtcdLease))
	cancel()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return errs.New(errs.Conflict, "cluster: the claim of task %s ran out (its etcd lease %x is gone)", taskID, h.EtcdLease).
			WithHint("the claim was lost; another host may claim the task now")
	}
	if err != nil || h.RecordLease == 0 {
		return c.failed(ctx, err, "renew the claim of task "+taskID)
	}
	cctx, cancel = c.call(ctx)
	_, err = c.cli.KeepAliveOnce(cctx, clientv3.LeaseID(h.RecordLease))
	cancel()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return c.failed(ctx, err, "renew the shared checkpoint of task "+taskID)
}

// revoke ends an etcd lease and the keys attached to it, even when ctx has
// ended (it cleans up after a failure), within the call bound.
func (c *Claims) revoke(ctx context.Context, id clientv3.LeaseID) {
	cctx, cancel := c.call(context.WithoutCancel(ctx))
	defer cancel()
	// Failing, the lease runs out by its TTL: nothing waits for it.
	_, _ = c.cli.Revoke(cctx, id)
}

// ours says whether cur is the claim h would make: same host, same lease.
func ours(cur, h Holder) bool { return cur.LeaseID == h.LeaseID && cur.HostID == h.HostID }

// Held is every claim under the prefix, live or settled, by task: one range
// read of <prefix>/tasks/, whatever the number of tasks, so that a host can
// show at each look which tasks other hosts hold. Keys that hold no claim
// (classify) are left out: they hold nothing.
func (c *Claims) Held(ctx context.Context) (map[string]Holder, error) {
	dir := c.cfg.Prefix + tasksDir
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, dir, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return nil, c.failed(ctx, err, "read the claims under "+dir)
	}
	held := make(map[string]Holder, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, ok := taskOfKey(c.cfg.Prefix, string(kv.Key))
		if f := classify([]*mvccpb.KeyValue{kv}); ok && f.claim() {
			held[id] = f.h
		}
	}
	return held, nil
}
