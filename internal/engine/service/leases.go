package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// leaseHandlers answer the agents' lease commands (ack, renew, release,
// checkpoint) and tamq's check before it writes a wake. They remember which
// live leases' agents wait at a dialog, as tamq's broker said at a renewal.
type leaseHandlers struct {
	store  *store.Store
	log    *slog.Logger
	timing lease.Timing
	// ends follows the attempts an agent ends; deadlinesChanged wakes the
	// lease clock when an agent moves a lease's deadline.
	ends             attemptEnds
	deadlinesChanged wakeup.Signal
	// claims shares checkpoints with the cluster (the claimer).
	claims interface {
		on() bool
		shareCheckpoint(ctx context.Context, t lease.Trigger, cp *lease.Checkpoint)
	}
	// dialogs are the live leases whose agent waits at a dialog, as tamq's
	// broker last said at a renewal: the window and what shows there.
	dialogs sync.Map
	changes *daemon.Changes
}

func (lh *leaseHandlers) ops() ops {
	return ops{
		// tamq asks before it writes a wake.
		api.OpLeaseCurrent: {door.Anyone, lh.leaseCurrent},
		api.OpLeaseAck:     {door.WindowOrTamq, lh.ack},
		api.OpLeaseRenew:   {door.WindowOrTamq, lh.renew},
		api.OpRelease:      {door.Window, lh.release},
		api.OpCheckpoint:   {door.Window, lh.checkpoint},
	}
}

// ack is the agent acknowledging its lease: it begins the work. The wake
// message is acknowledged in tamq too, so tamq stops presenting it.
func (lh *leaseHandlers) ack(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.LeaseArgs
	if err := decodeLease(req, &args, &args.LeaseID); err != nil {
		return nil, err
	}
	if err := lh.mayActOnLease(ctx, args.LeaseID); err != nil {
		return nil, err
	}
	l, err := lh.store.Leases.Ack(ctx, args.LeaseID, args.Attempt, whoOf(ctx), lh.timing)
	if err != nil {
		// A prompt presented again after its lease ended (the engine died
		// before it settled it in tamq): settled now as the engine decided,
		// acknowledged when the work was completed, else cancelled, so tamq
		// stops presenting it and holding the window, and its history says
		// what became of the lease; the agent is still told.
		if ended, lerr := lh.store.LeaseLists.Lease(ctx, args.LeaseID); lerr == nil && !ended.State.Live() {
			if ended.State == lease.Completed {
				lh.ends.wakes.settleWake(ctx, ended)
			} else {
				lh.ends.wakes.cancelWakes(ctx, ended.ID, ended.Attempt, "the lease ended: "+ended.StopReason)
			}
		}
		return nil, err
	}
	lh.deadlinesChanged.Wake()
	lh.ends.wakes.settleWake(ctx, l)
	return api.LeaseOf(l), nil
}

func (lh *leaseHandlers) renew(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.LeaseArgs
	if err := decodeLease(req, &args, &args.LeaseID); err != nil {
		return nil, err
	}
	if err := lh.mayActOnLease(ctx, args.LeaseID); err != nil {
		return nil, err
	}
	by := whoOf(ctx)
	l, err := lh.store.Leases.Renew(ctx, args.LeaseID, args.Attempt, by, lh.timing)
	if err != nil {
		return nil, err
	}
	if by.By == lease.ByBroker {
		// The broker says at each renewal whether its agent waits at a
		// dialog: a person is needed there, and status says where.
		var was any
		var had bool
		if args.Dialog != "" {
			was, had = lh.dialogs.Swap(l.ID, args.Dialog)
		} else {
			was, had = lh.dialogs.LoadAndDelete(l.ID)
		}
		if now := args.Dialog; had != (now != "") || had && was.(string) != now {
			lh.changes.Bump() // a person is needed at a dialog, or no longer
		}
	}
	lh.deadlinesChanged.Wake()
	return api.LeaseOf(l), nil
}

// whoOf is the caller of a lease command as its receipt names it: tamq's
// service acts for its broker.
func whoOf(ctx context.Context) store.Who {
	c := callerFrom(ctx)
	if c.Kind == door.Tamq {
		return store.Who{By: lease.ByBroker}
	}
	return store.Who{By: string(c.Kind), Repo: c.Repo}
}

// mayActOnLease refuses an agent a lease of another repo's.
func (lh *leaseHandlers) mayActOnLease(ctx context.Context, id string) error {
	if c := callerFrom(ctx); c.Kind != door.Agent {
		return nil
	}
	l, err := lh.store.LeaseLists.Lease(ctx, id)
	if err != nil {
		return err
	}
	return mayActOn(ctx, "lease "+id, l.TargetRepo)
}

func (lh *leaseHandlers) release(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.ReleaseArgs
	if err := decodeLease(req, &args, &args.LeaseID); err != nil {
		return nil, err
	}
	if err := lease.CheckRelease(lease.Result(args.Result), args.Reason); err != nil {
		return nil, err
	}
	from, err := lh.store.LeaseLists.Lease(ctx, args.LeaseID)
	if err != nil {
		return nil, err
	}
	if err := mayActOn(ctx, "lease "+args.LeaseID, from.TargetRepo); err != nil {
		return nil, err
	}
	withheld := withhold("reason", &args.Reason)
	l, err := lh.store.Leases.Release(ctx, args.LeaseID, args.Result, args.Reason, args.Attempt, whoOf(ctx), lh.timing)
	if err != nil {
		return nil, err
	}
	logWithheld(lh.log, l.ID, withheld)
	lh.ends.attemptEnded(ctx, from, l, "lease released "+args.Result)
	out := api.LeaseOf(l)
	out.Withheld = withheld
	return out, nil
}

func (lh *leaseHandlers) checkpoint(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.CheckpointArgs
	if err := decodeLease(req, &args, &args.LeaseID); err != nil {
		return nil, err
	}
	// Its text reaches the lease's next prompt as the engine's words: only
	// the lease's own agent (or the operator) may write it.
	if err := lh.mayActOnLease(ctx, args.LeaseID); err != nil {
		return nil, err
	}
	withheld := withholdCheckpoint(&args.Summary, &args.NextAction, args.FilesChanged)
	l, err := lh.store.Leases.Checkpoint(ctx, lease.Checkpoint{
		LeaseID: args.LeaseID, TaskID: args.TaskID, Summary: args.Summary, FilesChanged: args.FilesChanged,
		NextAction: args.NextAction, BlockedReason: lease.BlockedReason(args.BlockedReason),
	}, args.Attempt, whoOf(ctx), lh.timing)
	if err != nil {
		return nil, err
	}
	lh.shareCheckpoint(ctx, l)
	if l.State == lease.Stopped {
		// A blocked checkpoint ended the attempt it was made on.
		from := l
		from.State = lease.Checkpointed
		lh.ends.attemptEnded(ctx, from, l, "the agent stopped: blocked ("+args.BlockedReason+")")
	} else {
		lh.deadlinesChanged.Wake()
	}
	logWithheld(lh.log, l.ID, withheld)
	out := api.LeaseOf(l)
	out.Withheld = withheld
	return out, nil
}

// shareCheckpoint gives the lease's checkpoint to the cluster ([cluster]):
// the host that takes the work after this one resumes from it.
func (lh *leaseHandlers) shareCheckpoint(ctx context.Context, l lease.Lease) {
	if !lh.claims.on() {
		return
	}
	t, err := lh.store.Triggers.Trigger(ctx, l.TriggerID)
	if err != nil {
		return
	}
	cp, err := lh.store.Checkpoints.LatestCheckpoint(ctx, l.ID)
	if err != nil {
		return
	}
	lh.claims.shareCheckpoint(ctx, t, cp)
}

// leaseCurrent answers tamq, before it writes a wake: is that attempt of the
// lease still the one to work on? A prompt of an attempt that ended (the
// lease completed, stopped, ran out, or a newer attempt was offered) must
// not be typed.
func (lh *leaseHandlers) leaseCurrent(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.LeaseArgs
	if err := decodeLease(req, &args, &args.LeaseID); err != nil {
		return nil, err
	}
	l, err := lh.store.LeaseLists.Lease(ctx, args.LeaseID)
	if errs.Is(err, errs.NotFound) {
		return api.LeaseCurrentResult{Reason: "coordination-engine has no lease " + args.LeaseID}, nil
	}
	if err != nil {
		return nil, err
	}
	res := api.LeaseCurrentResult{State: string(l.State), Attempt: l.Attempt}
	switch {
	case !l.State.Live():
		res.Reason = fmt.Sprintf("lease %s is %s", l.ID, l.State)
		if l.StopReason != "" {
			res.Reason += ": " + l.StopReason
		}
	case args.Attempt > l.Attempt:
		res.Reason = fmt.Sprintf("lease %s was never offered as attempt %d (it is at attempt %d)", l.ID, args.Attempt, l.Attempt)
	case args.Attempt < l.Attempt:
		res.Reason = fmt.Sprintf("attempt %d of lease %s was superseded by attempt %d", args.Attempt, l.ID, l.Attempt)
	case l.State == lease.RetryWait:
		res.Reason = fmt.Sprintf("attempt %d of lease %s is waiting to be offered", l.Attempt, l.ID)
	default:
		res.Current = true
	}
	return res, nil
}

// decodeLease decodes a lease request and checks its lease id.
func decodeLease(req *unixrpc.Request, args any, id *string) error {
	if err := unixrpc.DecodeArgs(req, args); err != nil {
		return err
	}
	if *id == "" || len(*id) > 128 || textsafe.NameProblem(*id) != "" {
		return errs.New(errs.BadRequest, "lease id %q is not a lease id", textsafe.Escape(*id))
	}
	return nil
}

func (sh *statusHandlers) leases(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.LeasesArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return ListLeases(ctx, sh.store, args)
}

// ListLeases is the lease listing of st: newest first, one page that fits a
// frame. The engine answers it, and its commands read it offline.
func ListLeases(ctx context.Context, st *store.Store, args api.LeasesArgs) (api.LeasesResult, error) {
	if args.State != "" && !slices.Contains(lease.States, lease.State(args.State)) {
		return api.LeasesResult{}, errs.New(errs.BadRequest, "state %q is not a lease state", textsafe.Escape(args.State))
	}
	ls, err := st.LeaseLists.List(ctx, args.State, api.ListLimit(args.Limit), max(args.Offset, 0))
	if err != nil {
		return api.LeasesResult{}, err
	}
	triggers := make([]string, 0, len(ls))
	for _, l := range ls {
		triggers = append(triggers, l.TriggerID)
	}
	tasks, err := st.LeaseLists.TasksOfTriggers(ctx, triggers)
	if err != nil {
		return api.LeasesResult{}, err
	}
	res := api.LeasesResult{Leases: []api.Lease{}}
	for _, l := range ls {
		out := api.LeaseOf(l)
		out.TaskID = tasks[l.TriggerID]
		res.Leases = append(res.Leases, out)
	}
	res.Leases, res.More = fitFrame(res.Leases, false)
	return res, nil
}

func (sh *statusHandlers) receipts(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.ReceiptsArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return ListReceipts(ctx, sh.store, args)
}

// ListReceipts is the receipt listing of st: oldest first, the latest page
// that fits a frame. The engine answers it, and its commands read it
// offline.
func ListReceipts(ctx context.Context, st *store.Store, args api.ReceiptsArgs) (api.ReceiptsResult, error) {
	rs, err := st.Receipts.List(ctx, store.ReceiptFilter{LeaseID: args.LeaseID, TriggerID: args.TriggerID, TaskID: args.TaskID,
		BeforeID: args.BeforeID, Limit: api.ListLimit(args.Limit)})
	if err != nil {
		return api.ReceiptsResult{}, err
	}
	if len(rs) == 0 && args.TriggerID != "" && args.BeforeID == 0 {
		if err := knownTrigger(ctx, st, args.TriggerID); err != nil {
			return api.ReceiptsResult{}, err
		}
	}
	res := api.ReceiptsResult{Receipts: []api.Receipt{}}
	for _, r := range rs {
		res.Receipts = append(res.Receipts, receiptOf(r))
	}
	// Oldest first: what is cut to fit is the oldest, the client asks for
	// it next.
	res.Receipts, res.More = fitFrame(res.Receipts, true)
	return res, nil
}

// knownTrigger refuses a trigger id the engine never had: no receipt
// matches it, and an empty list would read as "nothing happened". A person
// who passes a task id (the id they know; trigger ids are the engine's
// own) is told to filter by task.
func knownTrigger(ctx context.Context, st *store.Store, id string) error {
	if _, err := st.Triggers.Trigger(ctx, id); !errs.Is(err, errs.NotFound) {
		return err
	}
	e := errs.New(errs.NotFound, "no trigger %s", textsafe.Escape(id))
	if trs, err := st.Triggers.TriggersOfTask(ctx, id); err != nil {
		return err
	} else if len(trs) > 0 {
		return e.WithHint("%s is a task: use --task %s", textsafe.Escape(id), textsafe.Escape(id))
	}
	return e.WithHint("trigger ids are in `receipts --json` (trigger_id), `wake` and `explain`; to filter by task use --task")
}

// frameBudget is what a listing's items may take of one protocol frame
// (unixrpc.MaxFrame), leaving room for the envelope.
const frameBudget = unixrpc.MaxFrame - 8<<10

// fitFrame keeps as many items as fit one frame: from the end when fromEnd
// (the newest of an oldest-first list), else from the start. more says some
// were left out.
func fitFrame[T any](items []T, fromEnd bool) ([]T, bool) {
	size := 0
	for i := range items {
		j := i
		if fromEnd {
			j = len(items) - 1 - i
		}
		b, _ := json.Marshal(items[j]) // wire types always marshal
		if size += len(b) + 1; size > frameBudget {
			if fromEnd {
				return items[j+1:], true
			}
			return items[:j], true
		}
	}
	return items, false
}

// receiptOf is a stored receipt as the listing carries it: its times in
// UTC (a zero time stays zero, and is left out of the JSON).
func receiptOf(r receipt.Receipt) api.Receipt {
	r.At = r.At.UTC()
	if !r.NextRetryAt.IsZero() {
		r.NextRetryAt = r.NextRetryAt.UTC()
	}
	if !r.ProjectedAt.IsZero() {
		r.ProjectedAt = r.ProjectedAt.UTC()
	}
	return r
}

// atDialog are the live leases whose agent waits at a dialog, by lease id,
// for status; the ones that ended since their last renewal are forgotten.
func (lh *leaseHandlers) atDialog(ctx context.Context) []api.LeaseAtDialog {
	var out []api.LeaseAtDialog
	lh.dialogs.Range(func(k, v any) bool {
		id := k.(string)
		if l, err := lh.store.LeaseLists.Lease(ctx, id); err != nil || !l.State.Live() {
			lh.dialogs.Delete(id) // ended since its last renewal
			return true
		}
		out = append(out, api.LeaseAtDialog{LeaseID: id, Dialog: v.(string)})
		return true
	})
	slices.SortFunc(out, func(a, b api.LeaseAtDialog) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	return out
}
