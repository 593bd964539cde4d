package service

import (
	"context"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// publish posts tamq's receipts to State Hub with the engine's credentials
// (tamq sends them here while it is attached). The engine keeps nothing:
// State Hub's error goes back to tamq, which keeps the receipts pending and
// sends them again; State Hub stores each id once.
func (ah *attachHandlers) publish(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.PublishArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if len(args.Receipts) > contract.MaxProgressBatch {
		return nil, errs.New(errs.BadRequest, "%d receipts in one publish; at most %d", len(args.Receipts), contract.MaxProgressBatch)
	}
	// Only tamq's receipts come this way; the engine's own are its to
	// publish, so a receipt claiming another source is a mistake.
	for i, r := range args.Receipts {
		switch {
		case r.ID == "":
			return nil, errs.New(errs.BadRequest, "receipt %d has no id", i+1)
		case r.Source != "tamq":
			return nil, errs.New(errs.BadRequest, "receipt %s has source %q; only tamq's receipts are published this way", r.ID, r.Source)
		}
	}
	if len(args.Receipts) == 0 {
		return api.PublishResult{}, nil
	}
	n, err := ah.hub.PostProgress(ctx, args.Receipts)
	if err != nil {
		return nil, err
	}
	return api.PublishResult{Accepted: n}, nil
}
