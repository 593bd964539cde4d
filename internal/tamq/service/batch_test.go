package service

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// scriptedWriter stands in for a window's broker: it records the text of
// every write and answers each with the next of its script (a write past
// its end succeeds). The first write waits for release, so messages pile
// up behind it as they do behind a delivery under way.
type scriptedWriter struct {
	release chan struct{}
	script  []Written
	mu      sync.Mutex
	texts   []string
}

func (w *scriptedWriter) Write(_ context.Context, _ queue.Endpoint, _ queue.Window, text string, _ *Confirm) Written {
	w.mu.Lock()
	n := len(w.texts)
	w.texts = append(w.texts, text)
	w.mu.Unlock()
	if n == 0 {
		<-w.release
	}
	if n >= len(w.script) {
		return viaBroker(api.DeliveryOutcome{Kind: api.Written, Quiet: true})
	}
	return w.script[n]
}

// viaBroker is out, as a broker answered it.
func viaBroker(out api.DeliveryOutcome) Written {
	return Written{Outcome: out, Path: "broker"}
}

func (w *scriptedWriter) written() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

// batchService runs a service in this process whose one window's writes go
// to w; the first message sent is the one whose write waits for release.
func batchService(t *testing.T, config string, w *scriptedWriter) (*Service, string, func(string, ...string) api.Message) {
	t.Helper()
	root := t.TempDir()
	writeConfig(t, root, config)
	svc, p, epID := inProcessService(t, root, Options{Writer: w})
	// The window is a real pane, marked for the repo as tamq open marks it,
	// so the watcher finds it live.
	eps, err := svc.endpoints.known(context.Background())
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints %v %v", eps, err)
	}
	if out, err := exec.Command("tmux", "-S", eps[0].TmuxSocket, "set-option", "-w", "-t", "%0", "@tamq_repo", "net-kingdom").CombinedOutput(); err != nil {
		t.Fatalf("marking the window: %v %s", err, out)
	}
	svc.watcher.requestList()
	c := client.New(p)
	send := func(text string, mode ...string) api.Message {
		t.Helper()
		args := api.SendArgs{Text: text}
		if len(mode) > 0 {
			args.AckMode = mode[0]
		}
		m, err := c.Send(context.Background(), args)
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return m
	}
	return svc, epID, send
}

func (s *Service) waitMessage(t *testing.T, id string, cond func(queue.Message) bool) queue.Message {
	t.Helper()
	var m queue.Message
	testutil.WaitFor(t, "message "+id, func() bool {
		var err error
		m, err = s.store.Deliveries.Get(context.Background(), id)
		return err == nil && cond(m)
	})
	return m
}

// steps are the states a message's receipts record, in order.
func (s *Service) steps(t *testing.T, id string) []string {
	t.Helper()
	rows, err := s.db.Reader.Query(`SELECT status FROM receipts WHERE kind = 'message.transition' AND subject_id = ? ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var st string
		rows.Scan(&st)
		out = append(out, st)
	}
	return out
}

// A broker that answers not_ready for a batch wrote nothing: every message of
// it goes back to the queue, its attempt not spent, and the window waits;
// when the agent is back at its prompt the same batch goes in whole, once.
func TestBatchNotReadyDefersEveryMessage(t *testing.T) {
	t.Parallel()
	w := &scriptedWriter{release: make(chan struct{}), script: []Written{
		viaBroker(api.DeliveryOutcome{Kind: api.Written}),
		viaBroker(api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: "the agent is not at its prompt: a dialog shows"}),
	}}
	svc, epID, send := batchService(t, "", w)
	first := send("To:net-kingdom: first")
	testutil.WaitFor(t, "the first write", func() bool { return len(w.written()) == 1 })
	var ms []api.Message
	for _, b := range []string{"one", "two", "three"} {
		ms = append(ms, send("To:net-kingdom: "+b))
	}
	close(w.release)
	svc.waitMessage(t, first.ID, func(m queue.Message) bool { return m.State == queue.Injected })
	for _, m := range ms {
		got := svc.waitMessage(t, m.ID, func(m queue.Message) bool { return m.State == queue.Queued && m.LastError != "" })
		if got.Attempts != 0 || !strings.Contains(got.LastError, "a dialog shows") {
			t.Errorf("%s after not_ready: attempts %d, %q", m.ID, got.Attempts, got.LastError)
		}
	}
	if n := len(w.written()); n != 2 {
		t.Fatalf("%d writes while the window waits, want 2", n)
	}
	// The window is held once the deferral is recorded (its messages say why
	// they wait a moment before); then the broker says its agent is back at
	// its prompt.
	key := store.DeliveryKey(epID, "net-kingdom")
	testutil.WaitFor(t, "the window to be held", func() bool { return svc.live.waitReason(key) != "" })
	svc.watcher.setWait(fromBroker, epID, "net-kingdom", "")
	var injectedAt []string
	for _, m := range ms {
		got := svc.waitMessage(t, m.ID, func(m queue.Message) bool { return m.State == queue.Injected })
		injectedAt = append(injectedAt, got.InjectedAt.String())
		if got.Attempts != 1 {
			t.Errorf("%s: attempts %d, want 1", m.ID, got.Attempts)
		}
		if st := svc.steps(t, m.ID); !slices.Equal(st, []string{"queued", "delivering", "queued", "delivering", "injected"}) {
			t.Errorf("%s: receipts %v", m.ID, st)
		}
	}
	texts := w.written()
	want := "From:operator/o: one\n\nFrom:operator/o: two\n\nFrom:operator/o: three"
	if len(texts) != 3 || texts[1] != want || texts[2] != want {
		t.Errorf("writes %q, want the batch twice: %q", texts, want)
	}
	if len(slices.Compact(slices.Clone(injectedAt))) != 1 {
		t.Errorf("injected at %v, want one time", injectedAt)
	}
}

// The broker answers not_ready, then reports its agent back at its prompt
// before the service has recorded the deferral: that report is the newer word
// and the broker sends it once, so the window must not be held for the older
// answer (it would wait for a report that never comes). The batch goes in
// again at once.
func TestBrokerBackAtPromptBeforeTheDeferralIsRecorded(t *testing.T) {
	t.Parallel()
	bc := &brokerConn{states: 1} // one report came after the answer below
	w := &scriptedWriter{release: make(chan struct{}), script: []Written{
		viaBroker(api.DeliveryOutcome{Kind: api.Written}),
		{Path: "broker", Outcome: api.DeliveryOutcome{Kind: api.NotAtPrompt, Reason: "the agent is not at its prompt: a dialog shows"},
			broker: bc, brokerStates: 0},
	}}
	svc, epID, send := batchService(t, "", w)
	bc.endpointID, bc.repo = epID, "net-kingdom"
	first := send("To:net-kingdom: first")
	testutil.WaitFor(t, "the first write", func() bool { return len(w.written()) == 1 })
	var ms []api.Message
	for _, b := range []string{"one", "two"} {
		ms = append(ms, send("To:net-kingdom: "+b))
	}
	close(w.release)
	svc.waitMessage(t, first.ID, func(m queue.Message) bool { return m.State == queue.Injected })
	for _, m := range ms {
		svc.waitMessage(t, m.ID, func(m queue.Message) bool { return m.State == queue.Injected })
	}
	if texts := w.written(); len(texts) != 3 || texts[1] != texts[2] {
		t.Errorf("writes %q, want the batch twice", texts)
	}
	if r := svc.live.waitReason(store.DeliveryKey(epID, "net-kingdom")); r != "" {
		t.Errorf("the window is held: %q", r)
	}
}

// A failed write of a batch is each message's failed write: not written at
// all, each is queued again after the backoff with its attempt counted;
// maybe partly written, each injected-mode message fails and each
// acknowledged one waits for its ack.
func TestBatchWriteFailureIsEachMessages(t *testing.T) {
	t.Parallel()
	w := &scriptedWriter{release: make(chan struct{}), script: []Written{
		viaBroker(api.DeliveryOutcome{Kind: api.Written}),
		viaBroker(api.DeliveryOutcome{Kind: api.Failed, Err: errs.New(errs.Unavailable, "the broker could not write")}),
		viaBroker(api.DeliveryOutcome{Kind: api.Failed, MaybeWritten: true, Err: errs.New(errs.Unavailable, "the text is in but the Enter was held back")}),
	}}
	svc, _, send := batchService(t, "[coordination]\nretry_backoff_seconds = [1]\n", w)
	first := send("To:net-kingdom: first")
	testutil.WaitFor(t, "the first write", func() bool { return len(w.written()) == 1 })
	ms := []api.Message{send("To:net-kingdom: one"), send("To:net-kingdom: two", "acknowledged"), send("To:net-kingdom: three")}
	close(w.release)
	svc.waitMessage(t, first.ID, func(m queue.Message) bool { return m.State == queue.Injected })
	want := map[string]queue.State{ms[0].ID: queue.Failed, ms[1].ID: queue.AwaitingAck, ms[2].ID: queue.Failed}
	for _, m := range ms {
		got := svc.waitMessage(t, m.ID, func(m queue.Message) bool { return m.State.Final() || m.State == queue.AwaitingAck })
		if got.State != want[m.ID] || got.Attempts != 2 {
			t.Errorf("%s: %s after %d attempts (%q), want %s after 2", m.ID, got.State, got.Attempts, got.LastError, want[m.ID])
		}
		if st := svc.steps(t, m.ID); !slices.Equal(st, []string{"queued", "delivering", "queued", "delivering", string(want[m.ID])}) {
			t.Errorf("%s: receipts %v", m.ID, st)
		}
	}
	texts := w.written()
	if len(texts) != 3 || texts[1] != texts[2] || strings.Count(texts[1], "From:") != 3 {
		t.Errorf("writes %q, want the batch of three twice", texts)
	}
}

// An Enter the broker held back after the paste went in holds every message
// of the batch as held, with the word for why: the text sits in the agent's
// input box, so nothing is typed again, acknowledged mode or not (a person
// presses Enter or clears the box). An ack that follows still lands.
func TestAHeldEnterHoldsTheBatch(t *testing.T) {
	t.Parallel()
	w := &scriptedWriter{release: make(chan struct{}), script: []Written{
		viaBroker(api.DeliveryOutcome{Kind: api.Written}),
		viaBroker(api.DeliveryOutcome{Kind: api.EnterHeld, Held: "dialog", Reason: "the agent's hooks reported an event during the paste"}),
	}}
	svc, _, send := batchService(t, "[coordination]\nretry_backoff_seconds = [1]\nwake_ack_timeout_seconds = 1\n", w)
	first := send("To:net-kingdom: first")
	testutil.WaitFor(t, "the first write", func() bool { return len(w.written()) == 1 })
	ms := []api.Message{send("To:net-kingdom: one"), send("To:net-kingdom: two", "acknowledged")}
	close(w.release)
	svc.waitMessage(t, first.ID, func(m queue.Message) bool { return m.State == queue.Injected })
	for _, m := range ms {
		got := svc.waitMessage(t, m.ID, func(m queue.Message) bool { return m.State.Final() || m.State == queue.AwaitingAck })
		if got.State != queue.Held || got.Attempts != 1 || got.LastError != "Enter held (dialog): the agent's hooks reported an event during the paste" {
			t.Errorf("%s: %s after %d attempts (%q), want held after 1", m.ID, got.State, got.Attempts, got.LastError)
		}
	}
	// A person pressed Enter and the agent acknowledged.
	if _, err := svc.store.Deliveries.Transition(context.Background(), ms[1].ID, "acknowledged", func(m *queue.Message) error { m.Ack(svc.clock.Now()); return nil }); err != nil {
		t.Fatal(err)
	}
	svc.waitMessage(t, ms[1].ID, func(m queue.Message) bool { return m.State == queue.Acknowledged })
	if texts := w.written(); len(texts) != 2 {
		t.Errorf("writes %q, want the batch once", texts)
	}
}
