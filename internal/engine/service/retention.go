package service

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// retentionEvery is how often the engine deletes the history older than
// coordination.retention_days: the cutoff moves by days, so a few times a
// day keeps the database near its steady size.
const retentionEvery = 6 * time.Hour

// runRetention is the retention worker: a purge soon after start and every
// retentionEvery after, unless retention_days is 0 (keep everything).
func (s *Service) runRetention(ctx context.Context) {
	days := s.opts.Config.Coordination.RetentionDays
	if days == 0 {
		return
	}
	wait := time.Minute // after start: the first looks at State Hub come first
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(wait):
		}
		wait = retentionEvery
		before := s.opts.Clock.Now().Add(-time.Duration(days) * 24 * time.Hour)
		if _, err := s.purgeHistory(ctx, before, false, "retention"); err != nil && ctx.Err() == nil {
			s.log.Warn("cannot delete old history; it is tried again later", "error", err.Error())
		}
	}
}

// purge is the operator's `coordination-engine purge`.
func (s *Service) purge(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.PurgeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Before.IsZero() || args.Before.After(s.opts.Clock.Now()) {
		return nil, errs.New(errs.BadRequest, "purge needs a cutoff in the past")
	}
	return s.purgeHistory(ctx, args.Before, args.DryRun, "operator")
}

// purgeHistory deletes (or counts) the history older than before, with a
// receipt of what went.
func (s *Service) purgeHistory(ctx context.Context, before time.Time, dryRun bool, by string) (api.PurgeResult, error) {
	p, err := s.store.History.Purge(ctx, before, dryRun)
	if err != nil {
		return api.PurgeResult{}, err
	}
	res := api.PurgeResult{Before: before.UTC(), DryRun: dryRun, Receipts: p.Receipts, Checkpoints: p.Checkpoints, Leases: p.Leases, Triggers: p.Triggers}
	if dryRun || p.Total() == 0 {
		return res, nil
	}
	// The triggers deleted are forgotten here too: settledKeys holds no
	// more keys than the store holds triggers.
	for _, t := range p.TriggerKeys {
		s.settledKeys.Delete(triggerKey(t))
	}
	s.log.Info("old history deleted", "before", before.UTC().Format(time.RFC3339), "receipts", p.Receipts,
		"checkpoints", p.Checkpoints, "leases", p.Leases, "triggers", p.Triggers, "by", by)
	err = s.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: store.KindHistoryPurged, Status: "purged", Detail: map[string]any{
		"before": before.UTC().Format(time.RFC3339), "receipts": p.Receipts, "checkpoints": p.Checkpoints,
		"leases": p.Leases, "triggers": p.Triggers, "by": by,
	}})
	return res, err
}
