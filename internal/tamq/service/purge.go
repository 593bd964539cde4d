package service

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// purgeHandler answers tamq purge while the service runs.
type purgeHandler struct {
	log      *slog.Logger
	reader   *sql.DB
	purges   *store.Purger
	database string // its file, whose size a purge reports
	// work ends when shutdown begins: a purge under way stops at its next
	// step instead of holding the shutdown to its grace period.
	work context.Context
	// mu lets one purge run at a time.
	mu sync.Mutex
}

// purge plans a purge and, unless it is a dry run, carries it out: the
// service is the database's one writer, so `tamq purge` comes here whenever
// the service runs. The deletion goes in short transactions beside the
// service's own writes (store.Purge); the space is given back in short
// incremental steps. A database made before incremental auto-vacuum would
// need one full VACUUM, which holds the write lock for its whole run: the
// service never runs it and keeps the free pages (SQLite reuses them); a
// purge with the service stopped converts the database.
func (s *purgeHandler) purge(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.PurgeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.State != "" && !queue.State(args.State).Final() {
		return nil, errs.New(errs.BadRequest, "state %q: purge only removes messages in a final state (injected, acknowledged, failed, cancelled)", args.State)
	}
	if args.MaxBytes < 0 || args.Limit < 0 {
		return nil, errs.New(errs.BadRequest, "max_bytes and limit cannot be negative")
	}
	rule := store.PurgeRule{MaxBytes: args.MaxBytes, Repo: args.Repo, State: args.State, Limit: args.Limit}
	if args.Before != nil {
		rule.Before = *args.Before
	}
	// One purge at a time: a second would plan messages the first is
	// deleting, and both would vacuum.
	s.mu.Lock()
	defer s.mu.Unlock()
	// Requests are not cancelled by a signal (they are answered); a purge
	// stops at its next transaction when the service shuts down.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.work, cancel)()
	plan, err := store.PlanPurge(ctx, s.reader, rule)
	if err != nil {
		return nil, s.purgeError(err, store.PurgeDone{})
	}
	if args.DryRun || len(plan.IDs) == 0 {
		return PurgeResult(plan, store.PurgeDone{}), nil
	}
	before := store.FileBytes(s.database)
	done, err := s.purges.ExecutePurge(ctx, rule, plan, false, store.PurgeProgress{})
	if done.Messages > 0 {
		s.log.Info("history purged", "purge_id", done.ID, "deleted", done.Messages, "receipts_deleted", done.Receipts,
			"planned", len(plan.IDs), "peer_pid", peer.PID)
	}
	if err != nil {
		return nil, s.purgeError(err, done)
	}
	if done.FreePagesKept {
		s.log.Info("purge kept the free pages: the database predates incremental auto-vacuum; a purge with the service stopped converts it")
	}
	res := PurgeResult(plan, done)
	res.FileBytesBefore, res.FileBytesAfter = before, store.FileBytes(s.database)
	return res, nil
}

// purgeError says a purge was cut short by the service stopping, or passes
// err on.
func (s *purgeHandler) purgeError(err error, done store.PurgeDone) error {
	if s.work.Err() == nil {
		return err
	}
	e := errs.New(errs.ShuttingDown, "the service stopped during the purge, after %d messages", done.Messages)
	if done.ID != "" {
		e = errs.New(errs.ShuttingDown, "the service stopped during the purge, after %d messages (receipt %s)", done.Messages, done.ID)
	}
	return e.WithHint("run tamq purge again: it takes up what is left")
}

// PurgeResult is a purge's plan and what was done, as the purge operation
// answers them (done is zero for a dry run). tamq purge builds the same
// answer when it purges with the service stopped.
func PurgeResult(p store.PurgePlan, done store.PurgeDone) api.PurgeResult {
	r := api.PurgeResult{
		Matching: len(p.IDs), EstimatedBytes: p.Bytes,
		HistoryBytes: p.HistoryBytes, HistoryMessages: p.HistoryMessages, HistoryReceipts: p.HistoryReceipts,
		Deleted: done.Messages, ReceiptsDeleted: done.Receipts, PurgeID: done.ID, FreePagesKept: done.FreePagesKept,
	}
	if len(p.IDs) > 0 {
		r.Oldest, r.Newest = &p.Oldest, &p.Newest
	}
	return r
}
