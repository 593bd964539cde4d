package service

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
)

// A sender in no known window makes the service list only the tmux servers
// above it in the process tree: the operator's sends cost no tmux call,
// however many endpoints there are (BenchmarkScale measured 20 calls a send
// with 20 endpoints before).
func TestServersAboveListsOnlyTheSendersServer(t *testing.T) {
	var eps []queue.Endpoint
	for i := range 20 {
		eps = append(eps, queue.Endpoint{ID: fmt.Sprintf("tmux-amq-%d", 1000+i), ServerPID: 1000 + i, State: queue.Connected})
	}
	eps[7].State = queue.Disconnected
	chain := func(pids ...int) []proc.Stat {
		var out []proc.Stat
		for _, p := range pids {
			out = append(out, proc.Stat{PID: p})
		}
		return out
	}
	ids := func(eps []queue.Endpoint) []string {
		var out []string
		for _, ep := range eps {
			out = append(out, ep.ID)
		}
		return out
	}
	// The operator's shell, under sshd: no server above it.
	if got := serversAbove(chain(5000, 4999, 300), eps); len(got) != 0 {
		t.Errorf("operator outside tmux: listed %v, want none", ids(got))
	}
	// A process in a pane of server 1003 (pane shell 4000).
	if got := ids(serversAbove(chain(5000, 4000, 1003, 1), eps)); !slices.Equal(got, []string{"tmux-amq-1003"}) {
		t.Errorf("sender under server 1003: listed %v", got)
	}
	// A disconnected server is not asked.
	if got := serversAbove(chain(5000, 1007), eps); len(got) != 0 {
		t.Errorf("under a disconnected server: listed %v", ids(got))
	}
	// A chain cut at the walk's bound may hide the server: all connected.
	long := make([]int, proc.MaxDepth)
	for i := range long {
		long[i] = 10000 + i
	}
	if got := serversAbove(chain(long...), eps); len(got) != 19 {
		t.Errorf("cut chain: listed %d servers, want the 19 connected", len(got))
	}
}
