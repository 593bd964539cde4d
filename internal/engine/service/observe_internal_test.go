package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Objects the contract does not allow are skipped with one receipt each,
// however often they are seen; the rest of the observation is used.
func TestInvalidObjectsAreSkippedWithOneReceipt(t *testing.T) {
	long := strings.Repeat("x", 250) // longer than an id may be
	body := `{"workplans": [
		{"id": "W1", "repo": "net", "status": "active", "revision": "1", "tasks": [
			{"id": "A", "title": "a", "status": "todo", "revision": "1", "repo": "net"}]},
		{"id": "W2", "repo": "net", "status": "sleeping", "revision": "1", "tasks": []},
		{"id": "W3", "repo": "net", "status": "active", "revision": "1", "tasks": [
			{"id": "A", "title": "a again", "status": "todo", "revision": "1", "repo": "net"}]},
		{"id": "W4", "repo": "net", "status": "active", "revision": "1", "tasks": [
			{"id": "` + long + `", "title": "t", "status": "todo", "revision": "1", "repo": "net"}]},
		"not a workplan"]}`
	ts, _ := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/workplans":
			io.WriteString(w, body)
		case "/v1/messages":
			io.WriteString(w, `{"messages": [{"id": "m1", "to_repo": "net"}]}`)
		case "/v1/checkpoints":
			io.WriteString(w, `{"checkpoints": [], "cursor": "0"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	s := inProcessEngine(t, ts.URL)
	ctx := context.Background()
	for range 2 {
		if err := s.observer.observeOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.store.Receipts.List(ctx, store.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]int{}
	for _, r := range rs {
		if r.Kind == store.KindSourceInvalid {
			if r.Reason != "invalid_source_object" {
				t.Errorf("reason %q", r.Reason)
			}
			id := r.Detail["id"].(string)
			if strings.HasPrefix(id, "xxxx") {
				id = "long" // receipts cut long strings short
			}
			skipped[r.Detail["kind"].(string)+" "+id]++
		}
	}
	want := map[string]int{"workplan W2": 1, "workplan ": 1, "task A": 1, "message m1": 1, "task long": 1}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	for k, n := range want {
		if skipped[k] != n {
			t.Errorf("%q skipped %d times, want %d (all: %v)", k, skipped[k], n, skipped)
		}
	}
	if _, ok := s.observer.view.obs.Tasks["A"]; !ok {
		t.Error("the valid workplan was not used")
	}
}

// A held trigger whose task moves on (cancelled: a new revision that is not
// actionable) is superseded at the next look, not checked on again.
func TestHeldTriggerOfATaskThatMovedOnIsSuperseded(t *testing.T) {
	var body atomic.Pointer[string]
	set := func(status, revision string) {
		b := `{"workplans": [{"id": "W", "repo": "net", "status": "active", "revision": "` + revision + `", "tasks": [
			{"id": "Q", "title": "q", "status": "` + status + `", "revision": "` + revision + `", "repo": "net", "needs_human": true}]}]}`
		body.Store(&b)
	}
	set("todo", "1")
	ts, _ := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/workplans":
			io.WriteString(w, *body.Load())
		case "/v1/messages":
			io.WriteString(w, `{"messages": []}`)
		default:
			io.WriteString(w, `{"checkpoints": [], "cursor": "0"}`)
		}
	}))
	s := inProcessEngine(t, ts.URL)
	// Gated work may be checked again twice.
	s.opts.Config.Coordination.SafetyGatedMaxRetries = 2
	prof := s.opts.Config.Policy.Profiles[s.opts.Config.Policy.Profile]
	prof.SafetyGatedMaxRetries = 2
	s.opts.Config.Policy.Profiles[s.opts.Config.Policy.Profile] = prof
	ctx := context.Background()
	state := func() (lease.TriggerState, string) {
		trs, err := s.store.Triggers.TriggersOfTask(ctx, "Q")
		if err != nil || len(trs) != 1 {
			t.Fatalf("Q's triggers: %+v %v", trs, err)
		}
		return trs[0].State, trs[0].GateReason
	}
	if err := s.observer.observeOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if st, gate := state(); st != lease.TriggerGated || gate != "human" {
		t.Fatalf("Q: %s at %q, want gated at human", st, gate)
	}
	set("cancelled", "2")
	if err := s.observer.observeOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := state(); st != lease.TriggerSuperseded {
		t.Fatalf("Q after it was cancelled: %s, want superseded", st)
	}
	rs, err := s.store.Receipts.List(ctx, store.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if last := rs[len(rs)-1]; last.Kind != store.KindTriggerSuperseded || last.Reason != "revision 2 observed" {
		t.Errorf("last receipt %+v", last)
	}
}

// A listing is cut to fit one protocol frame, from the right end, and says
// so; one that fits is left whole.
func TestFitFrame(t *testing.T) {
	items := make([]string, 5000)
	for i := range items {
		items[i] = fmt.Sprintf("item %04d %s", i, strings.Repeat("x", 40))
	}
	head, more := fitFrame(items, false)
	if !more || len(head) == 0 || head[0] != items[0] || len(head) >= len(items) {
		t.Errorf("from the start: %d items, more %v", len(head), more)
	}
	tail, more := fitFrame(items, true)
	if !more || tail[len(tail)-1] != items[len(items)-1] || len(tail) >= len(items) {
		t.Errorf("from the end: %d items, more %v", len(tail), more)
	}
	b, _ := json.Marshal(tail)
	if len(b) > frameBudget {
		t.Errorf("the kept items take %d bytes, over the budget of %d", len(b), frameBudget)
	}
	if few, more := fitFrame(items[:10], true); more || len(few) != 10 {
		t.Errorf("ten items: %d, more %v", len(few), more)
	}
}

// Ten minutes without State Hub, on a simulated clock: the observer never
// waits longer than one poll interval (give or take its jitter), so it
// looks again within one interval of State Hub's return.
func TestTenMinutesWithoutStateHub(t *testing.T) {
	var up atomic.Bool
	ts, _ := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !up.Load():
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case r.URL.Path == "/v1/workplans":
			io.WriteString(w, `{"workplans": []}`)
		case r.URL.Path == "/v1/messages":
			io.WriteString(w, `{"messages": []}`)
		default:
			io.WriteString(w, `{"checkpoints": [], "cursor": "0"}`)
		}
	}))
	s := inProcessEngine(t, ts.URL)
	interval := time.Duration(s.opts.Config.Coordination.StateHubPollIntervalSeconds) * time.Second
	clk := &outageClock{start: time.Now(), up: &up}
	s.observer.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.observer.Run(ctx)
	}()
	testutil.WaitFor(t, "the observer to look again after State Hub came back", func() bool {
		var ok bool
		s.observer.view.update(func(v *hubView) { ok = up.Load() && v.LastError == "" && v.Polls > 0 })
		return ok
	})
	cancel()
	<-done
	var lastPoll time.Time
	s.observer.view.update(func(v *hubView) { lastPoll = v.LastPoll })
	if back := lastPoll.Sub(clk.start) - clk.upAt; back != 0 {
		t.Errorf("State Hub back at +%s, looked at again %s later, not at the end of the wait", clk.upAt, back)
	}
	for _, w := range clk.waits {
		if w > interval*6/5 {
			t.Errorf("a wait of %s while State Hub was down; the poll interval is %s", w, interval)
		}
	}
	t.Logf("%d waits in %s without State Hub, the longest within %s", len(clk.waits), clk.upAt, interval*6/5)
}

// outageClock is the simulated clock of TestTenMinutesWithoutStateHub: each
// wait passes at once, and is noted, until State Hub is back; the wait that
// crosses ten minutes brings it back (at its end at the latest).
type outageClock struct {
	start time.Time
	now   atomic.Int64 // simulated nanoseconds since start
	up    *atomic.Bool
	waits []time.Duration
	upAt  time.Duration
}

func (c *outageClock) Now() time.Time { return c.start.Add(time.Duration(c.now.Load())) }

func (c *outageClock) After(d time.Duration) <-chan time.Time {
	if c.up.Load() {
		return nil // the look after State Hub's return is the last one measured
	}
	c.waits = append(c.waits, d)
	if c.now.Add(int64(d)) >= int64(10*time.Minute) {
		c.up.Store(true)
		c.upAt = time.Duration(c.now.Load())
	}
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}
