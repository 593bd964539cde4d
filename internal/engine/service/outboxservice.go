package service

import (
	"log/slog"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub"
)

// The receipt outbox as one of the engine's services: its state and how
// the others reach it. Its loop is outbox.go's, kept as it was.

// outbox publishes the engine's receipts to State Hub (runOutbox); a kick
// makes it look now instead of at its next idle poll.
type outbox struct {
	store  *store.Store
	log    *slog.Logger
	clock  clock.Clock
	client *statehub.Client
	kick   chan struct{}
	status publishStatus
}

func newOutbox(st *store.Store, log *slog.Logger, clk clock.Clock, client *statehub.Client) *outbox {
	return &outbox{store: st, log: log, clock: clk, client: client, kick: make(chan struct{}, 1)}
}

// publishStatus is what status says of the outbox.
type publishStatus struct {
	mu sync.Mutex
	// LastPublish is when the outbox last published receipts;
	// PublishError why it could not since.
	LastPublish  time.Time
	PublishError string
}

func (p *publishStatus) update(f func(p *publishStatus)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// Kick makes the outbox look for receipts now.
func (s *outbox) Kick() { kick(s.kick) }

// report fills status's account of the publishing.
func (s *outbox) report(h *api.StateHubStatus) {
	s.status.update(func(p *publishStatus) {
		h.PublishError, h.LastPublish = p.PublishError, optionalTime(p.LastPublish)
	})
}
