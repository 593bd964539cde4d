package cli

import (
	"context"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/api"
	"github.com/tmux-amq/tamq/internal/engine/lease"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
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
// engine's handler answers it (newest first, at most 1000).
func offlineLeases(ctx context.Context, st *store.Store, args api.LeasesArgs) (api.LeasesResult, error) {
	if args.State != "" && !slices.Contains(lease.States, lease.State(args.State)) {
		return api.LeasesResult{}, errs.New(errs.BadRequest, "state %q is not a lease state", textsafe.Escape(args.State))
	}
	ls, err := st.Leases(ctx, args.State, listLimit(args.Limit), max(args.Offset, 0))
	if err != nil {
		return api.LeasesResult{}, err
	}
	res := api.LeasesResult{Leases: []api.Lease{}, Offline: true}
	for _, l := range ls {
		res.Leases = append(res.Leases, api.LeaseOf(l))
	}
	return res, nil
}

// offlineReceipts is the receipts listing read from the database, as the
// engine's handler answers it (oldest first, the latest at most 1000).
func offlineReceipts(ctx context.Context, st *store.Store, args api.ReceiptsArgs) (api.ReceiptsResult, error) {
	rs, err := st.Receipts(ctx, store.ReceiptFilter{LeaseID: args.LeaseID, TriggerID: args.TriggerID,
		BeforeID: args.BeforeID, Limit: listLimit(args.Limit)})
	if err != nil {
		return api.ReceiptsResult{}, err
	}
	res := api.ReceiptsResult{Receipts: []api.Receipt{}, Offline: true}
	for _, r := range rs {
		out := api.Receipt{
			ID: r.ID, At: r.At.UTC(), Kind: r.Kind, TriggerID: r.TriggerID, LeaseID: r.LeaseID, Status: r.Status, Reason: r.Reason,
			Attempt: r.Attempt, CoordinationEndpointID: r.CoordinationEndpointID, LocalMessageID: r.LocalMessageID,
			PolicyProfile: r.PolicyProfile, ConfigVersion: r.ConfigVersion, Detail: r.Detail,
		}
		if !r.NextRetryAt.IsZero() {
			t := r.NextRetryAt.UTC()
			out.NextRetryAt = &t
		}
		if !r.ProjectedAt.IsZero() {
			t := r.ProjectedAt.UTC()
			out.ProjectedAt = &t
		}
		res.Receipts = append(res.Receipts, out)
	}
	return res, nil
}

// listLimit is a listing's limit as the engine applies it (1000 at most).
func listLimit(n int) int {
	if n <= 0 || n > 1000 {
		return 1000
	}
	return n
}
