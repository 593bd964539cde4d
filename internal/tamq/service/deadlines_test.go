package service

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
)

// The ack expirer keeps deadlines by the service's clock: a message waits for
// its ack until that clock reaches the deadline, whatever the wall clock does.
func TestAckExpirerKeepsTheInjectedClock(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	svc, _ := setup(t, Options{Clock: fake})
	t.Cleanup(svc.d.Close) // never run: its workers are driven here
	ctx, cancel := context.WithCancel(context.Background())
	awaitingAck(t, svc, fake.Now(), fake.Now().Add(time.Minute))
	state := func() string {
		var s string
		if err := svc.db.Reader.QueryRow(`SELECT state FROM messages WHERE id = 'm'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	done := make(chan struct{})
	go func() { defer close(done); svc.acks.run(ctx) }()
	defer func() { cancel(); <-done }()

	// Parked until the deadline, the only wait on the clock: nothing has moved.
	if !fake.BlockUntil(1, done) {
		t.Fatal("the ack expirer ended")
	}
	if got := state(); got != "awaiting_ack" {
		t.Fatalf("before the deadline: %s", got)
	}
	fake.Advance(time.Minute)
	<-svc.dispatcher.wakes.C() // the expirer wakes the dispatcher for what it queued again
	if got := state(); got != "queued" {
		t.Fatalf("after the deadline: %s", got)
	}
}

// awaitingAck writes message m, delivered at created (its first attempt of
// four) and waiting for its ack until deadline.
func awaitingAck(t *testing.T, svc *Service, created, deadline time.Time) {
	t.Helper()
	if err := svc.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state, attempts,
			max_attempts, policy_profile, config_version, created_at, updated_at, ack_deadline_at)
			VALUES ('m', 'b', 'operator', 'operator', 'r', 'hello', 'acknowledged', 'awaiting_ack', 1, 4, 'p', 'c', ?, ?, ?)`,
			created.UnixMilli(), created.UnixMilli(), deadline.UnixMilli())
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
