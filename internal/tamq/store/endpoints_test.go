package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
)

// The endpoint table's writes (EndpointTable), with the fixtures of
// transitions_test.go: what registering, a state change and a rebind write,
// and what they leave alone.

func TestStoreRebind(t *testing.T) {
	t.Parallel()
	timing := queue.Timing{AckTimeout: time.Minute, Backoff: func(int) time.Duration { return time.Second }}
	claim := func(m *queue.Message) error { return m.Claim(start.Add(time.Second)) }
	written := func(m *queue.Message) error { return m.Written(start.Add(time.Second), timing) }
	failed := func(m *queue.Message) error { return m.WriteFailed(start.Add(time.Second), timing, true, "x") }
	// On the old endpoint, for net: one message in each state a rebind must
	// tell apart; one for railiance; one for net on a third endpoint.
	fixture := []struct {
		ep, repo string
		mode     ackmode.Mode
		steps    []func(*queue.Message) error
		state    queue.State
	}{
		{ep1, "net", ackmode.Injected, nil, queue.Queued},
		{ep1, "net", ackmode.Acknowledged, []func(*queue.Message) error{claim, written}, queue.AwaitingAck},
		{ep1, "net", ackmode.Injected, []func(*queue.Message) error{claim}, queue.Delivering},
		{ep1, "net", ackmode.Injected, []func(*queue.Message) error{claim, written}, queue.Injected},
		{ep1, "net", ackmode.Injected, []func(*queue.Message) error{claim, failed}, queue.Failed},
		{ep1, "railiance", ackmode.Injected, nil, queue.Queued},
		{"tmux-amq-3", "net", ackmode.Injected, nil, queue.Queued},
	}
	tests := []struct {
		name     string
		from, to string
		repos    []string
		moved    []int // fixture messages that move
		fails    bool
	}{
		{"the undelivered of a repo", ep1, ep2, []string{"net"}, []int{0, 1}, false},
		{"several repos", ep1, ep2, []string{"net", "railiance"}, []int{0, 1, 5}, false},
		{"no repos", ep1, ep2, nil, nil, false},
		{"a repo with nothing pending", ep1, ep2, []string{"ghost"}, nil, false},
		{"from an endpoint with nothing", ep2, ep1, []string{"net"}, nil, false},
		{"no replacement recorded", ep1, "tmux-amq-9", []string{"net"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			registered(t, s, ep1, "net", "railiance")
			registered(t, s, ep2, "net", "railiance")
			registered(t, s, "tmux-amq-3", "net")
			var ids []string
			for _, f := range fixture {
				m := enqueued(t, s, c, message(f.ep, f.repo, f.mode))
				if len(f.steps) > 0 {
					if got := drive(t, s, m.ID, f.steps...); got.State != f.state {
						t.Fatalf("fixture: %s, want %s", got.State, f.state)
					}
				}
				ids = append(ids, m.ID)
			}
			receipts := receiptCount(t, s)
			n, err := s.Endpoints.Rebind(context.Background(), tt.from, tt.to, tt.repos)
			if (err != nil) != tt.fails {
				t.Fatalf("rebind: %d, %v", n, err)
			}
			if n != len(tt.moved) {
				t.Errorf("moved %d, want %d", n, len(tt.moved))
			}
			for i, id := range ids {
				want := fixture[i].ep
				for _, j := range tt.moved {
					if i == j {
						want = tt.to
					}
				}
				if got := get(t, s, id); got.EndpointID != want || got.State != fixture[i].state {
					t.Errorf("message %d on %s in %s, want %s in %s", i, got.EndpointID, got.State, want, fixture[i].state)
				}
			}
			wantReceipts := receipts
			if n > 0 {
				wantReceipts++
			}
			if got := receiptCount(t, s); got != wantReceipts {
				t.Errorf("%d receipts written, want %d", got-receipts, wantReceipts-receipts)
			}
		})
	}
}

func TestStoreRegister(t *testing.T) {
	t.Parallel()
	window := func(repo string, mode queue.WindowMode, command string, reused bool) queue.Window {
		return queue.Window{Repo: repo, RepoPath: "/src/" + repo, WindowID: "@1", PaneID: "%1", Mode: mode, Command: command, Reused: reused, ExitStatus: -1}
	}
	endpoint := func(ws ...queue.Window) queue.Endpoint {
		return queue.Endpoint{ID: ep1, TmuxSocket: "/tmp/tmux-0/default", ServerPID: 1, Session: "tamq", Windows: ws}
	}
	// between is what happens after each registration but the last.
	type between func(t *testing.T, s *Store)
	disconnect := func(t *testing.T, s *Store) {
		if err := s.Endpoints.SetEndpointState(context.Background(), ep1, queue.Disconnected, "gone"); err != nil {
			t.Fatal(err)
		}
	}
	forget := func(t *testing.T, s *Store) {
		disconnect(t, s)
		if _, err := s.Endpoints.Forget(context.Background(), ep1); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		regs     []queue.Endpoint
		between  between
		want     []queue.Window // windows recorded; nil when the registration fails
		receipts int            // endpoint.register receipts
	}{
		{"a new window; no mode is manual", []queue.Endpoint{endpoint(window("net", "", "codex", false))}, nil,
			[]queue.Window{window("net", queue.Manual, "codex", false)}, 1},
		{"twice the same", []queue.Endpoint{endpoint(window("net", queue.Trigger, "codex", false)), endpoint(window("net", queue.Trigger, "codex", false))}, nil,
			[]queue.Window{window("net", queue.Trigger, "codex", false)}, 2},
		{"a reused window keeps its mode and command", []queue.Endpoint{endpoint(window("net", queue.Trigger, "codex", false)), endpoint(window("net", "", "claude", true))}, nil,
			[]queue.Window{window("net", queue.Trigger, "codex", false)}, 2},
		{"a new window replaces them", []queue.Endpoint{endpoint(window("net", queue.Trigger, "codex", false)), endpoint(window("net", queue.Manual, "", false))}, nil,
			[]queue.Window{window("net", queue.Manual, "", false)}, 2},
		{"other repos' windows stay", []queue.Endpoint{endpoint(window("net", queue.Manual, "", false)), endpoint(window("railiance", queue.Manual, "", false))}, nil,
			[]queue.Window{window("net", queue.Manual, "", false), window("railiance", queue.Manual, "", false)}, 2},
		{"alone first, then with its windows", []queue.Endpoint{endpoint(), endpoint(window("net", queue.Manual, "", false))}, nil,
			[]queue.Window{window("net", queue.Manual, "", false)}, 2},
		{"a disconnected endpoint connects again", []queue.Endpoint{endpoint(window("net", queue.Manual, "", false)), endpoint()}, disconnect,
			[]queue.Window{window("net", queue.Manual, "", false)}, 2},
		{"a forgotten endpoint is remembered again", []queue.Endpoint{endpoint(window("net", queue.Manual, "", false)), endpoint()}, forget,
			[]queue.Window{window("net", queue.Manual, "", false)}, 2},
		{"a mode the schema refuses", []queue.Endpoint{endpoint(window("net", "auto", "", false))}, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			var err error
			for i, ep := range tt.regs {
				c.advance(time.Second)
				if err = s.Endpoints.Register(ctx, ep); err != nil {
					break
				}
				if i < len(tt.regs)-1 && tt.between != nil {
					tt.between(t, s)
				}
			}
			if (err != nil) != (tt.want == nil) {
				t.Fatalf("register: %v", err)
			}
			eps, rerr := Endpoints(ctx, s.DB.Reader, true)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if n := count(t, s, `SELECT count(*) FROM receipts WHERE kind = 'endpoint.register'`); n != tt.receipts {
				t.Errorf("%d register receipts, want %d", n, tt.receipts)
			}
			if tt.want == nil {
				if len(eps) != 0 {
					t.Errorf("a failed registration left %+v", eps)
				}
				return
			}
			if len(eps) != 1 {
				t.Fatalf("endpoints %+v", eps)
			}
			ep := eps[0]
			if ep.State != queue.Connected || ep.Forgotten || ep.ServerPID != 1 || ep.Session != "tamq" {
				t.Errorf("endpoint %+v", ep)
			}
			if fmt.Sprint(ep.Windows) != fmt.Sprint(tt.want) {
				t.Errorf("windows\n%+v\nwant\n%+v", ep.Windows, tt.want)
			}
		})
	}
}

// How a window's agent ended is recorded once per change, for the window
// on the pane named only, and a registration of the window clears it: its
// agent runs again.
func TestStoreSetWindowEnd(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	registered(t, s, ep1, "net", "railiance") // panes %0 and %1
	window := func(repo string) queue.Window {
		t.Helper()
		eps, err := Endpoints(ctx, s.DB.Reader, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range eps[0].Windows {
			if w.Repo == repo {
				return w
			}
		}
		t.Fatalf("no window of %s", repo)
		return queue.Window{}
	}
	receipts := func() int { return count(t, s, `SELECT count(*) FROM receipts WHERE kind = 'window.agent'`) }
	for _, step := range []struct {
		name       string
		repo, pane string
		end        queue.AgentEnd
		status     int
		changed    bool
		want       string // EndText of net's window after the step
	}{
		{"exited with a status", "net", "%0", queue.AgentExited, 127, true, "its agent exited with status 127 (command not found)"},
		{"the same again", "net", "%0", queue.AgentExited, 127, false, "its agent exited with status 127 (command not found)"},
		{"another pane is not the window", "net", "%7", "", -1, false, "its agent exited with status 127 (command not found)"},
		{"runs again", "net", "%0", "", -1, true, ""},
		{"closed", "net", "%0", queue.WindowClosed, -1, true, "its window was closed"},
		{"killed by a signal", "net", "%0", queue.AgentExited, 143, true, "its agent exited with status 143 (ended by signal 15, terminated)"},
		{"status unknown", "net", "%0", queue.AgentExited, -1, true, "its agent exited"},
	} {
		before := receipts()
		changed, err := s.Endpoints.SetWindowEnd(ctx, ep1, step.repo, step.pane, step.end, step.status)
		if err != nil || changed != step.changed {
			t.Fatalf("%s: changed %v, %v", step.name, changed, err)
		}
		if got := window("net").EndText(); got != step.want {
			t.Errorf("%s: %q, want %q", step.name, got, step.want)
		}
		if n := receipts() - before; n != map[bool]int{true: 1}[step.changed] {
			t.Errorf("%s: %d receipts", step.name, n)
		}
	}
	if w := window("railiance"); w.Ended != "" || w.ExitStatus != -1 {
		t.Errorf("another repo's window: %+v", w)
	}
	registered(t, s, ep1, "net")
	if w := window("net"); w.Ended != "" || w.ExitStatus != -1 {
		t.Errorf("a registered window keeps how its agent ended: %+v", w)
	}
}

func TestStoreSetEndpointState(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	registered(t, s, ep1, "net")
	states := func() int {
		return count(t, s, `SELECT count(*) FROM receipts WHERE kind = 'endpoint.state'`)
	}
	for _, step := range []struct {
		state    queue.EndpointState
		receipts int
	}{
		{queue.Connected, 0}, // the state it has: nothing to record
		{queue.Disconnected, 1},
		{queue.Disconnected, 1},
		{queue.Connected, 2},
	} {
		if err := s.Endpoints.SetEndpointState(ctx, ep1, step.state, ""); err != nil {
			t.Fatal(err)
		}
		if n := states(); n != step.receipts {
			t.Errorf("after %s: %d receipts, want %d", step.state, n, step.receipts)
		}
	}
	if n, err := s.Endpoints.MarkEndpointsDisconnected(ctx); err != nil || n != 1 {
		t.Errorf("marked %d disconnected, %v", n, err)
	}
	if n, err := s.Endpoints.MarkEndpointsDisconnected(ctx); err != nil || n != 0 {
		t.Errorf("marked %d disconnected again, %v", n, err)
	}
	if _, err := s.Endpoints.Forget(ctx, "tmux-amq-9"); !errs.Is(err, errs.NotFound) {
		t.Errorf("forgetting an unknown endpoint: %v", err)
	}
	if err := s.Endpoints.SetEndpointState(ctx, ep1, queue.Connected, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Endpoints.Forget(ctx, ep1); !errs.Is(err, errs.Conflict) {
		t.Errorf("forgetting a connected endpoint: %v", err)
	}
}
