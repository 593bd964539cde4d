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

// A checkpoint shared across hosts ends up typed into another host's
// agent as the words it recorded itself ("Next action you recorded: …").
// Whoever may write under the prefix could plant one; so a host believes a
// shared checkpoint only as the last word of the work's previous claim:
//
//   - the holder of a claim shares its checkpoint under its own host's
//     sub-prefix (<prefix>/hosts/<host>/checkpoints/<task>), and with it the
//     record of its claim (<prefix>/last/<task>: host, lease, repo), both
//     attached to an etcd lease of the claim's TTL and SettledGrace more
//     (the record lease), kept alive with the claim: the host that takes
//     the work over after the claim lapses reads them within that grace,
//     and nothing shared outlives it;
//   - a new claim keeps the record it found (Holder.Previous);
//   - the host that holds the new claim resumes only from the checkpoint
//     under the sub-prefix of the host that record names, attached to the
//     record's lease, and naming the same task, lease and repo as the
//     record, the repo being the new work's too (trustResume).
//
// A key without an etcd lease (written by hand) fails the checks. Under a
// shared etcd user, every host could still write a consistent record and
// checkpoint (docs/scale.md says so); with an etcd user per host, allowed
// to write its own sub-prefix only, a checkpoint read from under a host's
// sub-prefix is that host's.

// maxCheckpoint bounds a stored checkpoint: the engine's are a summary,
// a next action and file names, far below etcd's request limit (1.5 MiB).
const maxCheckpoint = 64 << 10

// ErrUntrusted is in the chain of every refusal of a shared checkpoint:
// the caller reports it (it is not etcd failing).
var ErrUntrusted = errors.New("a shared checkpoint the engine does not trust")

// shared is the value of a checkpoint key: the checkpoint as the engine
// gave it, with the claim it was made under.
type shared struct {
	TaskID     string          `json:"task_id"`
	Repo       string          `json:"repo"`
	HostID     string          `json:"host_id"`
	LeaseID    string          `json:"lease_id"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

// Resume is a checkpoint another claim of the work shared, as Checkpoint
// found it trusted: the data PutCheckpoint was given, and the claim it
// was made under.
type Resume struct {
	Data                  []byte
	HostID, LeaseID, Repo string
}

// PutCheckpoint stores data as the latest checkpoint of taskID by the
// claim of leaseID, which must be this host's: under the host's sub-prefix,
// with the record of the claim, both on the claim's record lease (granted
// at the first checkpoint, for ttl and SettledGrace more; ttl is how long
// after the claim's last renewal another host may take the work over: the
// claim's TTL, and the grace the engine's hosts wait after it).
func (c *Claims) PutCheckpoint(ctx context.Context, taskID, leaseID string, data []byte, ttl time.Duration) error {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return err
	}
	lk, _ := lastKey(c.cfg.Prefix, taskID)
	ck, err := checkpointKey(c.cfg.Prefix, c.cfg.HostID, taskID)
	if err != nil {
		return err
	}
	if len(data) > maxCheckpoint {
		return errs.New(errs.BadRequest, "cluster: the checkpoint of task %s is %d bytes, over %d", taskID, len(data), maxCheckpoint)
	}
	if !json.Valid(data) {
		return errs.New(errs.BadRequest, "cluster: the checkpoint of task %s is not JSON", taskID)
	}
	for range 2 {
		cur, err := c.get(ctx, key, "read the claim of task "+taskID)
		if err != nil {
			return err
		}
		if !cur.claim() || cur.h.LeaseID != leaseID || cur.h.HostID != c.cfg.HostID {
			return errs.New(errs.Conflict, "cluster: task %s is not claimed by this host's lease %s; its checkpoint is not shared", taskID, leaseID)
		}
		h := cur.h
		granted := false
		if h.RecordLease == 0 {
			secs := int64((ttl + SettledGrace + time.Second - 1) / time.Second)
			cctx, cancel := c.call(ctx)
			grant, err := c.cli.Grant(cctx, secs)
			cancel()
			if err != nil {
				return c.failed(ctx, err, "grant an etcd lease for the checkpoint of task "+taskID)
			}
			h.RecordLease, granted = int64(grant.ID), true
		}
		record := h
		record.Previous = Previous{}
		rv, err1 := json.Marshal(record)
		cv, err2 := json.Marshal(shared{TaskID: taskID, Repo: h.Repo, HostID: h.HostID, LeaseID: h.LeaseID, Checkpoint: data})
		hv, err3 := json.Marshal(h)
		if err := errors.Join(err1, err2, err3); err != nil {
			return errs.Wrap(errs.Internal, err, "cluster: encode the checkpoint")
		}
		ops := []clientv3.Op{
			clientv3.OpPut(lk, string(rv), clientv3.WithLease(clientv3.LeaseID(h.RecordLease))),
			clientv3.OpPut(ck, string(cv), clientv3.WithLease(clientv3.LeaseID(h.RecordLease))),
		}
		if granted {
			// The claim names its record lease, so that Renew keeps it alive.
			ops = append(ops, clientv3.OpPut(key, string(hv), clientv3.WithIgnoreLease()))
		}
		cctx, cancel := c.call(ctx)
		resp, err := c.cli.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.kv.ModRevision)).
			Then(ops...).
			Commit()
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && !granted:
			// The record lease ran out (etcd was away longer than its
			// grace): grant another.
			if err := c.forgetRecordLease(ctx, key, cur); err != nil {
				return err
			}
			continue
		case err != nil:
			if granted {
				c.revoke(ctx, clientv3.LeaseID(h.RecordLease))
			}
			return c.failed(ctx, err, "share the checkpoint of task "+taskID)
		case !resp.Succeeded:
			if granted {
				c.revoke(ctx, clientv3.LeaseID(h.RecordLease))
			}
			return errs.New(errs.Conflict, "cluster: the claim of task %s changed as its checkpoint was shared", taskID)
		}
		return nil
	}
	return errs.New(errs.Unavailable, "cluster: the checkpoint of task %s could not be shared: its etcd lease keeps running out", taskID)
}

// forgetRecordLease takes a record lease that ran out off the claim.
func (c *Claims) forgetRecordLease(ctx context.Context, key string, cur keyRead) error {
	h := cur.h
	h.RecordLease = 0
	v, err := json.Marshal(h)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cluster: encode the holder")
	}
	cctx, cancel := c.call(ctx)
	_, err = c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.kv.ModRevision)).
		Then(clientv3.OpPut(key, string(v), clientv3.WithIgnoreLease())).
		Commit()
	cancel()
	return c.failed(ctx, err, "update the claim of "+key)
}

// Checkpoint is the checkpoint the claim of taskID by leaseID (this
// host's) may resume from: the one its work's previous claim shared, when
// every check of trustResume holds; false when there is none. A checkpoint
// that fails a check is an error with ErrUntrusted in its chain, and is
// not returned.
func (c *Claims) Checkpoint(ctx context.Context, taskID, leaseID, repo string) (Resume, bool, error) {
	key, err := taskKey(c.cfg.Prefix, taskID)
	if err != nil {
		return Resume{}, false, err
	}
	cur, err := c.get(ctx, key, "read the claim of task "+taskID)
	if err != nil {
		return Resume{}, false, err
	}
	if !cur.claim() || cur.h.LeaseID != leaseID || cur.h.HostID != c.cfg.HostID {
		return Resume{}, false, nil // not ours (lost since): nothing to resume for it
	}
	prev := cur.h.Previous
	if prev == (Previous{}) {
		return Resume{}, false, nil // no claim of the work shared a checkpoint before this one
	}
	if prev.HostID == "" {
		return Resume{}, false, untrusted(taskID, "the record of its last claim is not the engine's (it names no host)")
	}
	ck, err := checkpointKey(c.cfg.Prefix, prev.HostID, taskID)
	if err != nil {
		return Resume{}, false, err
	}
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, ck)
	cancel()
	if err != nil {
		return Resume{}, false, c.failed(ctx, err, "read the checkpoint of task "+taskID)
	}
	if len(resp.Kvs) == 0 {
		return Resume{}, false, nil // run out with its record lease
	}
	r, err := trustResume(taskID, repo, cur.h, resp.Kvs[0])
	return r, err == nil, err
}

// trustResume checks a checkpoint read under the sub-prefix of the host
// that held the previous claim of taskID (ours.Previous), for the claim
// ours of work in repo. No I/O: what etcd held is given.
func trustResume(taskID, repo string, ours Holder, kv *mvccpb.KeyValue) (Resume, error) {
	prev := ours.Previous
	var cp shared
	decodeErr := json.Unmarshal(kv.Value, &cp)
	switch {
	case prev.KeyLease == 0:
		return Resume{}, untrusted(taskID, "the record of its last claim has no etcd lease (written by hand?)")
	case prev.RecordLease != prev.KeyLease:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the record of its last claim names etcd lease %x but was attached to %x", prev.RecordLease, prev.KeyLease))
	case prev.LeaseID == "":
		return Resume{}, untrusted(taskID, "the record of its last claim names no lease")
	case kv.Lease == 0:
		return Resume{}, untrusted(taskID, "the checkpoint has no etcd lease (written by hand?)")
	case kv.Lease != prev.RecordLease:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the checkpoint is attached to etcd lease %x, not to the last claim's (%x)", kv.Lease, prev.RecordLease))
	case decodeErr != nil || len(cp.Checkpoint) == 0:
		return Resume{}, untrusted(taskID, "the checkpoint is not one the engine shares")
	case cp.TaskID != taskID:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the checkpoint is of task %q", cp.TaskID))
	case cp.HostID != prev.HostID:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the checkpoint under host %s's keys names host %q", prev.HostID, cp.HostID))
	case cp.LeaseID != prev.LeaseID:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the checkpoint is of lease %q, but the last claim of the work was lease %q", cp.LeaseID, prev.LeaseID))
	case cp.Repo != prev.Repo || cp.Repo != repo || ours.Repo != repo:
		return Resume{}, untrusted(taskID, fmt.Sprintf("the checkpoint is of repo %q (its claim's: %q), and the work is %q's", cp.Repo, prev.Repo, repo))
	}
	return Resume{Data: cp.Checkpoint, HostID: cp.HostID, LeaseID: cp.LeaseID, Repo: cp.Repo}, nil
}

func untrusted(taskID, why string) error {
	return &errs.Error{Code: errs.PermissionDeny, Err: ErrUntrusted,
		Message: fmt.Sprintf("cluster: the checkpoint shared for task %s is not used: %s", taskID, why),
		Hint:    "`coordination-engine doctor` lists what lies under the prefix; docs/scale.md says how to give each host an etcd user of its own"}
}

// previousOf is the record of a task's last claim that shared a checkpoint
// (the <prefix>/last/ key), as a new claim keeps it.
func previousOf(kvs []*mvccpb.KeyValue) Previous {
	if len(kvs) == 0 {
		return Previous{}
	}
	var r Holder
	if json.Unmarshal(kvs[0].Value, &r) != nil {
		// Kept as a record that names no host: resuming from it fails,
		// and says so.
		return Previous{Unreadable: true, KeyLease: kvs[0].Lease}
	}
	return Previous{HostID: r.HostID, LeaseID: r.LeaseID, Repo: r.Repo, RecordLease: r.RecordLease, KeyLease: kvs[0].Lease}
}
