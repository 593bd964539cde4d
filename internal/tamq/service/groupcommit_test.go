package service

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// newMessage is a message from the operator to target, as send makes it.
func newMessage(target, body string) *queue.Message {
	return &queue.Message{Sender: OperatorLabel, SenderKind: queue.FromOperator, Target: target, Body: body,
		AckMode: ackmode.Injected, MaxRetries: 3, PolicyProfile: "p", ConfigVersion: "c"}
}

// Eight clients sending at once through the socket each get their own
// message back: its own id, stored with the text that client sent.
func TestConcurrentSendsEachGetTheirOwnMessage(t *testing.T) {
	t.Parallel()
	svc, p, _ := inProcessService(t, t.TempDir(), Options{Writer: discardWriter{}})
	client := &unixrpc.Client{Socket: p.Socket}
	const clients, each = 8, 25
	got := make([][]api.Message, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				var m api.Message
				if err := client.Call(context.Background(), api.OpSend, api.SendArgs{Text: fmt.Sprintf("To:net-kingdom: c%d-%d", c, i)}, &m); err != nil {
					t.Errorf("client %d send %d: %v", c, i, err)
					return
				}
				got[c] = append(got[c], m)
			}
		})
	}
	wg.Wait()
	seen := map[string]string{}
	for c, ms := range got {
		if len(ms) != each {
			t.Fatalf("client %d got %d answers", c, len(ms))
		}
		for i, m := range ms {
			want := fmt.Sprintf("c%d-%d", c, i)
			if other, dup := seen[m.ID]; dup || m.ID == "" {
				t.Fatalf("%s answered with id %q, also %s's", want, m.ID, other)
			}
			seen[m.ID] = want
			stored, err := svc.store.Deliveries.Get(context.Background(), m.ID)
			if err != nil || stored.Body != want {
				t.Errorf("%s: id %s holds %q (%v)", want, m.ID, stored.Body, err)
			}
		}
	}
}

// A message the database refuses in a group (its endpoint is gone: forgotten
// between the send's check and its commit) fails alone; the sends committed
// with it succeed.
func TestARefusedMessageFailsAloneInItsGroup(t *testing.T) {
	t.Parallel()
	svc, _ := setup(t, Options{})
	ctx := context.Background()
	// Waiting before the committer starts, the three sends are its first
	// group.
	group := []*queue.Message{newMessage("r", "before"), newMessage("r", "refused"), newMessage("r", "after")}
	group[1].EndpointID = "tmux-amq-gone"
	reqs := make([]enqueueReq, len(group))
	for i, m := range group {
		reqs[i] = enqueueReq{m: m, done: make(chan error, 1)}
		svc.writer.reqs <- reqs[i]
	}
	run(t, svc)
	for i, m := range group {
		err := <-reqs[i].done
		if m.Body == "refused" {
			if err == nil {
				t.Errorf("a message for an unknown endpoint was queued")
			}
			continue
		}
		if err != nil {
			t.Errorf("%s failed with its neighbour: %v", m.Body, err)
			continue
		}
		if stored, err := svc.store.Deliveries.Get(ctx, m.ID); err != nil || stored.Body != m.Body {
			t.Errorf("%s: %+v %v", m.Body, stored, err)
		}
	}
	if _, err := svc.store.Deliveries.Get(ctx, group[1].ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("the refused message: %v, want not_found", err)
	}
}

// The service stopped while sends are being committed loses none it
// acknowledged: each is in the database file, read afresh after the stop.
func TestStoppingMidGroupLosesNoAcknowledgedMessage(t *testing.T) {
	t.Parallel()
	svc, p := setup(t, Options{})
	stop := run(t, svc)
	ctx := context.Background()
	var mu sync.Mutex
	var acked []*queue.Message
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				m := newMessage("r", fmt.Sprintf("c%d-%d", c, i))
				// Refused at the stop: shutting down, or its group's
				// transaction cut short (the committer's context ends).
				if err := svc.writer.enqueue(ctx, m); err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, m)
				mu.Unlock()
			}
		})
	}
	testutil.WaitFor(t, "sends under way", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 200 })
	stop()
	wg.Wait()

	db, err := sql.Open("sqlite", "file:"+p.Database+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]string{}
	rows, err := db.Query(`SELECT id, body FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		stored[id] = body
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range acked {
		if stored[m.ID] != m.Body {
			t.Errorf("acknowledged %s (%s) is not in the database", m.Body, m.ID)
		}
	}
}

// Senders sending to one target at once, each one message after another:
// the target's queue holds each sender's messages in the order it sent them.
func TestGroupCommitKeepsEachSendersOrder(t *testing.T) {
	t.Parallel()
	svc, _ := setup(t, Options{})
	run(t, svc)
	ctx := context.Background()
	const senders, each = 4, 50
	var wg sync.WaitGroup
	for c := range senders {
		wg.Go(func() {
			for i := range each {
				if err := svc.writer.enqueue(ctx, newMessage("r", fmt.Sprintf("%d %03d", c, i))); err != nil {
					t.Errorf("send: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The queue's order, as Claim takes it.
	rows, err := svc.db.Reader.Query(`SELECT body FROM messages WHERE target_repo = 'r' ORDER BY created_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	bySender := make([][]string, senders)
	for rows.Next() {
		var body string
		var c int
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		fmt.Sscanf(body, "%d", &c)
		bySender[c] = append(bySender[c], body)
	}
	for c, got := range bySender {
		if len(got) != each || !slices.IsSorted(got) {
			t.Errorf("sender %d's messages in the queue: %q", c, got)
		}
	}
}
