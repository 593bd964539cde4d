package service_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/standin"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// engineLeases are the leases of the test's stand-in for coordination-engine.
// tamq writes a wake only once the engine confirms its lease's attempt is
// still the one to work on; the tests of tamq's wake operation play the
// engine's part themselves (the requests they send), so the engine that
// answers tamq is the test too: it serves the engine's socket behind the
// relay (standin.Mediate, which emptyWorkspace starts) and answers whether an
// attempt is current from the leases it offered, as the engine answers from
// its database. It sends no wake of its own.
type engineLeases struct {
	t        testing.TB
	mu       sync.Mutex
	attempts map[string]int // lease id: its current attempt
}

// startEngine starts the stand-in for coordination-engine for e.
func startEngine(t *testing.T, e *testutil.Env) *engineLeases {
	t.Helper()
	el := &engineLeases{t: t, attempts: map[string]int{}}
	standin.ServeOps(t, e.Paths(t, paths.Engine).Socket, os.Getpid(), map[string]unixrpc.Handler{engineapi.OpLeaseCurrent: el.current})
	return el
}

// current answers tamq's question before it writes a wake, as the engine
// does for a live lease: the attempt asked about is current when it is the
// lease's latest.
func (el *engineLeases) current(_ context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args engineapi.LeaseArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	el.mu.Lock()
	attempt, ok := el.attempts[args.LeaseID]
	el.mu.Unlock()
	res := engineapi.LeaseCurrentResult{State: "offered", Attempt: attempt}
	switch {
	case !ok:
		return engineapi.LeaseCurrentResult{Reason: "coordination-engine has no lease " + args.LeaseID}, nil
	case args.Attempt > attempt:
		res.Reason = fmt.Sprintf("lease %s was never offered as attempt %d (it is at attempt %d)", args.LeaseID, args.Attempt, attempt)
	case args.Attempt < attempt:
		res.Reason = fmt.Sprintf("attempt %d of lease %s was superseded by attempt %d", args.Attempt, args.LeaseID, attempt)
	default:
		res.Current = true
	}
	return res, nil
}

// offer records a new lease for repo, at attempt 1, and returns its id.
func (el *engineLeases) offer(repo string) string {
	el.t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	el.mu.Lock()
	defer el.mu.Unlock()
	el.attempts[id] = 1
	return id
}

// advance moves a lease on to attempt n: each attempt before it ran out.
func (el *engineLeases) advance(id string, n int) {
	el.t.Helper()
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.attempts[id] < n {
		el.attempts[id] = n
	}
}
