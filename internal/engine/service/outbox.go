package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/outbox"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// outboxIdle is how often the outbox looks for receipts when nothing kicks
// it: receipts are written by many paths, and one indexed query a second
// costs less than a hook in each.
const outboxIdle = time.Second

// receiptOutbox is the engine's outbox: its receipts, and tamq's it relays,
// go to State Hub's POST /v1/progress in batches, oldest first
// (internal/outbox says how nothing is lost or doubled). Kick makes it look
// now; Retry also ends its backoff (State Hub answers again).
type receiptOutbox struct{ *outbox.Publisher }

// newOutbox publishes the engine's receipts, each naming host, the machine
// it runs on.
func newOutbox(st *store.Store, log *slog.Logger, clk clock.Clock, hub statehub.Hub, host string) *receiptOutbox {
	// The database's instance id names its receipts; it is made once, and a
	// failure to read it is one more failed attempt, tried again later.
	// Only the outbox's goroutine reads it.
	var instance string
	instanceID := func(ctx context.Context) (string, error) {
		if instance == "" {
			id, err := st.Observer.Instance(ctx)
			if err != nil {
				return "", err
			}
			instance = id
		}
		return instance, nil
	}
	return &receiptOutbox{&outbox.Publisher{
		Pending: func(ctx context.Context, limit int) ([]contract.Receipt, []int64, error) {
			id, err := instanceID(ctx)
			if err != nil {
				return nil, nil, err
			}
			rs, ids, err := st.Receipts.ReceiptsToPublish(ctx, id, limit)
			// Each names the host it comes from: several hosts' engines
			// may publish to one State Hub.
			for i := range rs {
				rs[i].Host = host
			}
			return rs, ids, err
		},
		Mark: func(ctx context.Context, rows []int64) error {
			if err := st.Receipts.MarkPublished(ctx, rows); err != nil {
				return errs.Wrap(errs.Storage, err, "mark receipts published")
			}
			return nil
		},
		Post: func(ctx context.Context, batch []contract.Receipt) (int, string, error) {
			_, err := hub.PostProgress(ctx, batch)
			return len(batch), "direct", err
		},
		Timing: outbox.Timing{Every: outboxIdle, Backoff: backoff.Policy{Min: time.Second, Max: time.Minute}},
		Clock:  clk,
		Log:    log,
	}}
}

// report fills status's account of the publishing.
func (o *receiptOutbox) report(h *api.StateHubStatus) {
	st := o.Status()
	h.PublishError, h.LastPublish = st.LastError, optionalTime(st.LastSuccess)
}
