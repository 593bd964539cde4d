package service

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/jsonl"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// The export line SQLite builds reads back as the record the service builds
// from the same row, every optional field set or not.
func TestEnvelopeSQLMatchesTheRecord(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: filepath.Join(t.TempDir(), "t.sqlite3"), Migrations: store.Migrations})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 12, 2, 14, 5, 6, 789_000_000, time.UTC)
	s := store.New(db, func() time.Time { return at })
	full := &queue.Message{Sender: "a", SenderKind: queue.FromOperator, Target: "b", Body: "hi <&> \"q\"\n\tü ✓",
		AckMode: ackmode.Acknowledged, MaxRetries: 3, IdempotencyKey: "k", CorrelationID: "c", CoordinationEndpointID: "ce",
		ReplayOf: "m0", PolicyProfile: "p@1", ConfigVersion: "v"}
	bare := &queue.Message{Sender: "b", SenderKind: queue.FromWorker, Target: "a", Body: "x", AckMode: ackmode.Injected,
		MaxRetries: 0, PolicyProfile: "p@1", ConfigVersion: "v"}
	if err := s.Queue.Enqueue(ctx, []*queue.Message{full, bare}); err != nil {
		t.Fatal(err)
	}
	// Every time set on the first, on whole and on odd milliseconds.
	if _, err := s.Deliveries.Transition(ctx, full.ID, "test", func(m *queue.Message) error {
		m.State, m.Attempts, m.LastError = queue.Acknowledged, 2, "e"
		m.AckDeadlineAt, m.InjectedAt, m.AckedAt, m.FailedAt = at.Add(time.Second), at.Add(1001*time.Millisecond), at.Add(10*time.Millisecond), at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	if err := store.ExportLines(ctx, db.Reader, store.Filter{}, func(l []byte) error {
		lines = append(lines, append([]byte{}, l...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, id := range []string{full.ID, bare.ID} {
		m, err := s.Deliveries.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got jsonl.Envelope
		if err := json.Unmarshal(lines[i], &got); err != nil {
			t.Fatalf("line %s: %v", lines[i], err)
		}
		want := jsonl.Envelope{V: jsonl.Version, Message: api.MessageOf(m, true)}
		if !reflect.DeepEqual(normal(got), normal(want)) {
			t.Errorf("line\n%s\nreads as %+v\nwant      %+v", lines[i], got, want)
		}
	}
}

// normal puts every time in UTC, for comparing.
func normal(e jsonl.Envelope) jsonl.Envelope {
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	for _, p := range []**time.Time{&e.NextAttemptAt, &e.AckDeadlineAt, &e.InjectedAt, &e.AckedAt, &e.FailedAt} {
		if *p != nil {
			u := (*p).UTC()
			*p = &u
		}
	}
	return e
}
