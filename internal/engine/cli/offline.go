package cli

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

// offlineStore opens the engine's database read-only for a read-only
// command whose call found the engine not running (callErr), and says on
// stderr what the answer is: the database as the engine last wrote it. The
// engine writes every transition with its receipt before it answers, so
// nothing it did is missing there; what needs the running engine (its
// observation of State Hub) is absent. Close the store's DB after use.
func offlineStore(ctx context.Context, a *app.App, callErr error) (*store.Store, error) {
	p, err := a.Paths()
	if err != nil {
		return nil, err
	}
	// The configuration gives only the busy timeout here: a reader need not
	// refuse for a bad policy profile the engine would refuse to start with.
	var busy time.Duration
	if cfg, err := a.Config(); err == nil {
		busy = cfg.BusyTimeout()
	}
	st, err := store.OpenReadOnly(ctx, p, busy)
	if errs.Is(err, errs.NotFound) {
		// Never started: there is nothing to read, and starting it is the fix.
		return nil, errs.New(errs.Unavailable, "%s, and it has no database yet (%s)", callErr, p.Database).
			WithHint("start it with `coordination-engine start --detach`")
	}
	if err != nil {
		return nil, err
	}
	a.Notef("not running: this is its database as last written (%s)", p.Database)
	return st, nil
}

// offlineLeases is the leases listing read from the database, as the
// engine answers it, every page of it (the engine cuts each to a frame).
func offlineLeases(ctx context.Context, st *store.Store, args api.LeasesArgs) (api.LeasesResult, error) {
	out := api.LeasesResult{Leases: []api.Lease{}, Offline: true}
	want := listLimit(args.Limit)
	for {
		res, err := service.ListLeases(ctx, st, args)
		if err != nil {
			return out, err
		}
		out.Leases = append(out.Leases, res.Leases...)
		if !res.More || len(res.Leases) == 0 || len(out.Leases) >= want {
			return out, nil
		}
		args.Offset += len(res.Leases)
		args.Limit = want - len(out.Leases)
	}
}

// offlineReceipts is the receipts listing read from the database, as the
// engine answers it, every page of it: oldest first, each page older.
func offlineReceipts(ctx context.Context, st *store.Store, args api.ReceiptsArgs) (api.ReceiptsResult, error) {
	out := api.ReceiptsResult{Receipts: []api.Receipt{}, Offline: true}
	want := listLimit(args.Limit)
	for {
		res, err := service.ListReceipts(ctx, st, args)
		if err != nil {
			return out, err
		}
		out.Receipts = append(res.Receipts, out.Receipts...)
		if !res.More || len(res.Receipts) == 0 || len(out.Receipts) >= want {
			return out, nil
		}
		args.BeforeID = res.Receipts[0].ID
		args.Limit = want - len(out.Receipts)
	}
}

// listLimit is a listing's limit as the engine applies it (1000 at most),
// as its client pages up to it.
func listLimit(n int) int {
	if n <= 0 || n > 1000 {
		return 1000
	}
	return n
}
