package service

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// answerWriter is a Writer that answers every write as told, and keeps the
// text it was given.
type answerWriter struct {
	wrote Written
	texts []string
}

func (w *answerWriter) Write(_ context.Context, _ queue.Endpoint, win queue.Window, text string, _ *Confirm) Written {
	w.texts = append(w.texts, win.Repo+": "+text)
	return w.wrote
}

// theWindow finds window r of endpoint e.
type theWindow struct{}

func (theWindow) windowOf(_ context.Context, endpointID, repo string) (queue.Endpoint, queue.Window, error) {
	return queue.Endpoint{ID: endpointID}, queue.Window{Repo: repo}, nil
}

// noBrokers finds no broker session for any window.
type noBrokers struct{}

func (noBrokers) get(string) *brokerConn { return nil }

// noteWaits keeps why the deliverer said a window waits, and which
// endpoints it had listed again.
type noteWaits struct {
	waits  []string
	listed []string
}

func (n *noteWaits) setWait(_ waitSource, endpointID, repo, reason string) {
	n.waits = append(n.waits, endpointID+"/"+repo+": "+reason)
}

func (n *noteWaits) requestList(endpointIDs ...string) { n.listed = append(n.listed, endpointIDs...) }

// The deliverer, built alone over a temp store with a fake Writer, records
// what came of a write: written (injected, or awaiting its ack), deferred
// (back in the queue, its attempt not spent, the window held and listed
// again), held (the text in the input box) or failed (queued again when
// nothing arrived, failed when some may have).
func TestDelivererRecordsWhatCameOfTheWrite(t *testing.T) {
	t.Parallel()
	writeErr := errors.New("the pane is gone")
	for _, c := range []struct {
		name     string
		mode     ackmode.Mode
		wrote    api.DeliveryOutcome
		want     string // the message's state after
		attempts int
		waits    []string // why the window waits, as the watcher is told
	}{
		{name: "written injected", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.Written}, want: "injected", attempts: 1},
		{name: "written, awaiting its ack", mode: ackmode.Acknowledged, wrote: api.DeliveryOutcome{Kind: api.Written}, want: "awaiting_ack", attempts: 1},
		{name: "deferred until the window can take it", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.Unreachable, Reason: "the agent exited"},
			want: "queued", attempts: 0, waits: []string{"e/r: the agent exited"}},
		{name: "held with its Enter", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.EnterHeld, Held: "dialog", Reason: "a question is open"},
			want: "held", attempts: 1},
		{name: "failed with nothing written: queued again", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.Failed, Err: writeErr},
			want: "queued", attempts: 1},
		{name: "failed after some may have arrived: failed", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.Failed, Err: writeErr, MaybeWritten: true},
			want: "failed", attempts: 1},
		{name: "failed with no error given: queued again, the service running on", mode: ackmode.Injected, wrote: api.DeliveryOutcome{Kind: api.Failed},
			want: "queued", attempts: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(time.Now())
			svc, _ := setup(t, Options{Clock: fake})
			t.Cleanup(svc.d.Close) // never run: only the deliverer below writes
			oneWindow(t, svc)
			w, waits := &answerWriter{wrote: tmuxWrote(c.wrote)}, &noteWaits{}
			d := &deliverer{log: svc.log, clock: fake, config: svc.opts.Config, deliveries: svc.store.Deliveries,
				endpoints: theWindow{}, writer: w, waitReason: func(string) string { return "" }, waits: waits,
				brokers: noBrokers{}, dispatch: wakeup.New()}
			id := queueFor(t, svc, c.mode, time.Time{})
			ms, err := svc.store.Deliveries.ClaimBatch(context.Background(), "test", DeliveryLease,
				store.Target{EndpointID: testEndpoint, Repo: testRepo}, 1)
			if err != nil || len(ms) != 1 {
				t.Fatalf("claim: %d messages, %v", len(ms), err)
			}

			d.deliver(context.Background(), ms)
			if want := []string{"r: " + queue.BatchText(ms)}; !slices.Equal(w.texts, want) {
				t.Errorf("written %q, want %q", w.texts, want)
			}
			if st, n := messageState(t, svc, id); st != c.want || n != c.attempts {
				t.Errorf("recorded %s after %d attempts, want %s after %d", st, n, c.want, c.attempts)
			}
			if !slices.Equal(waits.waits, c.waits) {
				t.Errorf("the window waits for %q, want %q", waits.waits, c.waits)
			}
			if wantListed := len(c.waits) > 0; wantListed != slices.Equal(waits.listed, []string{testEndpoint}) {
				t.Errorf("endpoints listed again: %q", waits.listed)
			}
		})
	}
}
