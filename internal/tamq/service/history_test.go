package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/jsonl"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// endpointOf is the endpoint id of the workspace's only endpoint.
func endpointOf(t *testing.T, e *testutil.Env) string {
	t.Helper()
	var st api.StatusReport
	if err := json.Unmarshal([]byte(e.Tamq(t, "status", "--json").Stdout), &st); err != nil || len(st.Endpoints) != 1 {
		t.Fatalf("status: %v %+v", err, st.Endpoints)
	}
	return st.Endpoints[0].ID
}

func readEnvelopes(t *testing.T, path string) []jsonl.Envelope {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []jsonl.Envelope
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var env jsonl.Envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("line %d of %s: %v", i+1, path, err)
		}
		out = append(out, env)
	}
	return out
}

// replayRun is the --json summary of tamq replay.
type replayRun struct {
	BatchID    string              `json:"batch_id"`
	Summary    api.ReplaySummary   `json:"summary"`
	Rejections []api.ReplayOutcome `json:"rejections"`
	Stopped    bool                `json:"stopped"`
}

func replay(t *testing.T, e *testutil.Env, args ...string) (replayRun, testutil.Result) {
	t.Helper()
	r := e.Run(t, "tamq", append([]string{"replay", "--json"}, args...)...)
	var run replayRun
	if err := json.Unmarshal([]byte(r.Stdout), &run); err != nil {
		t.Fatalf("replay --json: %v\n%s", err, r)
	}
	return run, r
}

func TestExportAndReplayRoundTrip(t *testing.T) {
	t.Parallel()
	a, _ := workspace(t, fastConfig, "net-kingdom", "with space,comma")
	texts := []string{
		"To:net-kingdom: first\nwith a second line",
		"To:with space,comma: ünïcödé ✓ <&> \"quoted\"\ttab",
		"To:net-kingdom: third",
	}
	var sent []api.Message
	for _, text := range texts {
		m := send(t, a, text)
		waitState(t, a, m.ID, "injected")
		sent = append(sent, m)
	}
	file := filepath.Join(t.TempDir(), "history.jsonl")
	a.Tamq(t, "export", file)
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export file: %v %v", fi, err)
	}
	envs := readEnvelopes(t, file)
	if len(envs) != 3 {
		t.Fatalf("%d lines exported", len(envs))
	}
	for i, env := range envs {
		m := stateOf(t, a, sent[i].ID)
		if env.V != jsonl.Version || env.ID != sent[i].ID || env.Body == nil || env.State != "injected" ||
			env.InjectedAt == nil || env.BatchID != m.BatchID || env.EndpointID != m.EndpointID || env.Sender != "operator" ||
			env.Provenance != "o" || env.Attempts != 1 || env.CreatedAt.IsZero() {
			t.Errorf("line %d: %+v", i+1, env)
		}
	}
	// Standard output gets the same lines.
	if out := a.Tamq(t, "export").Stdout; out != string(must(os.ReadFile(file))) {
		t.Errorf("export to stdout differs from the file:\n%s", out)
	}

	// A second state dir with its own tmux server and windows.
	b, _ := workspace(t, fastConfig, "net-kingdom", "with space,comma")
	ep := endpointOf(t, b)
	run, r := replay(t, b, file, "--endpoint", ep)
	if r.Status != 0 || run.Summary != (api.ReplaySummary{Lines: 3, Accepted: 3}) || run.BatchID == "" {
		t.Fatalf("replay: %+v\n%s", run, r)
	}
	got := history(t, b, "--body")
	slices.Reverse(got)
	if len(got) != 3 {
		t.Fatalf("%d messages after replay", len(got))
	}
	for i, m := range got {
		waitState(t, b, m.ID, "injected")
		o := envs[i]
		if m.ID == o.ID || m.BatchID != run.BatchID || m.EndpointID != ep || m.ReplayOf != o.ID ||
			*m.Body != *o.Body || m.Target != o.Target || m.Sender != o.Sender || m.SenderKind != o.SenderKind ||
			m.Provenance != o.Provenance || m.AckMode != o.AckMode {
			t.Errorf("replayed %d: %+v\noriginal %+v", i, m, o)
		}
	}
	// What arrived in the terminals is what arrived in the first workspace:
	// the same envelopes in the same order (replayed at once, they may share
	// a paste where the originals went one by one).
	for _, repo := range []string{"net-kingdom", "with space,comma"} {
		want, _ := a.Recording(repo)
		if got, _ := b.Recording(repo); !slices.Equal(envelopesIn(got), envelopesIn(want)) || !strings.HasSuffix(got, "\r") {
			t.Errorf("%s received %q, the original %q", repo, got, want)
		}
	}

	// Again: nothing new. An export appended twice to one file: nothing new.
	run, _ = replay(t, b, file, "--endpoint", ep)
	if run.Summary != (api.ReplaySummary{Lines: 3, Duplicates: 3}) {
		t.Errorf("second replay: %+v", run.Summary)
	}
	a.Tamq(t, "export", file)
	run, _ = replay(t, b, file, "--endpoint", ep)
	if run.Summary != (api.ReplaySummary{Lines: 6, Duplicates: 6}) {
		t.Errorf("replay of a doubled file: %+v", run.Summary)
	}
	// B's own export, replays included, replayed back into B adds nothing
	// either: a replay of a replay is known by the first original.
	bfile := filepath.Join(t.TempDir(), "b.jsonl")
	b.Tamq(t, "export", bfile)
	run, _ = replay(t, b, bfile, "--endpoint", ep)
	if run.Summary.Accepted != 0 || run.Summary.Duplicates != 3 {
		t.Errorf("replay of replays: %+v", run.Summary)
	}
	if n := len(history(t, b)); n != 3 {
		t.Errorf("%d messages after the repeats, want 3", n)
	}
	// Each run left one receipt with counts and no bodies.
	rs := receipts(t, b, "history.replayed")
	if len(rs) != 4 || rs[0]["accepted"] != float64(3) || rs[1]["duplicates"] != float64(3) {
		t.Errorf("replay receipts %v", rs)
	}
}

func TestReplayReportsBadLinesAndLandsTheRest(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	ep := endpointOf(t, e)
	line := func(id, target, body string) string {
		b, _ := jsonl.Encode(api.Message{ID: id, BatchID: id, Sender: "net-kingdom",
			SenderKind: "worker", Target: target, Body: &body, AckMode: "injected", State: "injected"})
		return string(b)
	}
	good := line("00000000-0000-7000-8000-000000000001", "net-kingdom", "good one")
	prompt := "coordination-engine wakes net-kingdom ...\nAcknowledge before you begin: coordination-engine lease ack L --attempt 1"
	b, _ := jsonl.Encode(api.Message{ID: "00000000-0000-7000-8000-000000000009", BatchID: "00000000-0000-7000-8000-000000000009",
		Sender: "coordination-engine", SenderKind: "coordination", Target: "net-kingdom", Body: &prompt, AckMode: "acknowledged",
		State: "acknowledged", IdempotencyKey: "0197d2a4-8c3e-7b1f-9a52-3e6f0c4d2b18#1"})
	wakeLine := string(b)
	lines := []string{
		good,
		good[:len(good)/2], // cut short
		line("00000000-0000-7000-8000-000000000003", "net-kingdom", strings.Repeat("x", 8193)),
		line("00000000-0000-7000-8000-000000000004", "net-kingdom", "nul\x00byte"),
		line("00000000-0000-7000-8000-000000000005", "net-kingdon", "typo"),
		`{"v":1, "id": "x", nonsense}`,
		line("00000000-0000-7000-8000-000000000007", "net-kingdom", "last good one"),
		`{"v":2,"id":"00000000-0000-7000-8000-000000000008","sender":"a","target":"net-kingdom","body":"from the future"}`,
		wakeLine, // a wake is not history: left out, not rejected
	}
	file := filepath.Join(t.TempDir(), "mixed.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, r := replay(t, e, file, "--endpoint", ep)
	want := map[int]string{2: "bad_request", 3: "body_too_large", 4: "body_invalid", 5: "unknown_target", 6: "bad_request", 8: "incompatible_protocol"}
	if run.Summary != (api.ReplaySummary{Lines: 9, Accepted: 2, Skipped: 1, Rejected: 6}) || len(run.Rejections) != 6 {
		t.Fatalf("summary %+v\n%s", run, r)
	}
	for _, o := range run.Rejections {
		if want[o.Line] != o.Code || o.Reason == "" || strings.Contains(o.Reason, "typo") ||
			(o.Line == 2 && o.Reason != "not a JSON message envelope: the line is cut short") {
			t.Errorf("line %d: %+v", o.Line, o)
		}
	}
	if r.Status != 15 { // the first rejection, line 2, is bad_request
		t.Errorf("exit status %d", r.Status)
	}
	var bodies []string
	for _, m := range history(t, e, "--body") {
		bodies = append(bodies, *m.Body)
	}
	if !slices.Equal(bodies, []string{"last good one", "good one"}) {
		t.Errorf("landed %q", bodies)
	}

	// Human output: every rejected line by number, on stderr.
	other, _ := workspace(t, fastConfig, "net-kingdom")
	r = other.Run(t, "tamq", "replay", file, "--endpoint", endpointOf(t, other))
	for n := range want {
		if !strings.Contains(r.Stderr, fmt.Sprintf("line %d: rejected", n)) {
			t.Errorf("stderr does not report line %d:\n%s", n, r.Stderr)
		}
	}
	if !strings.Contains(r.Stdout, "2 accepted, 0 skipped as duplicates, 1 wakes left out, 6 rejected (9 lines)") {
		t.Errorf("summary line: %s", r)
	}

	// --strict stops at the first: line 1 lands, nothing after line 2.
	strict, _ := workspace(t, fastConfig, "net-kingdom")
	run, r = replay(t, strict, file, "--strict", "--endpoint", endpointOf(t, strict))
	if !run.Stopped || run.Summary != (api.ReplaySummary{Lines: 2, Accepted: 1, Rejected: 1}) || r.Status != 15 {
		t.Errorf("strict: %+v\n%s", run, r)
	}
	if n := len(history(t, strict)); n != 1 {
		t.Errorf("strict landed %d messages", n)
	}

	// A wrong endpoint or a missing file stops before anything.
	if r := e.Run(t, "tamq", "replay", file, "--endpoint", "tmux-amq-1"); r.Status != 12 || !strings.Contains(r.Stderr, `no endpoint "tmux-amq-1"`) {
		t.Errorf("unknown endpoint: %s", r)
	}
	if r := e.Run(t, "tamq", "replay", file); r.Status != 2 || !strings.Contains(r.Stderr, "--endpoint is required") {
		t.Errorf("no endpoint: %s", r)
	}
	if r := e.Run(t, "tamq", "replay", "/nonexistent.jsonl", "--endpoint", ep); r.Status != 2 || !strings.Contains(r.Stderr, "cannot read /nonexistent.jsonl") {
		t.Errorf("missing file: %s", r)
	}
}

// An export of a history in which coordination-engine woke an agent holds
// that wake; replaying it (the README's example) lands the messages, leaves
// the wake out with a note and exits 0: a wake belongs to a lease the engine
// judges, and typed again it would start work that may be done by now.
func TestReplayLeavesWakesOutAndSucceeds(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	ep := endpointOf(t, e)
	body := "the API is merged"
	worker, _ := jsonl.Encode(api.Message{ID: "00000000-0000-7000-8000-000000000001", BatchID: "00000000-0000-7000-8000-000000000001",
		Sender: "operator", SenderKind: "operator", Target: "net-kingdom", Body: &body, AckMode: "injected", State: "injected"})
	prompt := "coordination-engine wakes net-kingdom ...\nAcknowledge before you begin: coordination-engine lease ack L --attempt 1"
	wake, _ := jsonl.Encode(api.Message{ID: "00000000-0000-7000-8000-000000000002", BatchID: "00000000-0000-7000-8000-000000000002",
		Sender: "coordination-engine", SenderKind: "coordination", Target: "net-kingdom", Body: &prompt, AckMode: "acknowledged",
		State: "acknowledged", IdempotencyKey: "0197d2a4-8c3e-7b1f-9a52-3e6f0c4d2b18#1"})
	file := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(file, []byte(string(wake)+"\n"+string(worker)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := e.Run(t, "tamq", "replay", file, "--endpoint", ep)
	if r.Status != 0 || !strings.Contains(r.Stderr, "line 1: skipped: a wake from coordination-engine is not replayed") ||
		!strings.Contains(r.Stdout, "1 accepted, 0 skipped as duplicates, 1 wakes left out, 0 rejected (2 lines)") {
		t.Fatalf("replay of an export holding a wake: %s", r)
	}
	got := history(t, e, "--body")
	if len(got) != 1 || *got[0].Body != body {
		t.Errorf("landed %+v", got)
	}

	// --strict does not stop at a wake, and --json counts it apart.
	other, _ := workspace(t, fastConfig, "net-kingdom")
	run, r := replay(t, other, file, "--strict", "--endpoint", endpointOf(t, other))
	if r.Status != 0 || run.Stopped || run.Summary != (api.ReplaySummary{Lines: 2, Accepted: 1, Skipped: 1}) || len(run.Rejections) != 0 {
		t.Errorf("strict: %+v\n%s", run, r)
	}
}

func TestHistoryFiltersAndPages(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom", "railiance")
	var ids []string
	for i := range 7 {
		repo := []string{"net-kingdom", "railiance"}[i%2]
		m := send(t, e, fmt.Sprintf("To:%s: message %d", repo, i))
		waitState(t, e, m.ID, "injected")
		ids = append(ids, m.ID)
	}
	all := history(t, e)
	if len(all) != 7 || all[0].ID != ids[6] || all[6].ID != ids[0] {
		t.Fatalf("history is not newest first: %v", all)
	}
	idsOf := func(ms []api.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	// Pages of 3 walk the whole history, each continuing after the last.
	var walked []string
	after := ""
	for {
		args := []string{"--limit", "3"}
		if after != "" {
			args = append(args, "--after", after)
		}
		r := e.Tamq(t, append([]string{"history", "--json"}, args...)...)
		var page []api.Message
		json.Unmarshal([]byte(r.Stdout), &page)
		if len(page) == 0 {
			break
		}
		walked = append(walked, idsOf(page)...)
		after = page[len(page)-1].ID
	}
	if !slices.Equal(walked, idsOf(all)) {
		t.Errorf("pages %v, want %v", walked, idsOf(all))
	}
	nk := history(t, e, "--repo", "net-kingdom")
	if len(nk) != 4 {
		t.Errorf("--repo net-kingdom: %d", len(nk))
	}
	since := all[2].CreatedAt.Format(time.RFC3339Nano)
	recent := history(t, e, "--since", since)
	for _, m := range recent {
		if m.CreatedAt.Before(all[2].CreatedAt) {
			t.Errorf("--since %s listed %v", since, m.CreatedAt)
		}
	}
	if len(recent) < 3 {
		t.Errorf("--since %s: %d messages", since, len(recent))
	}
	if got := history(t, e, "--until", all[6].CreatedAt.Format(time.RFC3339Nano)); len(got) != 0 && got[0].CreatedAt.Compare(all[6].CreatedAt) >= 0 {
		t.Errorf("--until lists %v", got)
	}
	if got := history(t, e, "--id", ids[3]); len(got) != 1 || got[0].ID != ids[3] {
		t.Errorf("--id: %v", got)
	}
	if got := history(t, e, "--batch", all[1].BatchID); len(got) != 1 || got[0].ID != all[1].ID {
		t.Errorf("--batch: %v", got)
	}
	if got := history(t, e, "--state", "queued"); len(got) != 0 {
		t.Errorf("--state queued: %v", got)
	}
	if got := history(t, e, "--since", "1h", "--repo", "railiance", "--limit", "2"); len(got) != 2 || got[0].ID != ids[5] {
		t.Errorf("--since 1h --repo railiance --limit 2: %v", got)
	}
	// Bodies only when asked for.
	if r := e.Tamq(t, "history"); strings.Contains(r.Stdout, "message 3") || !strings.Contains(r.Stdout, ids[3]) {
		t.Errorf("history without --body:\n%s", r.Stdout)
	}
	if r := e.Tamq(t, "history", "--body", "--id", ids[3]); !strings.Contains(r.Stdout, "message 3") {
		t.Errorf("history --body:\n%s", r.Stdout)
	}
	// History reads the database: it works with the service stopped.
	e.Tamq(t, "stop")
	if n := len(history(t, e)); n != 7 {
		t.Errorf("history with the service stopped: %d", n)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--state", "lost"}, {"--limit", "0"}, {"--since", "1h", "--until", "2h"}} {
		if r := e.Run(t, "tamq", append([]string{"history"}, bad...)...); r.Status != 2 || r.Stdout != "" {
			t.Errorf("history %v: %s", bad, r)
		}
	}
	if r := e.Run(t, "tamq", "history", "--after", "00000000-0000-7000-8000-000000000000"); r.Status != 12 {
		t.Errorf("--after an unknown id: %s", r)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 3600\n"
	e, _ := workspace(t, cfg, "net-kingdom")
	var done []string
	for i := range 4 {
		m := send(t, e, fmt.Sprintf("To:net-kingdom: done %d", i))
		waitState(t, e, m.ID, "injected")
		done = append(done, m.ID)
	}
	// Pending: awaiting its ack for an hour.
	pending := send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: keep me")
	waitState(t, e, pending.ID, "awaiting_ack")
	count := func() int { return len(history(t, e)) }

	// The defaults (365 days, 100 MB) leave a young small history alone.
	r := e.Tamq(t, "purge", "--yes")
	if !strings.Contains(r.Stdout, "nothing to purge") || count() != 5 {
		t.Errorf("purge with defaults: %s", r)
	}
	var defaults struct {
		Before   time.Time `json:"before"`
		MaxBytes int64     `json:"max_bytes"`
	}
	r = e.Tamq(t, "purge", "--dry-run", "--json")
	if json.Unmarshal([]byte(r.Stdout), &defaults) != nil || defaults.MaxBytes != 100_000_000 ||
		time.Since(defaults.Before) < 365*24*time.Hour || time.Since(defaults.Before) > 366*24*time.Hour {
		t.Errorf("default rule: %+v\n%s", defaults, r)
	}
	// A filter of the rule's own kind replaces both defaults.
	r = e.Tamq(t, "purge", "--dry-run", "--json", "--max-size", "1GB")
	defaults.Before, defaults.MaxBytes = time.Time{}, 0
	if json.Unmarshal([]byte(r.Stdout), &defaults) != nil || defaults.MaxBytes != 1_000_000_000 || !defaults.Before.IsZero() {
		t.Errorf("--max-size alone: %s", r)
	}
	// Without a terminal and without --yes: a dry run.
	r = e.Tamq(t, "purge", "--before", "0s")
	if !strings.Contains(r.Stdout, "would purge 4 messages") || !strings.Contains(r.Stderr, "pass --yes") || count() != 5 {
		t.Errorf("purge without --yes: %s", r)
	}
	r = e.Tamq(t, "purge", "--before", "0s", "--dry-run", "--json")
	var rec map[string]any
	if json.Unmarshal([]byte(r.Stdout), &rec) != nil || rec["matching"] != float64(4) || rec["dry_run"] != true || count() != 5 {
		t.Errorf("purge --dry-run --json: %s", r)
	}
	// --max-size 1B wants everything gone, but the pending message stays.
	r = e.Tamq(t, "purge", "--max-size", "1B", "--state", "injected", "--yes", "--json")
	if json.Unmarshal([]byte(r.Stdout), &rec) != nil || rec["deleted"] != float64(4) || rec["dry_run"] != false {
		t.Errorf("purge --yes: %s", r)
	}
	left := history(t, e)
	if len(left) != 1 || left[0].ID != pending.ID {
		t.Errorf("left after purge: %v", left)
	}
	rs := receipts(t, e, "history.purged")
	if len(rs) != 1 || rs[0]["deleted"] != float64(4) || rs[0]["state"] != "injected" || rs[0]["max_bytes"] != float64(1) {
		t.Errorf("purge receipts %v", rs)
	}
	for _, bad := range [][]string{{"--state", "queued"}, {"--before", "soon"}, {"--max-size", "lots"}, {"--yes", "--dry-run"}} {
		if r := e.Run(t, "tamq", append([]string{"purge"}, bad...)...); r.Status != 2 {
			t.Errorf("purge %v: %s", bad, r)
		}
	}
	_ = done
}

// TestPurgeAsksOnATerminal runs purge with its standard input on a real PTY.
func TestPurgeAsksOnATerminal(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	m := send(t, e, "To:net-kingdom: old news")
	waitState(t, e, m.ID, "injected")
	for _, answer := range []string{"n", "y"} {
		cmd := e.Command(context.Background(), "tamq", "purge", "--before", "0s")
		out := testutil.OnTerminal(t, cmd, "[y/N] ", answer+"\n")
		if !strings.Contains(out, "Delete these 1 messages?") {
			t.Errorf("no question asked:\n%s", out)
		}
		want := 1
		if answer == "y" {
			want = 0
		}
		if n := len(history(t, e)); n != want {
			t.Errorf("answer %s: %d messages left", answer, n)
		}
	}
}

// envelopesIn splits what a recorder received into envelopes: a paste ends
// with its Enter, and the envelopes of a batch are a blank line apart.
func envelopesIn(rec string) []string {
	var out []string
	for _, e := range strings.Split(strings.ReplaceAll(rec, "\r", "\n\n"), "\n\n") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}
