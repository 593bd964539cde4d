package service

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// The ack expirer, built alone over a temp store, keeps deadlines by the
// service's clock: a message waits for its ack until that clock reaches the
// deadline, whatever the wall clock does. Then it is redelivered while it
// has attempts left (MaxRetries counts retries), failed after its last, and
// the dispatcher is woken for what was queued again.
func TestAckExpirerKeepsTheInjectedClock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		attempts int // of max_attempts 4
		want     string
	}{
		{name: "a first attempt not acknowledged in time is redelivered", attempts: 1, want: "queued"},
		{name: "the attempt of the last retry is redelivered", attempts: 4, want: "queued"},
		{name: "an attempt beyond the last retry fails", attempts: 5, want: "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(time.Now())
			svc, _ := setup(t, Options{Clock: fake})
			t.Cleanup(svc.d.Close) // never run: only the expirer below runs
			dispatch := wakeup.New()
			acks := &ackExpirer{log: svc.log, clock: fake, config: svc.opts.Config, deliveries: svc.store.Deliveries,
				dispatch: dispatch, wakes: wakeup.New()}
			awaitingAck(t, svc, c.attempts, fake.Now(), fake.Now().Add(time.Minute))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); acks.run(ctx) }()
			defer func() { cancel(); <-done }()

			// Parked until the deadline, the only wait on the clock: nothing has moved.
			if !fake.BlockUntil(1, done) {
				t.Fatal("the ack expirer ended")
			}
			if st, _ := messageState(t, svc, "m"); st != "awaiting_ack" {
				t.Fatalf("before the deadline: %s", st)
			}
			fake.Advance(time.Minute)
			<-dispatch.C() // the expirer wakes the dispatcher once it moved the message
			if st, n := messageState(t, svc, "m"); st != c.want || n != c.attempts {
				t.Fatalf("after the deadline: %s after %d attempts, want %s", st, n, c.want)
			}
		})
	}
}

// awaitingAck writes message m, delivered at created (attempts made so far,
// of max_attempts 4) and waiting for its ack until deadline.
func awaitingAck(t *testing.T, svc *Service, attempts int, created, deadline time.Time) {
	t.Helper()
	if err := svc.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state, attempts,
			max_attempts, policy_profile, config_version, created_at, updated_at, ack_deadline_at)
			VALUES ('m', 'b', 'operator', 'operator', 'r', 'hello', 'acknowledged', 'awaiting_ack', ?, 4, 'p', 'c', ?, ?, ?)`,
			attempts, created.UnixMilli(), created.UnixMilli(), deadline.UnixMilli())
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
