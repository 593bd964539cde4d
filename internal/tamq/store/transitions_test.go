package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
)

// The store's transitions, each against a fresh database with a clock the
// test moves by hand: what they change, and what they refuse or leave alone.

var start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// clock is the stubbed clock of a store under test.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

func newStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	c := &clock{now: start}
	s := New(setup(t), c.Now)
	s.Receipts.PolicyProfile, s.Receipts.ConfigVersion = "default@1", "cfg"
	return s, c
}

const (
	ep1 = "tmux-amq-1"
	ep2 = "tmux-amq-2"
)

// registered records an endpoint with one manual window per repo.
func registered(t *testing.T, s *Store, id string, repos ...string) {
	t.Helper()
	ep := queue.Endpoint{ID: id, TmuxSocket: "/tmp/tmux-0/default", ServerPID: 1, Session: "tamq"}
	for i, r := range repos {
		ep.Windows = append(ep.Windows, queue.Window{Repo: r, RepoPath: "/src/" + r, WindowID: fmt.Sprintf("@%d", i), PaneID: fmt.Sprintf("%%%d", i), Mode: queue.Manual})
	}
	if err := s.Endpoints.Register(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
}

// message is a new message for repo on endpoint ep.
func message(ep, repo string, mode ackmode.Mode) *queue.Message {
	return &queue.Message{EndpointID: ep, Sender: "operator", SenderKind: queue.FromOperator, Target: repo,
		Body: "hello " + repo, AckMode: mode, MaxRetries: 3, PolicyProfile: "default@1", ConfigVersion: "cfg"}
}

// enqueued stores m (a millisecond after the last, so the order of creation
// is the order of the calls) and returns it.
func enqueued(t *testing.T, s *Store, c *clock, m *queue.Message) *queue.Message {
	t.Helper()
	c.advance(time.Millisecond)
	if err := s.Queue.Enqueue(context.Background(), []*queue.Message{m}); err != nil {
		t.Fatal(err)
	}
	return m
}

// drive applies domain steps to a message through Transition.
func drive(t *testing.T, s *Store, id string, steps ...func(*queue.Message) error) queue.Message {
	t.Helper()
	var m queue.Message
	for _, step := range steps {
		var err error
		if m, err = s.Deliveries.Transition(context.Background(), id, "test", step); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func get(t *testing.T, s *Store, id string) queue.Message {
	t.Helper()
	m, err := s.Deliveries.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// count runs a count(*) query.
func count(t *testing.T, s *Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.DB.Reader.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func receiptCount(t *testing.T, s *Store) int {
	return count(t, s, `SELECT count(*) FROM receipts`)
}

func TestStoreClaim(t *testing.T) {
	t.Parallel()
	type queued struct {
		ep, repo string
		dueIn    time.Duration // from start
	}
	tests := []struct {
		name   string
		queue  []queued
		at     time.Duration // when the claim is made, from start
		claims int           // claims made before the one tested
		want   int           // index of the message claimed; -1 for none
	}{
		{"due head", []queued{{ep1, "net", 0}}, time.Second, 0, 0},
		{"oldest first", []queued{{ep1, "net", 0}, {ep1, "net", 0}}, time.Second, 0, 0},
		{"the next after a claim", []queued{{ep1, "net", 0}, {ep1, "net", 0}}, time.Second, 1, 1},
		{"due at exactly its time", []queued{{ep1, "net", time.Minute}}, time.Minute, 0, 0},
		{"not due", []queued{{ep1, "net", time.Minute}}, time.Second, 0, -1},
		{"a head not due holds back the rest", []queued{{ep1, "net", time.Minute}, {ep1, "net", 0}}, time.Second, 0, -1},
		{"another repo's message", []queued{{ep1, "railiance", 0}}, time.Second, 0, -1},
		{"another endpoint's message", []queued{{ep2, "net", 0}}, time.Second, 0, -1},
		{"nothing queued", nil, time.Second, 0, -1},
		{"already claimed", []queued{{ep1, "net", 0}}, time.Second, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			registered(t, s, ep1, "net", "railiance")
			registered(t, s, ep2, "net")
			var ids []string
			for _, q := range tt.queue {
				m := message(q.ep, q.repo, ackmode.Injected)
				m.NextAttemptAt = start.Add(q.dueIn)
				ids = append(ids, enqueued(t, s, c, m).ID)
			}
			c.now = start.Add(tt.at)
			target := Target{EndpointID: ep1, Repo: "net"}
			for range tt.claims {
				if _, ok, err := s.Deliveries.Claim(ctx, "svc", 30*time.Second, target); err != nil || !ok {
					t.Fatalf("claim before: %v, %v", ok, err)
				}
			}
			before := map[string]queue.Message{}
			for _, id := range ids {
				before[id] = get(t, s, id)
			}
			receipts := receiptCount(t, s)

			m, ok, err := s.Deliveries.Claim(ctx, "svc", 30*time.Second, target)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tt.want >= 0) {
				t.Fatalf("claimed %v (%s), want index %d", ok, m.ID, tt.want)
			}
			for i, id := range ids {
				got := get(t, s, id)
				if i == tt.want {
					continue
				}
				if got.State != before[id].State || got.Attempts != before[id].Attempts || !got.UpdatedAt.Equal(before[id].UpdatedAt) {
					t.Errorf("message %d changed: %+v", i, got)
				}
			}
			if !ok {
				if n := receiptCount(t, s); n != receipts {
					t.Errorf("%d receipts written for no claim", n-receipts)
				}
				return
			}
			if m.ID != ids[tt.want] {
				t.Fatalf("claimed %s, want message %d", m.ID, tt.want)
			}
			got := get(t, s, m.ID)
			if got.State != queue.Delivering || got.Attempts != 1 || !got.UpdatedAt.Equal(c.now) {
				t.Errorf("claimed message %+v", got)
			}
			var holder string
			var expires int64
			if err := s.DB.Reader.QueryRow(`SELECT holder, expires_at FROM delivery_leases WHERE message_id = ?`, idValue(m.ID)).Scan(&holder, &expires); err != nil {
				t.Fatalf("lease: %v", err)
			}
			if holder != "svc" || expires != c.now.Add(30*time.Second).UnixMilli() {
				t.Errorf("lease of %s until %d, want svc until now+30s", holder, expires)
			}
			if n := count(t, s, `SELECT count(*) FROM receipts WHERE kind = ? AND subject_id = ? AND status = ?`,
				KindTransition, m.ID, string(queue.Delivering)); n != 1 {
				t.Errorf("%d claim receipts", n)
			}
		})
	}
}

func TestStoreLeaseExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		holder  string        // of the claim
		after   time.Duration // from the claim to the look for expired leases
		asking  string        // the holder looking
		expired bool
	}{
		{"live lease", "svc", 29 * time.Second, "svc", false},
		{"expired", "svc", 31 * time.Second, "svc", true},
		{"expires at exactly its time", "svc", 30 * time.Second, "svc", true},
		{"an earlier holder's lease is dead", "svc-before-restart", 0, "svc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			registered(t, s, ep1, "net")
			m := enqueued(t, s, c, message(ep1, "net", ackmode.Injected))
			other := enqueued(t, s, c, message(ep1, "net", ackmode.Injected)) // queued: no lease to expire
			if _, ok, err := s.Deliveries.Claim(ctx, tt.holder, 30*time.Second, Target{EndpointID: ep1, Repo: "net"}); err != nil || !ok {
				t.Fatalf("claim: %v, %v", ok, err)
			}
			c.advance(tt.after)
			ids, err := s.Deliveries.ExpiredLeases(ctx, tt.asking)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.expired]; len(ids) != want || (want == 1 && ids[0] != m.ID) {
				t.Fatalf("expired leases %v, want %d (%s)", ids, want, m.ID)
			}
			if !tt.expired {
				return
			}
			got := drive(t, s, m.ID, func(m *queue.Message) error { return m.LeaseExpired(c.Now()) })
			if got.State != queue.Queued || got.Attempts != 1 || !got.NextAttemptAt.Equal(c.now) || got.LastError != "delivery interrupted" {
				t.Errorf("after lease expiry %+v", got)
			}
			if n := count(t, s, `SELECT count(*) FROM delivery_leases`); n != 0 {
				t.Errorf("%d leases left", n)
			}
			if got := get(t, s, other.ID); got.State != queue.Queued || got.Attempts != 0 {
				t.Errorf("the other message %+v", got)
			}
		})
	}
}

// TestStoreRefusedTransitions: a transition the domain refuses changes
// nothing, writes no receipt, and keeps its lease.
func TestStoreRefusedTransitions(t *testing.T) {
	t.Parallel()
	timing := queue.Timing{AckTimeout: time.Minute, Backoff: func(int) time.Duration { return time.Second }}
	tests := []struct {
		name   string
		mode   ackmode.Mode
		due    time.Duration                // the message's first attempt, from start
		before []func(*queue.Message) error // steps that succeed, at start
		refuse func(*queue.Message) error   // a step refused, at start
		code   errs.Code
	}{
		{"claiming a message not due", ackmode.Injected, time.Minute, nil,
			func(m *queue.Message) error { return m.Claim(start) }, errs.Conflict},
		{"expiring the lease of a queued message", ackmode.Injected, 0, nil,
			func(m *queue.Message) error { return m.LeaseExpired(start) }, errs.Conflict},
		{"expiring an ack deadline not passed", ackmode.Acknowledged, 0,
			[]func(*queue.Message) error{
				func(m *queue.Message) error { return m.Claim(start) },
				func(m *queue.Message) error { return m.Written(start, timing) },
			},
			func(m *queue.Message) error { return m.AckDeadlinePassed(start.Add(59*time.Second), timing) }, errs.Conflict},
		{"retrying a message not failed", ackmode.Injected, 0, nil,
			func(m *queue.Message) error { return m.Retry(start) }, errs.Conflict},
		{"writing a message not claimed", ackmode.Injected, 0, nil,
			func(m *queue.Message) error { return m.Written(start, timing) }, errs.Conflict},
		{"claiming a message twice", ackmode.Injected, 0,
			[]func(*queue.Message) error{func(m *queue.Message) error { return m.Claim(start) }},
			func(m *queue.Message) error { return m.Claim(start) }, errs.Conflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			registered(t, s, ep1, "net")
			m := message(ep1, "net", tt.mode)
			m.NextAttemptAt = start.Add(tt.due)
			enqueued(t, s, c, m)
			if len(tt.before) > 0 {
				drive(t, s, m.ID, tt.before...)
			}
			before, receipts := get(t, s, m.ID), receiptCount(t, s)
			_, err := s.Deliveries.Transition(context.Background(), m.ID, "test", tt.refuse)
			if !errs.Is(err, tt.code) {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if got := get(t, s, m.ID); got != before {
				t.Errorf("changed:\n%+v\nwas\n%+v", got, before)
			}
			if n := receiptCount(t, s); n != receipts {
				t.Errorf("%d receipts written", n-receipts)
			}
		})
	}
	t.Run("a message that is not there", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		_, err := s.Deliveries.Transition(context.Background(), "ghost", "test", func(*queue.Message) error { return nil })
		if !errs.Is(err, errs.NotFound) {
			t.Errorf("got %v", err)
		}
	})
}

func TestStoreEnqueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		batch func() []*queue.Message
		check func(t *testing.T, s *Store, c *clock, ms []*queue.Message)
		fails bool
	}{
		{"one message", func() []*queue.Message { return []*queue.Message{message(ep1, "net", ackmode.Injected)} },
			func(t *testing.T, s *Store, c *clock, ms []*queue.Message) {
				m := get(t, s, ms[0].ID)
				if m.ID == "" || m.BatchID != m.ID || m.State != queue.Queued || m.Attempts != 0 ||
					!m.CreatedAt.Equal(c.now) || !m.NextAttemptAt.Equal(c.now) || m.Body != "hello net" {
					t.Errorf("stored %+v", m)
				}
			}, false},
		{"several in one commit", func() []*queue.Message {
			return []*queue.Message{message(ep1, "net", ackmode.Injected), message(ep1, "railiance", ackmode.Acknowledged)}
		},
			func(t *testing.T, s *Store, c *clock, ms []*queue.Message) {
				if n := count(t, s, `SELECT count(*) FROM messages WHERE id <> 'taken'`); n != 2 {
					t.Errorf("%d messages", n)
				}
				if n := count(t, s, `SELECT count(*) FROM receipts WHERE kind = ? AND status = ? AND subject_id <> 'taken'`, KindTransition, string(queue.Queued)); n != 2 {
					t.Errorf("%d accepted receipts", n)
				}
			}, false},
		{"a line seen earlier keeps its time", func() []*queue.Message {
			m := message(ep1, "net", ackmode.Injected)
			m.CreatedAt = start.Add(-time.Minute)
			return []*queue.Message{m}
		},
			func(t *testing.T, s *Store, c *clock, ms []*queue.Message) {
				if m := get(t, s, ms[0].ID); !m.CreatedAt.Equal(start.Add(-time.Minute)) || !m.NextAttemptAt.Equal(c.now) {
					t.Errorf("stored %+v", m)
				}
			}, false},
		{"a time in the future is now", func() []*queue.Message {
			m := message(ep1, "net", ackmode.Injected)
			m.CreatedAt = start.Add(time.Hour)
			return []*queue.Message{m}
		},
			func(t *testing.T, s *Store, c *clock, ms []*queue.Message) {
				if m := get(t, s, ms[0].ID); !m.CreatedAt.Equal(c.now) {
					t.Errorf("stored %+v", m)
				}
			}, false},
		{"a state given is ignored", func() []*queue.Message {
			m := message(ep1, "net", ackmode.Injected)
			m.State = queue.Failed
			return []*queue.Message{m}
		},
			func(t *testing.T, s *Store, c *clock, ms []*queue.Message) {
				if m := get(t, s, ms[0].ID); m.State != queue.Queued {
					t.Errorf("stored %+v", m)
				}
			}, false},
		{"a duplicate idempotency key fails the whole commit", func() []*queue.Message {
			fresh, dup := message(ep1, "net", ackmode.Injected), message(ep1, "net", ackmode.Injected)
			dup.IdempotencyKey = "lease-1"
			return []*queue.Message{fresh, dup}
		}, nil, true},
		{"a duplicate key within one commit", func() []*queue.Message {
			a, b := message(ep1, "net", ackmode.Injected), message(ep1, "net", ackmode.Injected)
			a.IdempotencyKey, b.IdempotencyKey = "lease-2", "lease-2"
			return []*queue.Message{a, b}
		}, nil, true},
		{"a duplicate id", func() []*queue.Message {
			m := message(ep1, "net", ackmode.Injected)
			m.ID = "taken"
			return []*queue.Message{m}
		}, nil, true},
		{"an endpoint not recorded", func() []*queue.Message { return []*queue.Message{message("tmux-amq-9", "net", ackmode.Injected)} }, nil, true},
		{"a body over the limit", func() []*queue.Message {
			m := message(ep1, "net", ackmode.Injected)
			m.Body = strings.Repeat("x", queue.MaxBody+1)
			return []*queue.Message{m}
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			registered(t, s, ep1, "net", "railiance")
			existing := message(ep1, "net", ackmode.Injected)
			existing.ID, existing.IdempotencyKey = "taken", "lease-1"
			enqueued(t, s, c, existing)
			messages, receipts := count(t, s, `SELECT count(*) FROM messages`), receiptCount(t, s)
			c.advance(time.Second)

			batch := tt.batch()
			err := s.Queue.Enqueue(ctx, batch)
			if (err != nil) != tt.fails {
				t.Fatalf("enqueue: %v", err)
			}
			if !tt.fails {
				if _, err := s.Deliveries.Get(ctx, "taken"); err != nil {
					t.Error(err)
				}
				tt.check(t, s, c, batch)
				return
			}
			if n := count(t, s, `SELECT count(*) FROM messages`); n != messages {
				t.Errorf("a failed enqueue left %d messages", n-messages)
			}
			if n := receiptCount(t, s); n != receipts {
				t.Errorf("a failed enqueue left %d receipts", n-receipts)
			}
			if m := get(t, s, "taken"); m.Body != "hello net" || m.IdempotencyKey != "lease-1" {
				t.Errorf("the existing message changed: %+v", m)
			}
		})
	}
	t.Run("a replay with a taken key is skipped", func(t *testing.T) {
		t.Parallel()
		s, c := newStore(t)
		registered(t, s, ep1, "net")
		existing := message(ep1, "net", ackmode.Injected)
		existing.IdempotencyKey = "lease-1"
		enqueued(t, s, c, existing)
		again := message(ep1, "net", ackmode.Injected)
		again.IdempotencyKey, again.ReplayOf = "lease-1", existing.ID
		inserted, err := s.Queue.Replay(context.Background(), "batch", []*queue.Message{again})
		if err != nil || len(inserted) != 1 || inserted[0] {
			t.Errorf("replay: %v, %v", inserted, err)
		}
		if n := count(t, s, `SELECT count(*) FROM messages`); n != 1 {
			t.Errorf("%d messages", n)
		}
	})
}

// TestStorePurgeNothing: a purge with nothing (left) to purge deletes
// nothing, and a message that is not final is never purged.
func TestStorePurgeNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ids  func(final, pending string) []string
	}{
		{"no ids", func(string, string) []string { return nil }},
		{"unknown ids", func(string, string) []string { return []string{"ghost", "phantom"} }},
		{"a pending message", func(_, pending string) []string { return []string{pending} }},
		{"a message purged before", func(final, _ string) []string { return []string{final} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t)
			ctx := context.Background()
			registered(t, s, ep1, "net")
			final := enqueued(t, s, c, message(ep1, "net", ackmode.Injected))
			drive(t, s, final.ID,
				func(m *queue.Message) error { return m.Claim(c.Now()) },
				func(m *queue.Message) error { return m.Written(c.Now(), queue.Timing{}) })
			if done, err := s.Purges.Purge(ctx, []string{final.ID}, nil); err != nil || done.Messages != 1 {
				t.Fatalf("first purge: %+v, %v", done, err)
			}
			pending := enqueued(t, s, c, message(ep1, "net", ackmode.Injected))
			messages, receipts := count(t, s, `SELECT count(*) FROM messages`), receiptCount(t, s)
			done, err := s.Purges.Purge(ctx, tt.ids(final.ID, pending.ID), nil)
			if err != nil || done != (Purged{}) {
				t.Errorf("purged %+v, %v; want nothing", done, err)
			}
			if n := count(t, s, `SELECT count(*) FROM messages`); n != messages {
				t.Errorf("%d messages deleted", messages-n)
			}
			if n := receiptCount(t, s); n != receipts {
				t.Errorf("%d receipts deleted", receipts-n)
			}
			if got := get(t, s, pending.ID); got.State != queue.Queued {
				t.Errorf("pending message %+v", got)
			}
			if _, err := s.Deliveries.Get(ctx, final.ID); !errs.Is(err, errs.NotFound) {
				t.Errorf("purged message: %v", err)
			}
		})
	}
	t.Run("a plan that chooses nothing", func(t *testing.T) {
		t.Parallel()
		s, c := newStore(t)
		registered(t, s, ep1, "net")
		m := enqueued(t, s, c, message(ep1, "net", ackmode.Injected))
		drive(t, s, m.ID,
			func(m *queue.Message) error { return m.Claim(c.Now()) },
			func(m *queue.Message) error { return m.Written(c.Now(), queue.Timing{}) })
		for _, r := range []PurgeRule{
			{},                              // no rule
			{Before: start.Add(-time.Hour)}, // older than everything
			{MaxBytes: 1 << 30},             // far under the limit
			{Before: start.Add(time.Hour), Repo: "railiance"},           // another repo
			{Before: start.Add(time.Hour), State: string(queue.Failed)}, // another state
		} {
			p, err := PlanPurge(context.Background(), s.DB.Reader, r)
			if err != nil || len(p.IDs) != 0 || p.HistoryMessages != 1 {
				t.Errorf("%+v: planned %v (history %d), %v", r, p.IDs, p.HistoryMessages, err)
			}
		}
	})
}
