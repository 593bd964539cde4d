package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
)

const socket = "/tmp/tmux-1000/default"

func endpoint(tamqID, sock string, repos ...string) lease.Endpoint {
	ep := lease.Endpoint{TamqEndpointID: tamqID, TmuxSocket: sock, TmuxSession: "tamq", Proto: "1", Capabilities: []string{"wake"}}
	for _, r := range repos {
		ep.Windows = append(ep.Windows, lease.Window{Repo: r, Path: "/src/" + r, Command: "codex", Mode: lease.ModeTrigger})
	}
	return ep
}

func repos(ep lease.Endpoint) []string {
	var out []string
	for _, w := range ep.Windows {
		out = append(out, w.Repo)
	}
	return out
}

func TestStoreAttach(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		earlier  []lease.Endpoint // attached before, a second apart
		detach   bool             // the earlier ones were detached
		attach   lease.Endpoint
		sameID   int // index of the earlier endpoint whose id it keeps; -1: a new id
		attached []string
		repos    []string
	}{
		{"a new endpoint", nil, false, endpoint("tmux-amq-1", socket, "net"), -1, []string{"tmux-amq-1"}, []string{"net"}},
		{"tamq restarts: the same id, windows replaced", []lease.Endpoint{endpoint("tmux-amq-1", socket, "net", "railiance")}, false,
			endpoint("tmux-amq-1", socket, "railiance", "whisper"), 0, []string{"tmux-amq-1"}, []string{"railiance", "whisper"}},
		{"attached again after a detach", []lease.Endpoint{endpoint("tmux-amq-1", socket, "net")}, true,
			endpoint("tmux-amq-1", socket, "net"), 0, []string{"tmux-amq-1"}, []string{"net"}},
		{"another tmux server on the same socket replaces it", []lease.Endpoint{endpoint("tmux-amq-1", socket, "net")}, false,
			endpoint("tmux-amq-2", socket, "net"), -1, []string{"tmux-amq-2"}, []string{"net"}},
		{"the same pid on another socket is another endpoint", []lease.Endpoint{endpoint("tmux-amq-1", socket, "net")}, false,
			endpoint("tmux-amq-1", "/tmp/tmux-1000/work", "net"), -1, []string{"tmux-amq-1", "tmux-amq-1"}, []string{"net"}},
		{"no windows yet", nil, false, endpoint("tmux-amq-1", socket), -1, []string{"tmux-amq-1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			var earlier []lease.Endpoint
			for _, ep := range tt.earlier {
				earlier = append(earlier, must[lease.Endpoint](t)(s.Endpoints.Attach(ctx, ep, nil)))
				c.Advance(time.Second)
			}
			if tt.detach {
				if n, err := s.Endpoints.DetachAll(ctx, "engine stops"); err != nil || n != len(earlier) {
					t.Fatalf("detached %d, %v", n, err)
				}
			}
			mark := lastReceipt(t, s)
			got, err := s.Endpoints.Attach(ctx, tt.attach, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got.ID, "ce-") || got.State != lease.Attached || !got.AttachedAt.Equal(c.Now()) {
				t.Errorf("attached %+v", got)
			}
			for i, e := range earlier {
				if (e.ID == got.ID) != (i == tt.sameID) {
					t.Errorf("id %s, earlier %d had %s", got.ID, i, e.ID)
				}
			}
			eps := must[[]lease.Endpoint](t)(s.Endpoints.List(ctx, true))
			var tamqIDs []string
			for _, e := range eps {
				tamqIDs = append(tamqIDs, e.TamqEndpointID)
			}
			if !slices.Equal(tamqIDs, tt.attached) || eps[0].ID != got.ID {
				t.Errorf("attached endpoints %v, want %v (the new one first)", tamqIDs, tt.attached)
			}
			if stored := eps[0]; !slices.Equal(repos(stored), tt.repos) || stored.TmuxSocket != tt.attach.TmuxSocket ||
				stored.TmuxSession != "tamq" || stored.Proto != "1" || !slices.Equal(stored.Capabilities, []string{"wake"}) {
				t.Errorf("stored %+v", stored)
			}
			rs := receiptsSince(t, s, mark)
			attached := slices.IndexFunc(rs, func(r receipt.Receipt) bool { return r.Kind == KindEndpointAttached })
			if attached < 0 || rs[attached].CoordinationEndpointID != got.ID || rs[attached].Detail["tamq_endpoint_id"] != tt.attach.TamqEndpointID ||
				rs[attached].Detail["reattached"] != (tt.sameID >= 0) {
				t.Errorf("receipts %+v", rs)
			}
		})
	}
}

func TestStoreEndpoints(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	manual := endpoint("tmux-amq-1", socket, "net")
	manual.Windows[0].Mode = "" // no mode: manual
	a := must[lease.Endpoint](t)(s.Endpoints.Attach(ctx, manual, []Refusal{{Repo: "ghost", Reason: "not registered in gita"}}))
	if a.Windows[0].Mode != lease.ModeManual || manual.Windows[0].Mode != "" {
		t.Errorf("mode %q (the caller's %q)", a.Windows[0].Mode, manual.Windows[0].Mode)
	}
	c.Advance(time.Second)
	b := must[lease.Endpoint](t)(s.Endpoints.Attach(ctx, endpoint("tmux-amq-2", "/tmp/tmux-1000/other", "net", "railiance"), nil))

	rs := must[[]receipt.Receipt](t)(s.Receipts.List(ctx, ReceiptFilter{}))
	refusal := slices.IndexFunc(rs, func(r receipt.Receipt) bool { return r.Kind == KindEndpointRefused })
	if refusal < 0 || rs[refusal].Reason != "not registered in gita" || rs[refusal].Detail["repo"] != "ghost" || rs[refusal].CoordinationEndpointID != a.ID {
		t.Errorf("refusal receipt in %+v", rs)
	}
	for _, r := range rs {
		for k, v := range r.Detail {
			if s, ok := v.(string); ok && strings.Contains(s, "/src/") {
				t.Errorf("receipt %s detail %s holds a path: %s", r.Kind, k, s)
			}
		}
	}

	hosts := func(repo string) []string {
		var ids []string
		for _, e := range must[[]lease.Endpoint](t)(s.Endpoints.Hosts(ctx, repo)) {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := hosts("net"); !slices.Equal(got, []string{b.ID, a.ID}) {
		t.Errorf("hosts of net %v", got)
	}
	if got := hosts("railiance"); !slices.Equal(got, []string{b.ID}) {
		t.Errorf("hosts of railiance %v", got)
	}
	if got := hosts("ghost"); len(got) != 0 {
		t.Errorf("hosts of ghost %v", got)
	}

	mark := lastReceipt(t, s)
	if err := s.Endpoints.Detach(ctx, "tmux-amq-2", "tamq stops"); err != nil {
		t.Fatal(err)
	}
	if err := s.Endpoints.Detach(ctx, "tmux-amq-2", "again"); err != nil {
		t.Errorf("detaching twice: %v", err)
	}
	if rs := receiptsSince(t, s, mark); len(rs) != 1 || rs[0].Kind != KindEndpointDetached || rs[0].Reason != "tamq stops" || rs[0].CoordinationEndpointID != b.ID {
		t.Errorf("detach receipts %+v", rs)
	}
	if got := hosts("railiance"); len(got) != 0 {
		t.Errorf("a detached endpoint hosts railiance: %v", got)
	}
	if all := must[[]lease.Endpoint](t)(s.Endpoints.List(ctx, false)); len(all) != 2 || all[0].State != lease.Detached || all[1].State != lease.Attached {
		t.Errorf("all endpoints %+v", all)
	}
	if err := s.Endpoints.Detach(ctx, "tmux-amq-9", ""); !errs.Is(err, errs.NotFound) {
		t.Errorf("an endpoint never attached: %v", err)
	}
	if n, err := s.Endpoints.DetachAll(ctx, "engine stops"); err != nil || n != 1 {
		t.Errorf("detached %d, %v", n, err)
	}
	if n, err := s.Endpoints.DetachAll(ctx, "engine stops"); err != nil || n != 0 {
		t.Errorf("detached %d again, %v", n, err)
	}
	if _, err := s.Endpoints.Attach(ctx, endpoint("tmux-amq-3", socket, "net", "net"), nil); !errs.Is(err, errs.BadRequest) {
		t.Errorf("a repo twice: %v", err)
	}

	// A lease names the endpoint its wake goes to.
	tr, _, _ := s.Triggers.AddTrigger(ctx, newTrigger("1"))
	l := must[lease.Lease](t)(s.Leases.Offer(ctx, tr.ID, a.ID, "", timing))
	l = must[lease.Lease](t)(s.Leases.RecordWake(ctx, l.ID, 1, WakeRecord{Capability: "resumed", MessageID: "m1", TamqEndpointID: "tmux-amq-2", CoordinationEndpointID: b.ID}))
	if l.CoordinationEndpointID != b.ID || l.TamqEndpointID != "tmux-amq-2" || l.LocalLeaseID != "m1" {
		t.Errorf("woken lease %+v", l)
	}
}

// Issue 40: tamq attaches again at every refresh, and each attach wrote an
// endpoint.attached receipt (45 of the engine's 75 in six minutes). One is
// written when the endpoint attaches or its windows change, none for an
// attach that changes nothing.
func TestStoreAttachReceiptOnlyWhenWindowsChange(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := context.Background()
	count := func(mark int64) int {
		n := 0
		for _, r := range receiptsSince(t, s, mark) {
			if r.Kind == KindEndpointAttached {
				n++
			}
		}
		return n
	}
	mark := lastReceipt(t, s)
	attach := func(ep lease.Endpoint) {
		t.Helper()
		if _, err := s.Endpoints.Attach(ctx, ep, nil); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	for range 5 {
		attach(endpoint("tmux-amq-1", socket, "net", "web"))
	}
	attach(endpoint("tmux-amq-1", socket, "web", "net")) // the same set, in another order
	if n := count(mark); n != 1 {
		t.Fatalf("%d endpoint.attached receipts for six attaches of the same windows, want 1", n)
	}
	attach(endpoint("tmux-amq-1", socket, "net", "web", "api")) // a window more
	changed := endpoint("tmux-amq-1", socket, "net", "web", "api")
	changed.Windows[0].NoAgent = true // its agent is gone
	attach(changed)
	if _, err := s.Endpoints.DetachAll(ctx, "engine stops"); err != nil {
		t.Fatal(err)
	}
	attach(changed) // attached again after a detach
	if n := count(mark); n != 4 {
		t.Errorf("%d endpoint.attached receipts, want 4 (the first, two changes, after a detach)", n)
	}
}
