package service

import (
	"context"
	"database/sql"
	"sync"

	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

// endpointBook is the service's copy of the endpoints table: every send,
// claim and listing needs the endpoints, so they are read once and kept
// until something changes them. Who writes the table says so (changed).
type endpointBook struct {
	reader *sql.DB
	// onChange hears every change: coordination-engine is handed the
	// endpoints again (it wakes the attacher).
	onChange func()

	mu    sync.Mutex
	cache []queue.Endpoint // nil when stale
}

// known returns the recorded endpoints, read once and then kept until
// something changes them.
func (b *endpointBook) known(ctx context.Context) ([]queue.Endpoint, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cache == nil {
		eps, err := store.Endpoints(ctx, b.reader, false)
		if err != nil {
			return nil, err
		}
		if eps == nil {
			eps = []queue.Endpoint{}
		}
		b.cache = eps
	}
	return b.cache, nil
}

// changed drops the copy and hands the endpoints to coordination-engine
// again.
func (b *endpointBook) changed() {
	b.mu.Lock()
	b.cache = nil
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange()
	}
}

// connected are the ids of the endpoints whose tmux server runs; err says
// the table could not be read (then none is).
func (b *endpointBook) connected(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	eps, err := b.known(ctx)
	for _, ep := range eps {
		if ep.State == queue.Connected {
			out[ep.ID] = true
		}
	}
	return out, err
}

// windowOf is the recorded window of repo on the endpoint, and the endpoint.
func (b *endpointBook) windowOf(ctx context.Context, endpointID, repo string) (queue.Endpoint, queue.Window, error) {
	eps, err := b.known(ctx)
	if err != nil {
		return queue.Endpoint{}, queue.Window{}, err
	}
	for _, ep := range eps {
		if ep.ID != endpointID {
			continue
		}
		for _, w := range ep.Windows {
			if w.Repo == repo {
				return ep, w, nil
			}
		}
	}
	return queue.Endpoint{}, queue.Window{}, errNoWindow
}
