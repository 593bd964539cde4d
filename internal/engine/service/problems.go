package service

import (
	"context"
	"log/slog"
	"sync"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// problemLog reports the objects of State Hub the engine skips (invalid,
// or a checkpoint it does not take): once each while the engine runs, in
// the log and, for the invalid ones, with a receipt.
type problemLog struct {
	store *store.Store
	log   *slog.Logger
	// seen are the problems already reported, the newest maxInvalidSeen of
	// them.
	seen *seenSet
}

// maxInvalidSeen bounds problemLog.seen: far more wrong objects than a State
// Hub holds at once, a few hundred kilobytes at most.
const maxInvalidSeen = 4096

// seenSet remembers up to max keys, forgetting the oldest first: what the
// engine has already reported (problemLog.seen) must not grow with every object
// State Hub ever sent wrong. A key forgotten while its object is still wrong
// is reported once more, which only happens past max distinct ones.
type seenSet struct {
	mu    sync.Mutex
	max   int
	keys  map[string]struct{}
	order []string // insertion order, oldest first; a ring once full
	next  int      // where the next key goes in order once it is full
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, keys: make(map[string]struct{})}
}

// add records key and says whether it is new.
func (s *seenSet) add(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false
	}
	if len(s.order) < s.max {
		s.order = append(s.order, key)
	} else {
		delete(s.keys, s.order[s.next])
		s.order[s.next] = key
		s.next = (s.next + 1) % s.max
	}
	s.keys[key] = struct{}{}
	return true
}

// len is how many keys it holds.
func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// recordInvalid writes a receipt for each object State Hub sent that the
// contract does not allow, once per object and reason while the engine runs.
func (pl *problemLog) recordInvalid(ctx context.Context, bad []statehub.Invalid) {
	for _, b := range bad {
		pl.recordProblems(ctx, []observe.Problem{{Kind: b.Kind, ID: b.ID, Reason: b.Reason}})
	}
}

func (pl *problemLog) recordProblems(ctx context.Context, ps []observe.Problem) {
	for _, p := range ps {
		key := p.Kind + "\x00" + p.ID + "\x00" + p.Reason
		if !pl.seen.add(key) {
			continue
		}
		pl.log.Warn("State Hub object skipped", "kind", p.Kind, "id", p.ID, "reason", p.Reason)
		if err := pl.store.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: store.KindSourceInvalid, Status: "skipped", Reason: "invalid_source_object",
			Detail: map[string]any{"kind": p.Kind, "id": p.ID, "problem": p.Reason}}); err != nil {
			pl.log.Error("cannot record a skipped object", "error", err.Error())
		}
	}
}

// skipCheckpoint reports, once, a State Hub checkpoint the engine does not
// take.
func (pl *problemLog) skipCheckpoint(cp contract.Checkpoint, why string) {
	if pl.seen.add("checkpoint:" + cp.ID) {
		pl.log.Warn("a State Hub checkpoint is ignored", "checkpoint", textsafe.Escape(cp.ID), "reason", textsafe.Escape(why))
	}
}
