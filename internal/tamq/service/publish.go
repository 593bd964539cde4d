package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
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

// publisher sends tamq's receipts to State Hub (spec section 7): through
// coordination-engine while tamq is attached to it, else straight to State
// Hub. A receipt is marked published only after State Hub took it, and State
// Hub stores each id once, so a crash between the two sends it again and
// doubles nothing. Without State Hub at all it just keeps them pending.
type publisher struct {
	timing PublishTiming
	hub    *statehub.Client
	engine *engineclient.Client
	// kick says receipts were written; retry says the way to State Hub
	// changed (attached or not), which is worth a try at once.
	kick, retry chan struct{}

	mu          sync.Mutex
	lastSuccess time.Time
	lastErr     string
	paused      bool
	failing     bool
}

func newPublisher(o Options) *publisher {
	return &publisher{
		timing: o.Publish.withDefaults(),
		hub:    &statehub.Client{Base: o.Config.StateHub.APIBase, Credential: o.Config.StateHub.CredentialCommand},
		engine: engineclient.New(o.Engine),
		kick:   make(chan struct{}, 1), retry: make(chan struct{}, 1),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// receiptAdded is the store's hook: cheap, never blocks the write.
func (p *publisher) receiptAdded() { signal(p.kick) }

// routeChanged is told by the attacher when tamq attaches or detaches.
func (p *publisher) routeChanged() { signal(p.retry) }

// receiptPublisher is the publisher worker with what it reads: the receipts not
// yet published, and whether tamq is attached to coordination-engine.
type receiptPublisher struct {
	pub        *publisher
	store      *store.ReceiptLog
	log        *slog.Logger
	clock      clock.Clock
	engineLink *attachment
}

// publishLoop is the publisher worker.
func (s *receiptPublisher) publishLoop(ctx context.Context) {
	p := s.pub
	delay := time.Duration(0) // the backoff, zero while State Hub takes receipts
	for {
		more, err := s.publishBatch(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := p.timing.Every
		switch {
		case err != nil:
			delay = backoff.Policy{Min: p.timing.BackoffMin, Max: p.timing.BackoffMax}.Next(delay)
			wait = backoff.Jitter(delay)
		case more:
			delay, wait = 0, 0
		default:
			delay = 0
		}
		// While State Hub fails, new receipts do not make it ask sooner.
		kick := p.kick
		if delay > 0 {
			kick = nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-kick:
			timer.Stop()
			gather := time.NewTimer(p.timing.Gather)
			select {
			case <-ctx.Done():
				gather.Stop()
				return
			case <-gather.C:
			}
		case <-p.retry:
			timer.Stop()
			delay = 0
		}
	}
}

// publishBatch sends the oldest pending receipts and marks them; more says
// others are waiting.
func (s *receiptPublisher) publishBatch(ctx context.Context) (more bool, err error) {
	p := s.pub
	batch, err := s.store.UnpublishedReceipts(ctx, contract.MaxProgressBatch)
	if err != nil {
		s.log.Error("cannot read the receipts to publish", "error", err.Error())
		return false, err
	}
	if len(batch) == 0 {
		return false, nil
	}
	more = len(batch) == contract.MaxProgressBatch
	via := s.publishVia()
	if via == api.ViaEngine {
		n := fitFrame(batch)
		more = more || n < len(batch)
		_, err = p.engine.Publish(ctx, engineapi.PublishArgs{Receipts: wireForms(batch[:n])})
		if errs.Is(err, errs.UnknownOp) {
			// An engine older than publishing: tamq posts them itself.
			via = api.ViaDirect
		} else {
			batch = batch[:n]
		}
	}
	if via == api.ViaDirect {
		_, err = p.hub.PostProgress(ctx, wireForms(batch))
	}
	if ctx.Err() != nil {
		// Stopping: whatever State Hub took is sent again at the next start.
		return false, ctx.Err()
	}
	s.publishOutcome(via, len(batch), err)
	if err != nil {
		return false, err
	}
	ids := make([]int64, len(batch))
	for i, u := range batch {
		ids[i] = u.RowID
	}
	if err := s.store.MarkPublished(ctx, ids, s.clock.Now()); err != nil {
		// State Hub has them; they go again and are stored once.
		s.log.Error("cannot mark receipts published", "error", err.Error())
		return false, err
	}
	return more, nil
}

// publishVia is the way the next batch goes.
func (s *receiptPublisher) publishVia() string {
	if s.engineLink.isAttached() {
		return api.ViaEngine
	}
	return api.ViaDirect
}

// fitFrame is how many of the batch fit in one frame to the engine (at
// least one: a receipt is small, and one too large fails as such).
func fitFrame(batch []store.Unpublished) int {
	size := 0
	for i, u := range batch {
		b, _ := json.Marshal(u.Receipt)
		size += len(b) + 1
		if size > engineBatchBytes && i > 0 {
			return i
		}
	}
	return len(batch)
}

func wireForms(batch []store.Unpublished) []contract.Receipt {
	out := make([]contract.Receipt, len(batch))
	for i, u := range batch {
		out[i] = u.Receipt
	}
	return out
}

// publishOutcome records an attempt for status, and logs only the changes:
// tamq used without State Hub must not fill its log with the same failure.
func (s *receiptPublisher) publishOutcome(via string, n int, err error) {
	p := s.pub
	p.mu.Lock()
	wasFailing := p.failing
	p.failing = err != nil
	if err == nil {
		p.lastSuccess, p.lastErr, p.paused = s.clock.Now(), "", false
	} else {
		// The client never puts the token in an error; the message is
		// what it says about the request.
		p.lastErr, p.paused = err.Error(), errs.Is(err, errs.PermissionDeny)
	}
	p.mu.Unlock()
	switch {
	case err == nil && wasFailing:
		s.log.Info("publishing receipts to State Hub again", "via", via, "receipts", n)
	case err == nil:
		s.log.Debug("receipts published", "via", via, "receipts", n)
	case !wasFailing:
		s.log.Warn("cannot publish receipts to State Hub; they stay pending and are sent later", "via", via, "error", err.Error())
	default:
		s.log.Debug("still cannot publish receipts to State Hub", "via", via, "error", err.Error())
	}
}

// publishStatus is the publisher as status shows it.
func (s *receiptPublisher) publishStatus() *api.PublishStatus {
	st := &api.PublishStatus{Via: s.publishVia()}
	p := s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	st.LastError, st.Paused = p.lastErr, p.paused
	if !p.lastSuccess.IsZero() {
		t := p.lastSuccess
		st.LastSuccessAt = &t
	}
	return st
}
