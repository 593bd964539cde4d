package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// retention deletes the history older than coordination.retention_days
// (Run), and what the operator's purge names; the judge forgets the
// settled triggers that go.
type retention struct {
	store  *store.Store
	log    *slog.Logger
	clock  clock.Clock
	config *config.Loaded
	// forget drops the judge's settled keys of the triggers deleted.
	forget func(deleted []lease.Trigger)
}

func (rn *retention) ops() ops {
	return ops{api.OpPurge: {door.OperatorOnly, rn.purge}}
}

// retentionEvery is how often the engine deletes the history older than
// coordination.retention_days: the cutoff moves by days, so a few times a
// day keeps the database near its steady size.
const retentionEvery = 6 * time.Hour

// Run is the retention worker: a purge soon after start and every
// retentionEvery after, unless retention_days is 0 (keep everything).
func (rn *retention) Run(ctx context.Context) {
	days := rn.config.Coordination.RetentionDays
	if days == 0 {
		return
	}
	wait := time.Minute // after start: the first looks at State Hub come first
	for {
		select {
		case <-ctx.Done():
			return
		case <-rn.clock.After(wait):
		}
		wait = retentionEvery
		before := rn.clock.Now().Add(-time.Duration(days) * 24 * time.Hour)
		if _, err := rn.purgeHistory(ctx, before, false, "retention"); err != nil && ctx.Err() == nil {
			rn.log.Warn("cannot delete old history; it is tried again later", "error", err.Error())
		}
	}
}

// purge is the operator's `coordination-engine purge`.
func (rn *retention) purge(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.PurgeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Before.IsZero() || args.Before.After(rn.clock.Now()) {
		return nil, errs.New(errs.BadRequest, "purge needs a cutoff in the past")
	}
	return rn.purgeHistory(ctx, args.Before, args.DryRun, "operator")
}

// purgeHistory deletes (or counts) the history older than before, with a
// receipt of what went.
func (rn *retention) purgeHistory(ctx context.Context, before time.Time, dryRun bool, by string) (api.PurgeResult, error) {
	p, err := rn.store.History.Purge(ctx, before, dryRun)
	if err != nil {
		return api.PurgeResult{}, err
	}
	res := api.PurgeResult{Before: before.UTC(), DryRun: dryRun, Receipts: p.Receipts, Checkpoints: p.Checkpoints, Leases: p.Leases, Triggers: p.Triggers}
	if dryRun || p.Total() == 0 {
		return res, nil
	}
	rn.forget(p.TriggerKeys)
	rn.log.Info("old history deleted", "before", before.UTC().Format(time.RFC3339), "receipts", p.Receipts,
		"checkpoints", p.Checkpoints, "leases", p.Leases, "triggers", p.Triggers, "by", by)
	err = rn.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: store.KindHistoryPurged, Status: "purged", Detail: map[string]any{
		"before": before.UTC().Format(time.RFC3339), "receipts": p.Receipts, "checkpoints": p.Checkpoints,
		"leases": p.Leases, "triggers": p.Triggers, "by": by,
	}})
	return res, err
}
