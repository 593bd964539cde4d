package service

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/lease"
	"github.com/tmux-amq/tamq/internal/rpc"
	tamqapi "github.com/tmux-amq/tamq/internal/tamq/api"
)

// pingOnlyTamq is a tamq service that answers ping (or not) and nothing
// else; pings counts its pings.
type pingOnlyTamq struct {
	up    atomic.Bool
	pings atomic.Int64
}

func (p *pingOnlyTamq) Ping(context.Context) (rpc.PingResult, error) {
	p.pings.Add(1)
	if !p.up.Load() {
		return rpc.PingResult{}, errors.New("nothing listens")
	}
	return rpc.PingResult{PID: 1}, nil
}

func (p *pingOnlyTamq) Wake(context.Context, tamqapi.WakeRequest) (tamqapi.WakeAck, error) {
	return tamqapi.WakeAck{}, errors.New("not in this test")
}

func (p *pingOnlyTamq) Ack(context.Context, string) (tamqapi.Message, error) {
	return tamqapi.Message{}, errors.New("not in this test")
}

// After a restart the engine judges no route before tamq has had its chance
// to attach: while tamq answers, up to settleLimit; while it does not, up to
// settleTime. An attached endpoint settles it at once.
func TestRoutesWaitForATamqThatAnswers(t *testing.T) {
	s := inProcessEngine(t, "http://127.0.0.1:1")
	tamq := &pingOnlyTamq{}
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	now := start
	s.opts.Now, s.opts.Tamq, s.startedAt = func() time.Time { return now }, tamq, start
	ctx := context.Background()
	at := func(d time.Duration, up, want bool) {
		t.Helper()
		now = start.Add(d)
		tamq.up.Store(up)
		s.tamqSeen.at = time.Time{} // a fresh answer for each step
		if got := s.settled(ctx); got != want {
			t.Errorf("%v after start, tamq answering %v: settled %v, want %v", d, up, got, want)
		}
	}
	at(5*time.Second, false, false) // too soon to tell
	at(11*time.Second, true, false) // tamq is up: it will attach
	at(11*time.Second, false, true) // tamq is down: nothing will attach
	at(59*time.Second, true, false) // still up, still not attached
	at(61*time.Second, true, true)  // long enough
	pings := tamq.pings.Load()
	// One answer serves every candidate for a second.
	now = start.Add(30 * time.Second)
	s.tamqSeen.at = time.Time{}
	for range 50 {
		s.settled(ctx)
	}
	if n := tamq.pings.Load() - pings; n != 1 {
		t.Errorf("%d pings for 50 candidates within a second, want 1", n)
	}
	if _, err := s.store.Attach(ctx, lease.Endpoint{TamqEndpointID: "tmux-amq-1", State: lease.Attached,
		Windows: []lease.Window{{Repo: "net", Path: "/src/net", Mode: lease.WindowMode("trigger")}}}, nil); err != nil {
		t.Fatal(err)
	}
	at(time.Second, true, true) // an endpoint attached
}
