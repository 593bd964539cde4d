package cli_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Texts an agent or a gate gave that must reach a terminal inert: a
// bidirectional override that would turn the line around, and a summary
// whose newline would forge a timeline entry of its own.
const (
	hostileReason  = "a person \u202edecides"
	hostileSummary = "looked around\n    2026-12-05T10:00:00Z  released        completed (forged)"
)

// seedStory writes what a task held at a human gate and then woken by the
// operator through it leaves in the engine's database: the held trigger,
// the operator's trigger that supersedes it, the override, the lease, its
// wake, the broker's ack and renewal, the agent's checkpoint and release.
func seedStory(t *testing.T, p paths.Paths) {
	t.Helper()
	ctx := context.Background()
	st := seedStore(t, p)
	defer st.DB.Close()
	timing := lease.Timing{AckTimeout: time.Minute, RenewInterval: time.Minute, MissedRenewals: 3, Backoff: []time.Duration{time.Second}, MaxRetries: 2}
	task := lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", TargetRepo: "alpha", TaskID: "T-1", Reason: lease.TaskActionable}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	held := task
	held.SourceRevision = "1"
	held, _, err := st.Triggers.AddTrigger(ctx, held)
	check(err)
	// Checked again in an hour: a running engine leaves it be.
	check(st.Triggers.HoldTrigger(ctx, held.ID, "human", hostileReason, time.Now().Add(time.Hour)))
	manual := task
	manual.SourceRevision = api.OperatorRevision + "20261205T100000.000Z"
	manual, _, err = st.Triggers.AddTrigger(ctx, manual)
	check(err)
	check(st.Receipts.AddReceipt(ctx, receipt.Receipt{Kind: store.KindGateOverridden, TriggerID: manual.ID, Status: "human",
		Reason: "the operator woke task T-1 through gate human", Detail: map[string]any{"by": "operator", "task_id": "T-1"}}))
	l, err := st.Leases.Offer(ctx, manual.ID, "", "", timing)
	check(err)
	_, err = st.Leases.RecordWake(ctx, l.ID, 1, store.WakeRecord{Capability: "resumed", MessageID: "M-1"})
	check(err)
	_, err = st.Leases.Ack(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, timing)
	check(err)
	_, err = st.Leases.Renew(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, timing)
	check(err)
	_, err = st.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: l.ID, Summary: hostileSummary, FilesChanged: []string{"a.go"}}, 1,
		store.Who{By: lease.ByAgent, Repo: "alpha"}, timing)
	check(err)
	_, err = st.Leases.Release(ctx, l.ID, string(lease.ResultCompleted), "", 1, store.Who{By: lease.ByAgent, Repo: "alpha"}, timing)
	check(err)
}

// timelineLine is one printed entry: time, kind, text.
var timelineLine = regexp.MustCompile(`^    (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)  (\S+) +(.*)$`)

// explain prints the task's timeline after its verdict and facts, oldest
// first, from the database while the engine is stopped and the same while
// it runs; the operator's wake and what it caused are marked; hostile
// reasons and summaries stay inert and on their line.
func TestExplainTellsTheTimeline(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	// No State Hub: a closed port, never another test's hub.
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	seedStory(t, enginePaths(t, e))
	wantKinds := []string{"judged", "gated", "superseded", "manual_wake", "gate_overridden", "leased", "woken", "acked", "renewed", "checkpoint", "released"}

	r := run(t, e, nil, "explain", "T-1")
	if r.Status != 0 || !strings.HasPrefix(r.Stdout, "task T-1: coordination-engine is not running;") {
		t.Fatalf("explain while stopped: %s", r)
	}
	facts, story, found := strings.Cut(r.Stdout, "\n  timeline:\n")
	if !found || !strings.Contains(facts, "  trigger ") {
		t.Fatalf("explain has no timeline after its facts:\n%s", r.Stdout)
	}
	// The wake's outcome is said once: its receipt's reason is those words.
	if want := "      wake attempt 1: sent, prompt queued for the agent already running in its window, tamq message M-1, 20"; !strings.Contains(facts, want) {
		t.Errorf("the lease's wake does not read %q:\n%s", want, facts)
	}
	var kinds []string
	var last string
	for _, line := range strings.Split(strings.TrimSuffix(story, "\n"), "\n") {
		m := timelineLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("timeline line %q is not time, kind, text:\n%s", line, r.Stdout)
		}
		if m[1] < last {
			t.Errorf("timeline out of order at %q:\n%s", line, story)
		}
		last = m[1]
		kinds = append(kinds, m[2])
		manual := slices.Index(kinds, "manual_wake")
		if marked := strings.HasSuffix(line, " [manual wake]"); manual >= 0 && len(kinds)-1 > manual && !marked {
			t.Errorf("an entry the operator's wake caused is not marked: %q", line)
		} else if (manual < 0 || len(kinds)-1 == manual) && marked {
			t.Errorf("an entry is marked manual wrongly: %q", line)
		}
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("timeline kinds %v, want %v:\n%s", kinds, wantKinds, story)
	}
	for _, want := range []string{
		`held at gate human: a person \u202edecides; checked again at `,
		"manual wake by the operator (coordination-engine wake): trigger ",
		"  gate_overridden  the operator woke task T-1 through gate human [manual wake]",
		"wake of attempt 1 sent: tamq message M-1 (prompt queued for the agent already running in its window) [manual wake]",
		"acknowledged by the broker, attempt 1",
		`checkpoint recorded by the agent in alpha: 1 file changed; summary: looked around\x0a    2026-12-05T10:00:00Z  released        completed (forged) [manual wake]`,
		"released completed by the agent in alpha [manual wake]",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("timeline lacks %q:\n%s", want, story)
		}
	}
	if strings.ContainsRune(r.Stdout, '\u202e') {
		t.Errorf("a bidirectional override reached the terminal:\n%s", r.Stdout)
	}

	var stopped api.ExplainResult
	if r := run(t, e, &stopped, "explain", "T-1", "--json"); r.Status != 0 {
		t.Fatalf("explain --json while stopped: %s", r)
	}
	var jsonKinds []string
	for _, en := range stopped.Timeline {
		jsonKinds = append(jsonKinds, en.Kind)
		if en.Manual != (en.TriggerID != stopped.Triggers[0].ID) {
			t.Errorf("manual %v for an entry of trigger %s: %+v", en.Manual, en.TriggerID, en)
		}
	}
	if !slices.Equal(jsonKinds, wantKinds) || !stopped.Offline || len(stopped.Triggers) != 2 {
		t.Errorf("explain --json while stopped: kinds %v, want %v; %+v", jsonKinds, wantKinds, stopped)
	}
	if e := stopped.Timeline[1]; e.Reason != "human: "+hostileReason || e.Gate != "human" || e.Until == nil {
		t.Errorf("the gate in JSON: %+v", e)
	}
	if e := stopped.Timeline[9]; e.Summary != hostileSummary || e.FilesChanged != 1 || e.By != "agent" {
		t.Errorf("the checkpoint in JSON: %+v", e)
	}

	// The running engine tells the same story from the same database (no
	// State Hub answers it, so it adds no observation).
	e.Engine(t, "start", "--detach")
	var live api.ExplainResult
	if r := run(t, e, &live, "explain", "T-1", "--json"); r.Status != 0 || live.Offline {
		t.Fatalf("explain --json while running: %s", r)
	}
	if a, b := jsonOf(t, stopped.Timeline), jsonOf(t, live.Timeline); a != b {
		t.Errorf("the timeline read while stopped\n%s\ndiffers from the running engine's\n%s", a, b)
	}
}
