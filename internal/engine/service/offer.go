package service

import (
	"context"
	"log/slog"

	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// workClaims is what offering a lease needs of the cluster's claims (the
// claimer): the work claimed across hosts before its lease is offered, the
// claim kept while the lease lives, given up when no lease came of it.
type workClaims interface {
	claim(ctx context.Context, t lease.Trigger, leaseID string, attempt int) (lease.Wait, string)
	hold(t lease.Trigger, leaseID string)
	release(ctx context.Context, work, leaseID string)
}

// wakeSender sends the wake of an offered lease's current attempt to tamq
// (the waker).
type wakeSender interface {
	sendWake(ctx context.Context, l lease.Lease) (lease.Lease, error)
}

// leaseOffers is the one offer-and-wake path, as the judge and the
// operator's wake ask it (the offerer).
type leaseOffers interface {
	offer(ctx context.Context, t lease.Trigger, endpointID string, next *lease.Lease) (lease.Lease, lease.Wait, string, error)
}

// offerer is the one path from judged work to a woken agent, taken by the
// judge (a trigger that may go), its retries (a lease's next attempt) and
// the operator's wake: the work is claimed across hosts, the lease offered
// and kept claimed, and its wake sent to tamq.
type offerer struct {
	store  *store.Store
	log    *slog.Logger
	timing lease.Timing
	claims workClaims
	wakes  wakeSender
	// deadlinesChanged wakes the lease clock: a new lease has an ack
	// deadline it does not know yet.
	deadlinesChanged wakeup.Signal
	// wakesPending wakes the waker, which sends the wakes tamq has not
	// answered.
	wakesPending wakeup.Signal
}

// offer offers trigger t's work on endpointID (by the engine's id; "" lets
// tamq choose): a new lease when next is nil, else the next attempt of
// next, a lease in retry_wait. It returns what the work waits for instead
// when another host holds it or the cluster does not answer, and no lease.
//
// A new lease's wake is sent at once, since the look of the judge or the
// operator that offered it waits for tamq's answer (the waker sends it
// again if it is lost); the lease returned is as that answer left it. A
// next attempt's wake is the waker's to send, so that the lease clock's
// turn that offers it does not wait on tamq.
func (o *offerer) offer(ctx context.Context, t lease.Trigger, endpointID string, next *lease.Lease) (lease.Lease, lease.Wait, string, error) {
	id, attempt := store.NewID(), 1
	if next != nil {
		// The claim is this lease's already; claiming it again confirms
		// it (another host took the work if it ran out meanwhile).
		id, attempt = next.ID, next.Attempt+1
	}
	if wait, why := o.claims.claim(ctx, t, id, attempt); wait != "" {
		return lease.Lease{}, wait, why, nil
	}
	if next != nil {
		l, err := o.store.Leases.Reoffer(ctx, id, endpointID, o.timing)
		if err != nil {
			return l, "", "", err
		}
		o.claims.hold(t, id)
		o.wakesPending.Wake()
		return l, "", "", nil
	}
	l, err := o.store.Leases.Offer(ctx, t.ID, endpointID, id, o.timing)
	if err != nil {
		o.claims.release(ctx, workKey(t), id)
		return l, "", "", err
	}
	o.claims.hold(t, l.ID)
	o.log.Info("lease offered", "lease", l.ID, "trigger", t.ID, "repo", t.TargetRepo, "reason", string(t.Reason))
	o.deadlinesChanged.Wake()
	sent, err := o.wakes.sendWake(ctx, l)
	if err != nil {
		o.log.Warn("wake not sent yet; the waker tries again", "lease", l.ID, "error", err.Error())
		o.wakesPending.Wake()
	}
	return sent, "", "", nil
}
