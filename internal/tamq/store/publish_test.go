package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// Each kind of receipt row maps to the contract's receipt: the message id
// as the local message id, other subjects and tamq's endpoint in the
// detail, never a body; ids are "tamq:<instance>:<row id>".
func TestUnpublishedReceiptsMapRows(t *testing.T) {
	t.Parallel()
	db := setup(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { return now })
	s.Receipts.PolicyProfile, s.Receipts.ConfigVersion = "default@1", "cfg1"
	ctx := context.Background()
	retry := now.Add(time.Minute)
	tests := []struct {
		name string
		in   receipt.Receipt
		want contract.Receipt
	}{
		{"message transition",
			receipt.Receipt{Kind: KindTransition, SubjectID: "m1", Status: "queued", Reason: "accepted", Attempt: 2, NextRetryAt: retry,
				EndpointID: "tmux-amq-1", CoordinationEndpointID: "ce-1", Detail: map[string]any{"to": "queued", "body": "secret text"}},
			contract.Receipt{Kind: KindTransition, Status: "queued", Reason: "accepted", Attempt: 2, NextRetryAt: &retry,
				LocalMessageID: "m1", CoordinationEndpointID: "ce-1", PolicyProfile: "default@1", ConfigVersion: "cfg1",
				Detail: map[string]any{"to": "queued", "endpoint_id": "tmux-amq-1"}}},
		{"endpoint state",
			receipt.Receipt{Kind: "endpoint.state", SubjectID: "tmux-amq-1", Status: "connected", EndpointID: "tmux-amq-1"},
			contract.Receipt{Kind: "endpoint.state", Status: "connected", PolicyProfile: "default@1", ConfigVersion: "cfg1",
				Detail: map[string]any{"subject_id": "tmux-amq-1", "endpoint_id": "tmux-amq-1"}}},
		{"service start, own profile",
			receipt.Receipt{Kind: receipt.KindServiceStart, Status: "started", PolicyProfile: "strict@2", ConfigVersion: "cfg2",
				Detail: map[string]any{"pid": 42}},
			contract.Receipt{Kind: receipt.KindServiceStart, Status: "started", PolicyProfile: "strict@2", ConfigVersion: "cfg2",
				Detail: map[string]any{"pid": float64(42)}}},
	}
	for _, tt := range tests {
		if err := s.Receipts.AddReceipt(ctx, tt.in); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Receipts.UnpublishedReceipts(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tests) {
		t.Fatalf("%d unpublished receipts, want %d", len(got), len(tests))
	}
	var instance string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := got[i]
			parts := strings.Split(u.Receipt.ID, ":")
			if len(parts) != 3 || parts[0] != "tamq" || len(parts[1]) != 16 || parts[2] != strconv.FormatInt(u.RowID, 10) {
				t.Errorf("id %q for row %d", u.Receipt.ID, u.RowID)
			}
			if instance == "" {
				instance = parts[1]
			} else if parts[1] != instance {
				t.Errorf("instance %q, earlier rows %q", parts[1], instance)
			}
			want := tt.want
			want.ID, want.Source, want.At = u.Receipt.ID, "tamq", now
			a, _ := json.Marshal(u.Receipt)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("got  %s\nwant %s", a, b)
			}
			if strings.Contains(string(a), "secret text") {
				t.Errorf("a body reached the published form: %s", a)
			}
		})
	}
}

// Oldest first, at most limit; what is marked is not offered again, and a
// receipt marked twice keeps its first time.
func TestPublishingMarksAndCounts(t *testing.T) {
	t.Parallel()
	db := setup(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := New(db, func() time.Time { return now })
	ctx := context.Background()
	for i := range 5 {
		if err := s.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: "test.kind", Status: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name        string
		limit       int
		mark        int // how many of those read to mark published
		wantStatus  []string
		wantPending int // after marking
	}{
		{"first two", 2, 2, []string{"0", "1"}, 3},
		{"read three, mark one", 3, 1, []string{"2", "3", "4"}, 2},
		{"the rest", 10, 2, []string{"3", "4"}, 0},
		{"nothing left", 10, 0, nil, 0},
	}
	for _, st := range steps {
		got, err := s.Receipts.UnpublishedReceipts(ctx, st.limit)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []string
		var ids []int64
		for i, u := range got {
			statuses = append(statuses, u.Receipt.Status)
			if i < st.mark {
				ids = append(ids, u.RowID)
			}
		}
		if strings.Join(statuses, ",") != strings.Join(st.wantStatus, ",") {
			t.Errorf("%s: read %v, want %v", st.name, statuses, st.wantStatus)
		}
		if err := s.Receipts.MarkPublished(ctx, ids, now); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Receipts.PendingReceipts(ctx); err != nil || n != st.wantPending {
			t.Errorf("%s: pending %d %v, want %d", st.name, n, err, st.wantPending)
		}
	}
	if err := s.Receipts.MarkPublished(ctx, []int64{1}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var at int64
	if err := db.Reader.QueryRow(`SELECT projected_at FROM receipts WHERE id = 1`).Scan(&at); err != nil || at != now.UnixMilli() {
		t.Errorf("projected_at %d %v after a second mark, want the first %d", at, err, now.UnixMilli())
	}
}

// The instance id is made once per database: the same after reopening,
// another for another database.
func TestInstanceIsKeptInTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(path string) *Store {
		db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: Migrations})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return New(db, time.Now)
	}
	dir := t.TempDir()
	a := open(filepath.Join(dir, "a.sqlite3"))
	first, err := a.Receipts.instance(ctx)
	if err != nil || first == "" {
		t.Fatalf("instance %q %v", first, err)
	}
	a.DB.Close()
	again, err := open(filepath.Join(dir, "a.sqlite3")).Receipts.instance(ctx)
	if err != nil || again != first {
		t.Errorf("after reopening: %q %v, want %q", again, err, first)
	}
	other, err := open(filepath.Join(dir, "b.sqlite3")).Receipts.instance(ctx)
	if err != nil || other == first {
		t.Errorf("another database: %q %v, same as %q", other, err, first)
	}
}
