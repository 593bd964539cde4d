package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// lease_current is what tamq asks before it types a wake: only the attempt
// the engine is offering now is current, and every other answer says why.
func TestLeaseCurrentAnswersOnlyTheAttemptOnOffer(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	s := inProcessEngineOpts(t, func(cfg *config.Loaded) { cfg.StateHub.APIBase = "http://127.0.0.1:1" },
		Options{Clock: clk, Registry: func() (*gita.Registry, error) { return &gita.Registry{}, nil }})
	cfg := s.opts.Config
	ctx := context.Background()
	handlers := &leaseHandlers{store: s.store, log: s.log, timing: Timing(cfg.Config)}
	ask := func(id string, attempt int) (api.LeaseCurrentResult, error) {
		t.Helper()
		raw, _ := json.Marshal(api.LeaseArgs{LeaseID: id, Attempt: attempt})
		res, err := handlers.leaseCurrent(ctx, unixrpc.Peer{}, &unixrpc.Request{Op: api.OpLeaseCurrent, Args: raw})
		if err != nil {
			return api.LeaseCurrentResult{}, err
		}
		return res.(api.LeaseCurrentResult), nil
	}

	if got, err := ask("L-ghost", 1); err != nil || got.Current || !strings.Contains(got.Reason, "has no lease L-ghost") {
		t.Errorf("an unknown lease: %+v, %v", got, err)
	}
	if _, err := ask("not a lease id\x1b[2J", 1); !errs.Is(err, errs.BadRequest) {
		t.Errorf("a malformed id: %v, want a bad request", err)
	}

	tr, _, err := s.store.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: "r1",
		TargetRepo: "net", TaskID: "T-1", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.store.Leases.Offer(ctx, tr.ID, "", "", Timing(cfg.Config))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ask(l.ID, l.Attempt); err != nil || !got.Current || got.State != string(lease.Offered) {
		t.Errorf("the attempt on offer: %+v, %v", got, err)
	}
	if got, err := ask(l.ID, l.Attempt+1); err != nil || got.Current || !strings.Contains(got.Reason, "was never offered as attempt 2") {
		t.Errorf("an attempt never offered: %+v, %v", got, err)
	}

	if _, err := s.store.Leases.StopLease(ctx, l.ID, "", "the task ended"); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(l.ID, l.Attempt); err != nil || got.Current || !strings.Contains(got.Reason, "the task ended") {
		t.Errorf("a stopped lease: %+v, %v", got, err)
	}
}
