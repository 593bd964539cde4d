package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// storyStart is when the stories below begin (to the millisecond, as the
// store keeps times).
var storyStart = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

var storyTiming = lease.Timing{AckTimeout: 30 * time.Second, RenewInterval: 10 * time.Second, MissedRenewals: 3,
	Backoff: []time.Duration{15 * time.Second}, MaxRetries: 2}

// storyStore is an engine database on a clock the test moves.
func storyStore(t *testing.T) (*store.Store, *clock.Fake) {
	t.Helper()
	dir := t.TempDir()
	c := clock.NewFake(storyStart)
	st, err := store.Open(context.Background(), paths.Paths{Database: filepath.Join(dir, "engine.sqlite3"), BackupDir: filepath.Join(dir, "backups")}, time.Second, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.DB.Close() })
	st.PolicyProfile, st.ConfigVersion = "default@1", "cfg"
	return st, c
}

func noErr[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// at is a time of the story: so long after its start.
func at(d time.Duration) time.Time { return storyStart.Add(d) }

// entries is a timeline as "offset kind" lines, to compare at a glance.
func entries(tl []api.TimelineEntry) []string {
	var out []string
	for _, e := range tl {
		out = append(out, "+"+e.At.Sub(storyStart).String()+" "+e.Kind)
	}
	return out
}

func entryOf(t *testing.T, tl []api.TimelineEntry, kind string) api.TimelineEntry {
	t.Helper()
	for _, e := range tl {
		if e.Kind == kind {
			return e
		}
	}
	t.Fatalf("no %s entry in %+v", kind, tl)
	return api.TimelineEntry{}
}

// A task's whole story, as the engine's database holds it and its last
// observation shows it: judged, leased, woken, acknowledged by the broker,
// renewed, checkpointed, released completed, then seen done in State Hub;
// oldest first, each entry with its time and its facts.
func TestExplainTimelineOfAWokenTask(t *testing.T) {
	t.Parallel()
	st, c := storyStore(t)
	ctx := context.Background()
	tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", SourceRevision: "3",
		TargetRepo: "alpha", TaskID: "T-1", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	l := noErr[lease.Lease](t)(st.Leases.Offer(ctx, tr.ID, "", "", storyTiming))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Capability: "resumed", MessageID: "M-1"}))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.Ack(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, storyTiming))
	c.Advance(10 * time.Second) // +13s
	noErr[lease.Lease](t)(st.Leases.Renew(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, storyTiming))
	c.Advance(10 * time.Second) // +23s: a renewal that leaves no receipt
	noErr[lease.Lease](t)(st.Leases.Renew(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, storyTiming))
	c.Advance(7 * time.Second) // +30s
	summary := "parsed the config\n    2026-12-05T10:00:40Z  released        completed (forged)"
	noErr[lease.Lease](t)(st.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: l.ID, Summary: summary, FilesChanged: []string{"a.go", "b.go"}},
		1, store.Who{By: lease.ByAgent, Repo: "alpha"}, storyTiming))
	c.Advance(3 * time.Second) // +33s
	noErr[lease.Lease](t)(st.Leases.Renew(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, storyTiming))

	// While the lease lives, its latest renewal is told with when it holds until.
	live := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-1", nil))
	want := []string{"+0s judged", "+1s leased", "+2s woken", "+3s acked", "+13s renewed", "+30s checkpoint", "+33s renewed"}
	if got := entries(live.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline of the live lease\n%v\nwant\n%v", got, want)
	}
	if last := live.Timeline[len(live.Timeline)-1]; last.Until == nil || !last.Until.Equal(at(33*time.Second+30*time.Second)) ||
		!strings.Contains(last.Text, "the latest renewal: it holds until 2026-12-05T10:01:03Z") {
		t.Errorf("the latest renewal: %+v", last)
	}

	c.Advance(7 * time.Second) // +40s
	noErr[lease.Lease](t)(st.Leases.Release(ctx, l.ID, string(lease.ResultCompleted), "", 1, store.Who{By: lease.ByAgent, Repo: "alpha"}, storyTiming))
	view := &ExplainView{Observed: true, At: at(50 * time.Second), Observation: observe.Observation{Tasks: map[string]observe.TaskView{
		"T-1": {Status: "done", Revision: "4", Repo: "alpha", Workplan: "W", WorkplanStatus: "active", Waiting: "it is done"},
	}}}
	res := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-1", view))
	want = []string{"+0s judged", "+1s leased", "+2s woken", "+3s acked", "+13s renewed", "+30s checkpoint", "+40s released", "+50s observed"}
	if got := entries(res.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline\n%v\nwant\n%v", got, want)
	}
	texts := map[string]string{
		api.TimelineJudged:     "judged task_actionable (task revision 3): trigger " + tr.ID + " for alpha",
		api.TimelineLeased:     "lease " + l.ID + " offered for alpha, attempt 1 of 3",
		api.TimelineWoken:      "wake of attempt 1 sent: tamq message M-1 (prompt queued for the agent already running in its window)",
		api.TimelineAcked:      "lease " + l.ID + " acknowledged by the broker, attempt 1",
		api.TimelineRenewed:    "lease " + l.ID + " renewed by the broker: the first renewal (later ones leave no receipt)",
		api.TimelineCheckpoint: "checkpoint recorded by the agent in alpha: 2 files changed; summary: " + summary,
		api.TimelineReleased:   "released completed by the agent in alpha",
		api.TimelineObserved:   "last observed in State Hub: done, revision 4; not actionable: it is done",
	}
	for kind, text := range texts {
		if e := entryOf(t, res.Timeline, kind); e.Text != text || e.Manual {
			t.Errorf("%s: %q (manual %v), want %q", kind, e.Text, e.Manual, text)
		}
	}
	if e := entryOf(t, res.Timeline, api.TimelineAcked); e.By != lease.ByBroker || e.LeaseID != l.ID || e.MaxAttempts != 3 {
		t.Errorf("acked: %+v", e)
	}
	if e := entryOf(t, res.Timeline, api.TimelineCheckpoint); e.Summary != summary || e.FilesChanged != 2 || e.By != lease.ByAgent || e.ByRepo != "alpha" {
		t.Errorf("checkpoint: %+v", e)
	}
	if e := entryOf(t, res.Timeline, api.TimelineReleased); e.Result != "completed" {
		t.Errorf("released: %+v", e)
	}
	// --json has it as an additive "timeline", times in RFC 3339.
	b := noErr[[]byte](t)(json.Marshal(res))
	var raw struct {
		Verdict  string           `json:"verdict"`
		Triggers []any            `json:"triggers"`
		Timeline []map[string]any `json:"timeline"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Verdict == "" || len(raw.Triggers) != 1 || len(raw.Timeline) != len(want) {
		t.Fatalf("explain --json: %s", b)
	}
	if e := raw.Timeline[2]; e["at"] != "2026-12-05T10:00:02Z" || e["kind"] != "woken" || e["message_id"] != "M-1" || e["status"] != "resumed" || e["attempt"] != 1.0 {
		t.Errorf("the wake in JSON: %v", e)
	}
}

// The operator's wake is told as such, and everything it caused is marked
// manual; a failed release waits for its retry, with its reason as the
// agent gave it (escaping is the printer's: text stays what was stored).
func TestExplainTimelineOfAManualWakeAndARetry(t *testing.T) {
	t.Parallel()
	st, c := storyStore(t)
	ctx := context.Background()
	tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-2", TaskID: "T-2", TargetRepo: "beta",
		SourceRevision: api.OperatorRevision + "20261205T100000.000Z", Reason: lease.TaskActionable})
	if err != nil {
		t.Fatal(err)
	}
	l := noErr[lease.Lease](t)(st.Leases.Offer(ctx, tr.ID, "", "", storyTiming))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Err: "tamq is not running"}))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Capability: "started", MessageID: "M-2"}))
	c.Advance(time.Second)
	noErr[lease.Lease](t)(st.Leases.Ack(ctx, l.ID, 1, store.Who{By: lease.ByAgent, Repo: "beta"}, storyTiming))
	c.Advance(time.Second)
	hostile := "tests \u202eder\u200b fail"
	noErr[lease.Lease](t)(st.Leases.Release(ctx, l.ID, string(lease.ResultFailed), hostile, 1, store.Who{By: lease.ByAgent, Repo: "beta"}, storyTiming))

	res := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-2", nil))
	want := []string{"+0s manual_wake", "+0s leased", "+1s wake_failed", "+2s woken", "+3s acked", "+4s released"}
	if got := entries(res.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline\n%v\nwant\n%v", got, want)
	}
	for _, e := range res.Timeline {
		if !e.Manual {
			t.Errorf("an entry of a manual wake is not marked manual: %+v", e)
		}
	}
	if e := res.Timeline[0]; e.By != lease.ByOperator || e.Text != "manual wake by the operator (coordination-engine wake): trigger "+tr.ID+" for beta" {
		t.Errorf("manual wake: %+v", e)
	}
	if e := res.Timeline[2]; e.Text != "wake of attempt 1 failed: tamq is not running" {
		t.Errorf("wake failed: %+v", e)
	}
	e := res.Timeline[5]
	if e.Result != "failed" || e.Until == nil || !e.Until.Equal(at(19*time.Second)) || e.Attempt != 2 ||
		e.Text != "released (failed: "+hostile+") by the agent in beta; retry_wait until 2026-12-05T10:00:19Z, then attempt 2 of 3" {
		t.Errorf("failed release: %+v", e)
	}
	if res.Verdict == "" || !strings.HasPrefix(res.Verdict, "coordination-engine is not running") {
		t.Errorf("verdict %q", res.Verdict)
	}
}

// A task held at a gate tells the gate, its reason and when it is checked
// again; a newer revision supersedes the held one (in the same step as it
// is judged); a trigger stopped at a gate says no lease was taken.
func TestExplainTimelineOfAGatedTask(t *testing.T) {
	t.Parallel()
	st, c := storyStore(t)
	ctx := context.Background()
	add := func(revision string) lease.Trigger {
		tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-3", SourceRevision: revision,
			TargetRepo: "gamma", TaskID: "T-3", Reason: lease.TaskActionable})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	held := add("1")
	if err := st.Triggers.HoldTrigger(ctx, held.ID, "human", "a person decides", at(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	stopped := add("2")
	if err := st.Triggers.StopTrigger(ctx, stopped.ID, "destructive", "drops a table"); err != nil {
		t.Fatal(err)
	}
	view := &ExplainView{Observed: true, At: at(2 * time.Minute), Observation: observe.Observation{Tasks: map[string]observe.TaskView{
		"T-3": {Status: "todo", Revision: "2", Repo: "gamma", Actionable: true, Gate: "destructive", GateReason: "drops a table"},
	}}}
	res := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-3", view))
	want := []string{"+0s judged", "+0s gated", "+1m0s superseded", "+1m0s judged", "+1m0s stopped", "+2m0s observed"}
	if got := entries(res.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline\n%v\nwant\n%v", got, want)
	}
	if e := res.Timeline[1]; e.Gate != "human" || e.Until == nil || e.Text != "held at gate human: a person decides; checked again at 2026-12-05T10:05:00Z" {
		t.Errorf("gated: %+v", e)
	}
	if e := res.Timeline[2]; e.TriggerID != held.ID || e.Text != "trigger "+held.ID+" superseded: revision 2 observed" {
		t.Errorf("superseded: %+v", e)
	}
	if e := res.Timeline[4]; e.Gate != "destructive" || e.Text != "stopped at gate destructive: drops a table; no lease, no wake" {
		t.Errorf("stopped: %+v", e)
	}
	if e := res.Timeline[5]; e.Text != "last observed in State Hub: todo, revision 2; gate destructive (drops a table)" {
		t.Errorf("observed: %+v", e)
	}
	// A trigger whose receipt was purged is still told, from the trigger.
	if _, err := st.DB.Writer.Exec(`DELETE FROM receipts WHERE trigger_id = ? AND kind = ?`, held.ID, store.KindTriggerObserved); err != nil {
		t.Fatal(err)
	}
	res = noErr[api.ExplainResult](t)(Explain(ctx, st, "T-3", view))
	if got := entries(res.Timeline); !slices.Equal(got, want) || res.Timeline[0].Text != "judged task_actionable (task revision 1): trigger "+held.ID+" for gamma" {
		t.Errorf("timeline without the first trigger's receipt\n%v\nwant\n%v\n%+v", got, want, res.Timeline[0])
	}
	// A task neither State Hub's last look nor the engine's records know is
	// not_found, online and offline (a mistyped id must not exit 0); before
	// the first look the engine cannot tell, and answers with nothing.
	if _, err := Explain(ctx, st, "T-9", view); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "task T-9: State Hub has no such task (last observed ") {
		t.Errorf("explain of a task nobody knows, online: %v; want not_found", err)
	}
	if _, err := Explain(ctx, st, "T-9", nil); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "task T-9: coordination-engine's database has no record of it") {
		t.Errorf("explain of a task nobody knows, offline: %v; want not_found", err)
	}
	early := noErr[api.ExplainResult](t)(Explain(ctx, st, "T-9", &ExplainView{}))
	if early.Verdict != "not woken: State Hub has not been observed yet" || early.Timeline == nil || len(early.Timeline) != 0 {
		t.Errorf("explain before the first look: %q %#v", early.Verdict, early.Timeline)
	}
}

// The running engine's story of a task it judged from State Hub: its last
// look, and the observer's trigger stopped at the task's gate; a task
// waiting on it has only that look, saying why it is not actionable.
func TestExplainTimelineFromTheObserver(t *testing.T) {
	t.Parallel()
	body := `{"workplans": [{"id": "W", "repo": "net", "status": "active", "revision": "1", "tasks": [
		{"id": "Q", "title": "q", "status": "todo", "revision": "7", "repo": "net", "needs_human": true},
		{"id": "R", "title": "r", "status": "todo", "revision": "2", "repo": "net", "depends_on": ["Q"]}]}]}`
	ts, _ := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/workplans":
			io.WriteString(w, body)
		case "/v1/messages":
			io.WriteString(w, `{"messages": []}`)
		default:
			io.WriteString(w, `{"checkpoints": [], "cursor": "0"}`)
		}
	}))
	s := inProcessEngine(t, ts.URL)
	ctx := context.Background()
	if err := s.observer.observeOnce(ctx); err != nil {
		t.Fatal(err)
	}
	view := s.observer.explainView()
	q := noErr[api.ExplainResult](t)(Explain(ctx, s.store, "Q", view))
	var got []string
	for _, e := range q.Timeline {
		got = append(got, e.Kind+": "+e.Text)
	}
	trigger := q.Triggers[0].ID
	// The look starts before what it judged is recorded.
	want := []string{
		"observed: last observed in State Hub: todo, revision 7; gate human (the task needs a human)",
		"judged: judged task_actionable (task revision 7): trigger " + trigger + " for net",
		"stopped: stopped at gate human: the task needs a human; no lease, no wake",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Q's timeline\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if first := q.Timeline[0]; !first.At.Equal(view.At) || first.Status != "todo" || first.Revision != "7" || first.Gate != "human" {
		t.Errorf("the observation %+v, the look at %s", first, view.At)
	}
	r := noErr[api.ExplainResult](t)(Explain(ctx, s.store, "R", view))
	if len(r.Timeline) != 1 || r.Timeline[0].Kind != api.TimelineObserved || !strings.Contains(r.Timeline[0].Text, "; not actionable: ") {
		t.Errorf("R's timeline: %+v", r.Timeline)
	}
}

// Asked right after the engine started, while its first look at State Hub
// is under way, explain and tasks wait for that look and tell what it
// found (a gate, a dependency) instead of "State Hub has not been observed
// yet" or a task seen but not yet judged (docs/statehub-contract.md runs
// explain right after `coordination-engine start --detach`).
func TestExplainRightAfterStartWaitsForTheFirstLook(t *testing.T) {
	t.Parallel()
	body := `{"workplans": [{"id": "W", "repo": "net", "status": "active", "revision": "1", "tasks": [
		{"id": "Q", "title": "q", "status": "todo", "revision": "7", "repo": "net", "needs_human": true},
		{"id": "R", "title": "r", "status": "todo", "revision": "2", "repo": "net", "depends_on": ["Q"]}]}]}`
	release := make(chan struct{}) // the first look is held until the questions are asked
	ts, _ := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/workplans":
			<-release
			io.WriteString(w, body)
		case "/v1/messages":
			io.WriteString(w, `{"messages": []}`)
		case "/v1/events":
			http.NotFound(w, r)
		default:
			io.WriteString(w, `{"checkpoints": [], "cursor": "0"}`)
		}
	}))
	s := inProcessEngine(t, ts.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.observer.Run(ctx)
	sh := s.status
	ask := func(op string, args any, handler func(context.Context, unixrpc.Peer, *unixrpc.Request) (any, error)) chan any {
		raw, _ := json.Marshal(args)
		out := make(chan any, 1)
		go func() {
			res, err := handler(ctx, unixrpc.Peer{}, &unixrpc.Request{Op: op, Args: raw})
			if err != nil {
				t.Error(err)
			}
			out <- res
		}()
		return out
	}
	q := ask(api.OpExplain, api.ExplainArgs{Task: "Q"}, sh.explain)
	r := ask(api.OpExplain, api.ExplainArgs{Task: "R"}, sh.explain)
	list := ask(api.OpTasks, api.TasksArgs{}, sh.tasks)
	close(release)
	if got := (<-q).(api.ExplainResult).Verdict; got != "not woken: stopped at gate human (human: the task needs a human)" {
		t.Errorf("explain Q right after the start: %q", got)
	}
	if got := (<-r).(api.ExplainResult).Verdict; got != "not woken: dependency Q is todo" {
		t.Errorf("explain R right after the start: %q", got)
	}
	if got := (<-list).(api.TasksResult); got.ObservedAt == nil || len(got.Tasks) != 2 {
		t.Errorf("tasks right after the start: %+v", got)
	}
}
