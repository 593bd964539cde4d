package cluster

import (
	"context"
	"encoding/json"
	"errors"
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
func (c *Claims) Claim(ctx context.Context, taskID string, h Holder, ttl time.Duration) (Holder, bool, error) {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return Holder{}, false, err
	}
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
	// Most claims are of a task nobody holds, or of one that another
	// holds; reading first spares the grant (and its revocation) when the
	// task is taken, and finds our own claim again.
	cur, kv, found, err := c.get(ctx, key, "read the claim of task "+taskID)
	if err != nil {
		return Holder{}, false, err
	}
	if found && cur.Settled != "" && cur.Revision != h.Revision && c.cfg.Now().Sub(cur.SettledAt) >= SettledGrace {
		// The work was settled at another revision: State Hub changed it
		// since, and the new revision is anyone's to claim.
		return c.create(ctx, key, taskID, h, ttl, clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision))
	}
	if found && cur.Settled == "" && ours(cur, h) {
		err := c.keepAlive(ctx, cur.EtcdLease, taskID)
		if err == nil {
			return cur, true, nil
		}
		if !errs.Is(err, errs.Conflict) {
			return Holder{}, false, err
		}
		// Its etcd lease ran out as we looked: the key is gone with it,
		// so claim anew.
	} else if found {
		return cur, false, nil
	}
	return c.create(ctx, key, taskID, h, ttl, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
}

// create grants an etcd lease and puts the claim with it if cond holds
// (the key is absent, or still the settled claim read).
func (c *Claims) create(ctx context.Context, key, taskID string, h Holder, ttl time.Duration, cond clientv3.Cmp) (Holder, bool, error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	cctx, cancel := c.call(ctx)
	grant, err := c.cli.Grant(cctx, secs)
	cancel()
	if err != nil {
		return Holder{}, false, c.failed(ctx, err, "grant an etcd lease for task "+taskID)
	}
	h.EtcdLease = int64(grant.ID)
	if h.ClaimedAt.IsZero() {
		h.ClaimedAt = c.cfg.Now().UTC()
	}
	value, err := json.Marshal(h)
	if err != nil {
		c.revoke(ctx, grant.ID)
		return Holder{}, false, errs.Wrap(errs.Internal, err, "cluster: encode the holder")
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
		return Holder{}, false, c.failed(ctx, err, "claim task "+taskID)
	}
	if resp.Succeeded {
		return h, true, nil
	}
	c.revoke(ctx, grant.ID)
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		// The compare saw the key and the read in the same transaction
		// did too; this is etcd answering against its own rules.
		return Holder{}, false, errs.New(errs.Internal, "cluster: task %s is claimed but its key reads empty", taskID)
	}
	cur, err := decodeHolder(kvs[0].Value, "task "+taskID)
	if err != nil {
		return Holder{}, false, err
	}
	if cur.Settled == "" && ours(cur, h) {
		// Our own concurrent claim of the task won the race.
		return cur, true, c.keepAlive(ctx, cur.EtcdLease, taskID)
	}
	return cur, false, nil
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
	cur, _, found, err := c.get(ctx, key, "read the claim of task "+taskID)
	switch {
	case err != nil:
		return err
	case !found:
		return errs.New(errs.Conflict, "cluster: the claim of task %s by lease %s is gone: its TTL ran out or it was released", taskID, leaseID).
			WithHint("the claim was lost; another host may claim the task now")
	case cur.LeaseID != leaseID:
		return errs.New(errs.Conflict, "cluster: task %s is claimed by %s, not lease %s", taskID, cur.describe(), leaseID).
			WithHint("the claim was lost; another host holds the task now")
	}
	return c.keepAlive(ctx, cur.EtcdLease, taskID)
}

// Release deletes the claim of taskID if leaseID holds it (a transaction on
// the key's revision, so a claim taken since is never deleted) and revokes
// its etcd lease. Releasing what is not ours, or not there, is no error.
func (c *Claims) Release(ctx context.Context, taskID, leaseID string) error {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	cur, kv, found, err := c.get(ctx, key, "read the claim of task "+taskID)
	if errs.Is(err, errs.Conflict) {
		return nil // the key holds no claim: not ours to delete
	}
	if err != nil || !found || cur.LeaseID != leaseID {
		return err
	}
	cctx, cancel := c.call(ctx)
	_, err = c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key)).
		Commit()
	cancel()
	if err != nil {
		return c.failed(ctx, err, "release task "+taskID)
	}
	// The etcd lease was this claim's alone. Should revoking fail, it runs
	// out by its TTL.
	c.revoke(ctx, clientv3.LeaseID(cur.EtcdLease))
	return nil
}

// Holder is who holds taskID's claim; false when nobody does.
func (c *Claims) Holder(ctx context.Context, taskID string) (Holder, bool, error) {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return Holder{}, false, err
	}
	h, _, found, err := c.get(ctx, key, "read the claim of task "+taskID)
	return h, found, err
}

// get reads a claim key: its holder and the key's revisions.
func (c *Claims) get(ctx context.Context, key, op string) (Holder, *mvccpb.KeyValue, bool, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, key)
	cancel()
	if err != nil {
		return Holder{}, nil, false, c.failed(ctx, err, op)
	}
	if len(resp.Kvs) == 0 {
		return Holder{}, nil, false, nil
	}
	h, err := decodeHolder(resp.Kvs[0].Value, "task "+taskOfKeyOr(c.cfg.Prefix, key))
	return h, resp.Kvs[0], err == nil, err
}

// keepAlive renews an etcd lease once; a lease that is gone is a lost claim.
func (c *Claims) keepAlive(ctx context.Context, id int64, taskID string) error {
	cctx, cancel := c.call(ctx)
	_, err := c.cli.KeepAliveOnce(cctx, clientv3.LeaseID(id))
	cancel()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return errs.New(errs.Conflict, "cluster: the claim of task %s ran out (its etcd lease %x is gone)", taskID, id).
			WithHint("the claim was lost; another host may claim the task now")
	}
	return c.failed(ctx, err, "renew the claim of task "+taskID)
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

// taskOfKeyOr is the task id of a claim key, or the key itself.
func taskOfKeyOr(prefix, key string) string {
	if id, ok := taskOfKey(prefix, key); ok {
		return id
	}
	return key
}

func decodeHolder(value []byte, what string) (Holder, error) {
	var h Holder
	if err := json.Unmarshal(value, &h); err != nil || h.LeaseID == "" || h.HostID == "" {
		// Not a claim: nobody's claim, and surely not the caller's.
		return Holder{}, errs.New(errs.Conflict, "cluster: the claim key of %s holds no holder (a key not written by the engine?)", what).
			WithHint("`coordination-engine doctor` lists the keys under the prefix that are not claims")
	}
	return h, nil
}
