package service

import (
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/proc"
)

// Where a caller runs is remembered for a second, by pid and start time: a
// pid reused by another process is asked about afresh, and so is the same
// process after a second.
func TestCallerCacheKnowsAProcessForASecond(t *testing.T) {
	var cc callerCache
	now := time.Unix(1000, 0)
	alpha := proc.Stat{PID: 42, PPID: 7, StartTime: 100}
	cc.put(alpha, caller{Kind: door.Agent, Repo: "alpha"}, now)
	if c, ok := cc.get(proc.Stat{PID: 42, PPID: 1, StartTime: 100}, now.Add(500*time.Millisecond)); !ok || c.Repo != "alpha" {
		t.Errorf("the same process half a second later: %+v %v", c, ok)
	}
	if _, ok := cc.get(proc.Stat{PID: 42, StartTime: 101}, now); ok {
		t.Error("a reused pid is taken for the process that had it")
	}
	if _, ok := cc.get(alpha, now.Add(1500*time.Millisecond)); ok {
		t.Error("remembered after a second")
	}
	for i := range callerCacheMax + 1 {
		cc.put(proc.Stat{PID: 1000 + i, StartTime: 1}, caller{Kind: door.Operator}, now)
	}
	if n := len(cc.seen); n > callerCacheMax {
		t.Errorf("%d processes remembered, at most %d", n, callerCacheMax)
	}
}
