package cli_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// seedHistory writes a database over the advisory's 100 MB: one message
// (its date is the advisory's "since") and one receipt row whose subject
// is a 101 MB blob; the history's size counts every column's bytes.
func seedHistory(t *testing.T, e *testutil.Env) {
	t.Helper()
	getenv := func(key string) string {
		for _, kv := range e.Vars {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				return v
			}
		}
		return ""
	}
	p, err := paths.Resolve(paths.Tamq, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := paths.EnsurePrivateDir(p.StateDir); err != nil {
		t.Fatal(err)
	}
	// The schema as the service makes it; then the rows, written without a
	// journal: 100 MB through the WAL and back costs seconds under -race.
	st, err := store.Open(context.Background(), p, time.Second, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	st.DB.Close()
	db, err := sql.Open("sqlite", "file:"+p.Database+"?_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state, max_attempts,
			policy_profile, config_version, created_at, updated_at)
			VALUES ('m', 'b', 'operator', 'operator', 'alpha', 'hello', 'injected', 'injected', 4, 'p', 'c', 1772668800000, 1772668800000);
		-- Published already (projected_after set): the service never sends it.
		INSERT INTO receipt_rows (at, kind, subject, status, projected_after) VALUES (1772668800000, 'test.padding', zeroblob(101000000), 'ok', 0)`)
	if err != nil {
		t.Fatal(err)
	}
}

// The spec's history advisory is printed on stderr, once, by the commands
// that start a detached service: tamq start --detach and tamq open. An
// open that finds the service running prints none (it is an advisory at
// start).
func TestStartAndOpenPrintTheHistoryAdvisory(t *testing.T) {
	t.Parallel()
	e, tm := newWorkspace(t)
	seedHistory(t, e)
	const advisory = "Size of history is 101 MB since 260305, exceeding 100MB. Consider using 'tamq purge'.\n"

	r := e.Tamq(t, "start", "--detach", "--tmux-socket", tm.Name)
	if !strings.Contains(r.Stdout, "tamq started") || strings.Count(r.Stderr, advisory) != 1 {
		t.Errorf("start --detach, want the advisory once on stderr: %s", r)
	}
	e.Tamq(t, "stop")

	r = e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	if strings.Count(r.Stderr, advisory) != 1 {
		t.Errorf("open starting the service, want the advisory once on stderr: %s", r)
	}
	r = e.Tamq(t, "open", "--tmux-socket", tm.Name, "alpha")
	if strings.Contains(r.Stderr, "Size of history") {
		t.Errorf("open with the service running printed the advisory: %s", r)
	}
}
