package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

var repos = []string{"net-kingdom", "railiance", "with space,comma", "operator"}

// seed enqueues n messages through the store, one enqueue per message, with a
// clock that advances 0 to 2 ms per message (so several share a millisecond),
// and random senders, targets and final or pending states.
func seed(t *testing.T, db *sqlitedb.DB, n int, rng *rand.Rand) (*Store, []queue.Message) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { return now })
	ctx := context.Background()
	var out []queue.Message
	for i := range n {
		now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		m := &queue.Message{Sender: repos[rng.IntN(len(repos))], SenderKind: queue.FromWorker, Target: repos[rng.IntN(3)],
			Body: fmt.Sprintf("body %d %s", i, strings.Repeat("x", rng.IntN(200))), AckMode: ackmode.Injected,
			MaxRetries: 3, PolicyProfile: "default@1", ConfigVersion: "c"}
		if err := s.Queue.Enqueue(ctx, []*queue.Message{m}); err != nil {
			t.Fatal(err)
		}
		if state := MessageStates[rng.IntN(len(MessageStates))]; state != "queued" {
			m.State = queue.State(state)
		}
		out = append(out, *m)
	}
	// The states in one transaction: a write each would make this seed most
	// of the tests' time under -race.
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, m := range out {
			if m.State == "" || m.State == "queued" {
				continue
			}
			if _, err := tx.Exec(`UPDATE message_rows SET state = ? WHERE id = ?`, codeIn(stateCodes, string(m.State)), idValue(m.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, out
}

func TestHistoryPagesMatchAFullScan(t *testing.T) {
	t.Parallel()
	db := setup(t)
	rng := rand.New(rand.NewPCG(1, 2))
	_, all := seed(t, db, 300, rng)
	// Newest first: by creation, then id.
	slices.SortFunc(all, func(a, b queue.Message) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return -c
		}
		return -strings.Compare(a.ID, b.ID)
	})
	first, last := all[len(all)-1].CreatedAt, all[0].CreatedAt
	span := last.Sub(first)
	for round := range 20 {
		var f Filter
		if rng.IntN(2) == 0 {
			f.Repo = repos[rng.IntN(len(repos))]
		}
		if rng.IntN(3) == 0 {
			f.State = MessageStates[rng.IntN(len(MessageStates))]
		}
		if rng.IntN(2) == 0 {
			f.Since = first.Add(time.Duration(rng.Int64N(int64(span))))
		}
		if rng.IntN(2) == 0 {
			f.Until = first.Add(time.Duration(rng.Int64N(int64(span))))
		}
		var want []string
		for _, m := range all {
			if (f.Repo == "" || m.Sender == f.Repo || m.Target == f.Repo) && (f.State == "" || string(m.State) == f.State) &&
				(f.Since.IsZero() || !m.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || m.CreatedAt.Before(f.Until)) {
				want = append(want, m.ID)
			}
		}
		var got []string
		p := Page{Filter: f, Limit: 1 + rng.IntN(20)}
		for {
			page, err := History(context.Background(), db.Reader, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > p.Limit {
				t.Fatalf("page of %d over the limit %d", len(page), p.Limit)
			}
			for _, m := range page {
				got = append(got, m.ID)
			}
			if len(page) < p.Limit {
				break
			}
			p.After = page[len(page)-1].ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d, filter %+v, limit %d:\n got %d %v\nwant %d %v", round, f, p.Limit, len(got), got, len(want), want)
		}
		n, err := Count(context.Background(), db.Reader, f)
		if err != nil || n != len(want) {
			t.Fatalf("count %d, %v; want %d", n, err, len(want))
		}
		var exported []string
		ExportLines(context.Background(), db.Reader, f, func(line []byte) error {
			var e struct{ ID string }
			json.Unmarshal(line, &e)
			exported = append(exported, e.ID)
			return nil
		})
		slices.Reverse(exported) // stored order is creation order here
		if !slices.Equal(exported, want) {
			t.Fatalf("the export (oldest first) differs for %+v", f)
		}
	}
}

func TestPlanPurge(t *testing.T) {
	t.Parallel()
	db := setup(t)
	_, all := seed(t, db, 200, rand.New(rand.NewPCG(3, 4)))
	ctx := context.Background()
	final := func(m queue.Message) bool { return m.State.Final() }
	plan := func(r PurgeRule) PurgePlan {
		t.Helper()
		p, err := PlanPurge(ctx, db.Reader, r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mid := all[100].CreatedAt
	var want []string
	for _, m := range all {
		if final(m) && m.CreatedAt.Before(mid) {
			want = append(want, m.ID)
		}
	}
	if p := plan(PurgeRule{Before: mid}); !slices.Equal(p.IDs, want) || p.HistoryMessages != 200 {
		t.Errorf("--before: %d ids, want %d", len(p.IDs), len(want))
	}
	if p := plan(PurgeRule{}); len(p.IDs) != 0 || p.HistoryBytes == 0 {
		t.Errorf("an empty rule chose %d", len(p.IDs))
	}
	// --max-size: oldest final ones go until the whole history fits.
	total := plan(PurgeRule{}).HistoryBytes
	p := plan(PurgeRule{MaxBytes: total / 2})
	if p.HistoryBytes-p.Bytes > total/2 || len(p.IDs) == 0 {
		t.Errorf("after the plan %d bytes are left, over %d", p.HistoryBytes-p.Bytes, total/2)
	}
	// Keeping the newest chosen one would no longer fit: it is the least.
	// A message counts its own bytes and its share of the receipts.
	h, err := measureHistory(ctx, db.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var lastSize int64
	if err := db.Reader.QueryRow(`SELECT `+messageBytes+` FROM message_rows WHERE id = ?`, idValue(p.IDs[len(p.IDs)-1])).Scan(&lastSize); err != nil {
		t.Fatal(err)
	}
	if p.HistoryBytes-p.Bytes+lastSize+h.receiptShare() <= total/2 {
		t.Errorf("the plan removes more than it needs")
	}
	// Both rules: the union. A repo narrows it; pending messages never go.
	both := plan(PurgeRule{Before: mid, MaxBytes: total / 2})
	if len(both.IDs) < max(len(want), len(p.IDs)) {
		t.Errorf("union %d < %d, %d", len(both.IDs), len(want), len(p.IDs))
	}
	all1 := plan(PurgeRule{MaxBytes: 1, Repo: "railiance"})
	for _, id := range all1.IDs {
		i := slices.IndexFunc(all, func(m queue.Message) bool { return m.ID == id })
		if m := all[i]; !final(m) || (m.Sender != "railiance" && m.Target != "railiance") {
			t.Errorf("planned %+v", m)
		}
	}

	// A message retried after the plan is kept by the purge.
	s := New(db, time.Now)
	victim := all1.IDs[0]
	if err := exec(t, db, `UPDATE message_rows SET state = `+stateLit(queue.Queued)+` WHERE id = ?`, idValue(victim)); err != nil {
		t.Fatal(err)
	}
	done, err := s.Purges.Purge(ctx, all1.IDs, nil)
	if n := done.Messages; err != nil || n != len(all1.IDs)-1 {
		t.Errorf("purged %d, %v; want %d", n, err, len(all1.IDs)-1)
	}
	if _, err := s.Deliveries.Get(ctx, victim); err != nil {
		t.Errorf("the retried message went: %v", err)
	}
}

func TestMigrationFromV1KeepsMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.sqlite3")
	v1, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if err := exec(t, v1, insertMessage, "m1", "kept", "injected", nil); err != nil {
		t.Fatal(err)
	}
	v1.Close()
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations, BackupDir: filepath.Join(dir, "backups")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(ctx); v != sqlitedb.LatestVersion(Migrations) || db.BackupPath == "" {
		t.Fatalf("version %d, backup %q", v, db.BackupPath)
	}
	if _, err := os.Stat(db.BackupPath); err != nil {
		t.Fatal(err)
	}
	page, err := History(ctx, db.Reader, Page{})
	if err != nil || len(page) != 1 || page[0].Body != "kept" {
		t.Fatalf("history after migration: %v %v", page, err)
	}
}
