package cli

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamqclient"
)

// askOrRead asks the running engine (ask) and, when it is not running,
// reads its database in its place (read, over offlineStore): the one way
// the engine's read-only commands answer whether it runs or not.
func askOrRead[T any](ctx context.Context, a *app.App, ask func() (T, error), read func(*store.Store) (T, error)) (T, error) {
	res, err := ask()
	if !errs.Is(err, errs.Unavailable) {
		return res, err
	}
	st, err := offlineStore(ctx, a, err)
	if err != nil {
		return res, err
	}
	defer st.DB.Close()
	return read(st)
}

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
	// What the running engine refuses a window (its listings are the
	// operator's) the database read in its place refuses too.
	tp, err := paths.Resolve(paths.Tamq, a.Getenv)
	if err != nil {
		return nil, err
	}
	if err := (door.Policy{}).Allows(door.OperatorOnly, tamqclient.New(tp).Self(ctx, a.Getenv), "reading the engine's records"); err != nil {
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
	var err error
	out := api.LeasesResult{Offline: true}
	out.Leases, err = api.Gather(args.Offset, args.Limit, func(offset, limit int) ([]api.Lease, bool, error) {
		args.Offset, args.Limit = offset, limit
		res, err := service.ListLeases(ctx, st, args)
		return res.Leases, res.More, err
	})
	return out, err
}

// offlineReceipts is the receipts listing read from the database, as the
// engine answers it, every page of it: oldest first, each page older.
func offlineReceipts(ctx context.Context, st *store.Store, args api.ReceiptsArgs) (api.ReceiptsResult, error) {
	var err error
	out := api.ReceiptsResult{Offline: true}
	out.Receipts, err = api.GatherOlder(args.BeforeID, args.Limit, func(r api.Receipt) int64 { return r.ID },
		func(before int64, limit int) ([]api.Receipt, bool, error) {
			args.BeforeID, args.Limit = before, limit
			res, err := service.ListReceipts(ctx, st, args)
			return res.Receipts, res.More, err
		})
	return out, err
}
