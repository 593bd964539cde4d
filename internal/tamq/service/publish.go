package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/outbox"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// PublishTiming paces the receipt publisher; a zero field takes its default.
type PublishTiming struct {
	// Every is how often it looks for receipts when nothing kicks it (a
	// kick follows every receipt written, so this is only a safety net):
	// 5 s.
	Every time.Duration
	// Gather is how long it waits after a kick before it reads: a delivery
	// writes several receipts in a row, and they go in one batch: 200 ms.
	Gather time.Duration
	// After a failure it waits BackoffMin, doubling up to BackoffMax, with
	// jitter: 0.5 s and 60 s.
	BackoffMin, BackoffMax time.Duration
}

func (t PublishTiming) withDefaults() PublishTiming {
	if t.Every == 0 {
		t.Every = 5 * time.Second
	}
	if t.Gather == 0 {
		t.Gather = 200 * time.Millisecond
	}
	if t.BackoffMin == 0 {
		t.BackoffMin = 500 * time.Millisecond
	}
	if t.BackoffMax == 0 {
		t.BackoffMax = time.Minute
	}
	return t
}

// engineBatchBytes bounds a batch sent through the engine: it travels in one
// protocol frame (at most 64 KiB with its envelope).
const engineBatchBytes = 48 << 10

// receiptPublisher is tamq's outbox (spec section 7) and the way its batches
// go: through coordination-engine while tamq is attached to it, else
// straight to State Hub. Without State Hub at all they just stay pending.
type receiptPublisher struct {
	*outbox.Publisher
	// engineAttached is what the attacher last said of its link
	// (linkChanged).
	engineAttached atomic.Bool
}

func newReceiptPublisher(o Options, receipts *store.ReceiptLog, clk clock.Clock, log *slog.Logger) *receiptPublisher {
	t := o.Publish.withDefaults()
	hub := &statehub.Client{Base: o.Config.StateHub.APIBase, Credential: o.Config.StateHub.CredentialCommand}
	engine := engineclient.New(o.Engine)
	p := &receiptPublisher{}
	// Each receipt names the machine it comes from: several hosts may
	// publish to one State Hub.
	host, _ := os.Hostname()
	p.Publisher = &outbox.Publisher{
		Pending: func(ctx context.Context, limit int) ([]contract.Receipt, []int64, error) {
			batch, err := receipts.UnpublishedReceipts(ctx, limit)
			rows := make([]int64, len(batch))
			out := make([]contract.Receipt, len(batch))
			for i, u := range batch {
				rows[i], out[i] = u.RowID, u.Receipt
				out[i].Host = host
			}
			return out, rows, err
		},
		Mark: func(ctx context.Context, rows []int64) error { return receipts.MarkPublished(ctx, rows, clk.Now()) },
		Post: func(ctx context.Context, batch []contract.Receipt) (int, string, error) {
			if p.via() == api.ViaEngine {
				n := fitFrame(batch)
				_, err := engine.Publish(ctx, engineapi.PublishArgs{Receipts: batch[:n]})
				if !errs.Is(err, errs.UnknownOp) {
					return n, api.ViaEngine, err
				}
				// An engine older than publishing: tamq posts them itself.
			}
			if kind := o.Config.StateHub.HubKind(); kind != config.KindContract {
				// Another kind than the contract is the engine's: tamq's
				// receipts wait until the engine takes them.
				return 0, api.ViaEngine, errs.New(errs.Unavailable, "State Hub is %s, which coordination-engine reads; tamq's receipts wait until it is attached", kind)
			}
			_, err := hub.PostProgress(ctx, batch)
			return len(batch), api.ViaDirect, err
		},
		Timing: outbox.Timing{Every: t.Every, Gather: t.Gather, Backoff: backoff.Policy{Min: t.BackoffMin, Max: t.BackoffMax}},
		Clock:  clk,
		Log:    log,
	}
	return p
}

// linkChanged hears from the attacher that tamq's link to
// coordination-engine came up or went down: the next batch goes the new way
// at once, without waiting out a backoff the old way earned.
func (p *receiptPublisher) linkChanged(attached bool) {
	p.engineAttached.Store(attached)
	p.Retry()
}

// via is the way the next batch goes.
func (p *receiptPublisher) via() string {
	if p.engineAttached.Load() {
		return api.ViaEngine
	}
	return api.ViaDirect
}

// fitFrame is how many of the batch fit in one frame to the engine (at
// least one: a receipt is small, and one too large fails as such).
func fitFrame(batch []contract.Receipt) int {
	size := 0
	for i, r := range batch {
		b, _ := json.Marshal(r)
		size += len(b) + 1
		if size > engineBatchBytes && i > 0 {
			return i
		}
	}
	return len(batch)
}

// status is the publisher as status shows it.
func (p *receiptPublisher) status() *api.PublishStatus {
	st := p.Status()
	out := &api.PublishStatus{Via: p.via(), LastError: st.LastError, Paused: st.Paused}
	if !st.LastSuccess.IsZero() {
		out.LastSuccessAt = &st.LastSuccess
	}
	return out
}
