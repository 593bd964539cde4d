package service

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// At start, a claim a killed run left is settled by the last delivery its
// window's broker reports: what that delivery wrote is recorded as written
// (its receipt says so), and a claim it did not write (another claim of the
// same message, older) goes back to the queue. A window whose pane is alive
// waits for its broker, getting nothing else meanwhile, until the broker
// attaches or brokerReturnWait passes on the service's clock.
func TestRescuerSettlesByTheBrokersWord(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Now())
	svc, _ := setup(t, Options{Clock: fake})
	t.Cleanup(svc.d.Close) // never run: its workers are driven here
	tm := testutil.NewTmux(t)
	socket := tm.Must(t, "display", "-p", "#{socket_path}")
	serverPID := tm.Must(t, "display", "-p", "#{pid}")
	pane := tm.Must(t, "display", "-p", "#{pane_id}")
	// The pane runs what the process table shows as tamq's broker (a
	// script named broker, run as "tamq broker -- agent"): one may attach.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broker"), []byte("sleep 600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm.Must(t, "respawn-pane", "-k", "-t", pane, "bash", "-c", "cd "+dir+" && exec -a tamq bash broker -- agent")
	testutil.WaitFor(t, "the pane to run the broker", func() bool {
		return isBroker(atoi(tm.Must(t, "display", "-p", "-t", pane, "#{pane_pid}")))
	})
	claimed := fake.Now().Add(-time.Second).Truncate(time.Millisecond)
	// Endpoint "gone" is disconnected: none of its brokers will come back.
	// On "live", window "held" has a live pane and waits for its broker.
	err := svc.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
				VALUES ('gone', '/nonexistent', 1, 's', 'disconnected', 1, 1), ('live', ?, ?, 's', 'connected', 1, 1)`, []any{socket, serverPID}},
			{`INSERT INTO windows (endpoint_id, repo, repo_path, pane_id, mode, created_at, updated_at)
				VALUES ('gone', 'wrote', '/r', '%90', 'trigger', 1, 1), ('gone', 'other', '/r', '%91', 'trigger', 1, 1),
				('live', 'held', '/r', ?, 'trigger', 1, 1)`, []any{pane}},
		} {
			if _, err := tx.Exec(q.sql, q.args...); err != nil {
				return err
			}
		}
		for _, m := range []struct{ id, endpoint, target string }{
			{"w1", "gone", "wrote"}, {"w2", "gone", "wrote"}, {"o1", "gone", "other"}, {"h1", "live", "held"},
		} {
			if _, err := tx.Exec(`INSERT INTO messages (id, batch_id, endpoint_id, sender, sender_kind, target_repo, body, ack_mode, state, attempts,
				max_attempts, policy_profile, config_version, created_at, updated_at)
				VALUES (?, 'b', ?, 'operator', 'operator', ?, 'hello', 'injected', 'delivering', 1, 4, 'p', 'c', ?, ?)`,
				m.id, m.endpoint, m.target, claimed.UnixMilli(), claimed.UnixMilli()); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
				VALUES (?, ?, 1, 'killed', ?, ?)`, m.id, "lease-"+m.id, claimed.UnixMilli(), claimed.Add(time.Minute).UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	written := api.DeliveryOutcome{Kind: api.Written, At: claimed.Add(500 * time.Millisecond), Quiet: true}
	attach := func(endpoint, repo string, last *api.LastDelivery) {
		svc.brokers.mu.Lock()
		defer svc.brokers.mu.Unlock()
		if svc.brokers.live == nil {
			svc.brokers.live = map[string]*brokerConn{}
		}
		svc.brokers.live[store.DeliveryKey(endpoint, repo)] = &brokerConn{endpointID: endpoint, repo: repo,
			claims: true, lastDelivery: last, closed: make(chan struct{})}
	}
	attach("gone", "wrote", &api.LastDelivery{Claim: api.DeliveryClaim{IDs: []string{"w1", "w2"}, At: claimed}, Result: written})
	attach("gone", "other", &api.LastDelivery{Claim: api.DeliveryClaim{IDs: []string{"o1"}, At: claimed.Add(-time.Minute)}, Result: written})
	held := store.DeliveryKey("live", "held")
	if !svc.rescuer.holds(held) || !svc.rescuer.holds(store.DeliveryKey("live", "another")) {
		t.Fatal("a window took deliveries before the earlier claims were read")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.rescuer.run(ctx) }()
	defer func() { cancel(); <-done }()
	if !fake.BlockUntil(1, done) { // the wait for the live window's broker
		t.Fatal("the rescuer ended without waiting for the live window's broker")
	}
	state := func(id string) (state string, attempts int, lastError string) {
		t.Helper()
		if err := svc.db.Reader.QueryRow(`SELECT state, attempts, COALESCE(last_error, '') FROM messages WHERE id = ?`, id).Scan(&state, &attempts, &lastError); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, id := range []string{"w1", "w2"} {
		if st, n, _ := state(id); st != "injected" || n != 1 {
			t.Errorf("%s is %s after %d attempts; its broker wrote it", id, st, n)
		}
		var settled int
		if err := svc.db.Reader.QueryRow(`SELECT count(*) FROM receipts WHERE subject_id = ? AND status = 'injected'
			AND json_extract(detail, '$.settled') IS NOT NULL AND json_extract(detail, '$.path') = 'broker'`, id).Scan(&settled); err != nil || settled != 1 {
			t.Errorf("%s: %d receipts of a write settled by its broker (%v)", id, settled, err)
		}
	}
	if st, _, why := state("o1"); st != "queued" || why != "delivery interrupted" {
		t.Errorf("o1 is %s (%q); its broker's last delivery was an older claim", st, why)
	}
	if svc.rescuer.holds(store.DeliveryKey("gone", "wrote")) || svc.rescuer.holds(store.DeliveryKey("gone", "other")) {
		t.Error("a settled window is still held")
	}
	if st, _, _ := state("h1"); st != "delivering" || !svc.rescuer.holds(held) {
		t.Fatalf("h1 is %s before its broker came back, its window held: %v", st, svc.rescuer.holds(held))
	}
	fake.Advance(brokerReturnWait) // no broker came: the claim goes back
	<-done
	if st, _, _ := state("h1"); st != "queued" || svc.rescuer.holds(held) {
		t.Errorf("h1 is %s after its broker's wait, its window held: %v", st, svc.rescuer.holds(held))
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
