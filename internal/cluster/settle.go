package cluster

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/internal/errs"
)

// SettledGrace is how long a settled claim holds against every revision of
// its work: the hosts' looks at State Hub (15 s apart by default) see the
// work's end within it.
const SettledGrace = time.Minute

// Settle marks the claim of taskID by leaseID settled: its lease ended
// (outcome: completed, stopped, ...), and the work at the claim's revision
// is not to be taken again. Deleting the key instead would let a host whose
// last look at State Hub predates the end claim the work and do it twice;
// the settled claim stands for keep (on an etcd lease of its own), long
// enough for every host to see State Hub's change. A claim for another
// revision of the work replaces it once it is SettledGrace old: a host may
// still hold a trigger of a revision older than the end (State Hub changed
// the task while it was worked on), and it must see the end first.
// Settling what is not ours, or not there, is no error.
func (c *Claims) Settle(ctx context.Context, taskID, leaseID, outcome string, keep time.Duration) error {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	if outcome == "" {
		return errs.New(errs.BadRequest, "cluster: settle task %s without an outcome", taskID)
	}
	f, err := c.get(ctx, key, "read the claim of task "+taskID)
	if err != nil || !f.claim() || f.h.LeaseID != leaseID || f.h.Settled != "" {
		return err // not there, not a claim, not ours, or settled already
	}
	cur, kv := f.h, f.kv
	cctx, cancel := c.call(ctx)
	grant, err := c.cli.Grant(cctx, int64((keep+time.Second-1)/time.Second))
	cancel()
	if err != nil {
		return c.failed(ctx, err, "grant an etcd lease to settle task "+taskID)
	}
	old := cur.EtcdLease
	cur.Settled, cur.SettledAt, cur.EtcdLease = outcome, c.cfg.Now().UTC(), int64(grant.ID)
	value, err := json.Marshal(cur)
	if err != nil {
		c.revoke(ctx, grant.ID)
		return errs.Wrap(errs.Internal, err, "cluster: encode the holder")
	}
	cctx, cancel = c.call(ctx)
	resp, err := c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
		Commit()
	cancel()
	if err != nil || !resp.Succeeded {
		// Not settled (etcd away, or the claim changed hands as we
		// looked): the claim's own TTL ends it.
		c.revoke(ctx, grant.ID)
		return c.failed(ctx, err, "settle task "+taskID)
	}
	// The live claim's etcd lease has nothing attached any more.
	c.revoke(ctx, clientv3.LeaseID(old))
	return nil
}
