package cli_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// hostile is text from State Hub or an agent that would act in a terminal
// printed as it is: clear the screen, set the clipboard, a forged line.
const hostile = "\x1b[2J\x1b]52;c;cHduZWQ=\x07evil\nT-1  alpha  forged"

// seedMore adds to seedLease's database: task T-2's lease in beta, which
// the broker acknowledged, with two checkpoints, the newest hostile; and a
// lease offered for a task whose id is hostile. It returns T-2's lease id.
func seedMore(t *testing.T, p paths.Paths) string {
	t.Helper()
	ctx := context.Background()
	st := seedStore(t, p)
	defer st.DB.Close()
	timing := lease.Timing{AckTimeout: time.Hour, RenewInterval: time.Hour, MissedRenewals: 3, Backoff: []time.Duration{time.Second}, MaxRetries: 4}
	offer := func(task, repo string) lease.Lease {
		tr, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: task, SourceRevision: "1",
			TargetRepo: repo, TaskID: task, Reason: lease.TaskActionable})
		if err != nil {
			t.Fatal(err)
		}
		l, err := st.Leases.Offer(ctx, tr.ID, "", "", timing)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := offer("T-2", "beta")
	if _, err := st.Leases.Ack(ctx, l.ID, 1, store.Who{By: lease.ByBroker}, timing); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Leases.Checkpoint(ctx, lease.Checkpoint{LeaseID: l.ID, Summary: "parser done", FilesChanged: []string{"parse.go"},
		NextAction: "wire it into the CLI"}, 1, store.Who{By: lease.ByAgent}, timing); err != nil {
		t.Fatal(err)
	}
	// What an agent may write is checked where it comes in; the lists
	// escape whatever the database holds all the same.
	if _, err := st.DB.Writer.Exec(`INSERT INTO checkpoints (lease_id, task_id, summary, files_changed, next_action, blocked_reason, recorded_at, attempt)
		VALUES (?, 'T-2', ?, '["x\u001b[31m.go"]', ?, 'human', ?, 1)`, l.ID, hostile, hostile, time.Now().UnixMilli()+1); err != nil {
		t.Fatal(err)
	}
	h := offer("T-3", "gamma")
	if _, err := st.DB.Writer.Exec(`UPDATE triggers SET task_id = ? WHERE id = ?`, hostile, h.TriggerID); err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// inert fails t when r's output could act in a terminal.
func inert(t *testing.T, what string, r testutil.Result) {
	t.Helper()
	if !textsafe.Inert(r.Stdout) || !textsafe.Inert(r.Stderr) || strings.Contains(r.Stdout, "\nT-1  alpha  forged") {
		t.Errorf("%s is not inert: %q", what, r.Stdout+r.Stderr)
	}
}

// leases, receipts and checkpoints are lists a person reads: a header (a
// head line for checkpoints), the task and repo of each row, who
// acknowledged a lease, times relative to now; --json has RFC 3339 and the
// same facts; the filters take what their help says; hostile text stays
// inert. Stopped and running, they answer the same.
func TestListsAPersonReads(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	p := enginePaths(t, e)
	id := seedLease(t, p)
	beta := seedMore(t, p)

	r := run(t, e, nil, "leases")
	inert(t, "leases", r)
	for _, want := range []string{
		`^LEASE +TASK +REPO +STATE +ATTEMPT +ACKED BY +EXPIRES +WAKE\n`,
		`(?m)^` + id + ` +T-1 +alpha +completed +1/3 +agent (just now|\d+s ago) +ended (just now|\d+s ago) +-$`,
		`(?m)^` + beta + ` +T-2 +beta +checkpointed +1/5 +broker (just now|\d+s ago) +in (2h59m|3h00m) +-$`,
		`(?m)^\S+ +\\x1b\[2J\\x1b\]52;c;cHduZWQ=\\x07evil\\x0aT-1  alpha  forged +gamma +offered +1/5 +- +in (59m\d\ds|1h00m) +-$`,
	} {
		if !regexp.MustCompile(want).MatchString(r.Stdout) {
			t.Errorf("leases: no line like %s in\n%s", want, r.Stdout)
		}
	}
	var leases api.LeasesResult
	run(t, e, &leases, "leases", "--json")
	for _, l := range leases.Leases {
		if l.LeaseID == beta && (l.TaskID != "T-2" || l.AckedBy != "broker" || l.AckedAt == nil || l.AckedAt.Location() != time.UTC) {
			t.Errorf("T-2's lease in --json: %+v", l)
		}
	}
	if !strings.Contains(run(t, e, nil, "leases", "--json").Stdout, `"acked_at": "20`) {
		t.Error("leases --json: acked_at is not RFC 3339")
	}

	// Receipts name their task and repo, and filter by task, lease, trigger.
	var rs api.ReceiptsResult
	run(t, e, &rs, "receipts", "--task", "T-1", "--json")
	if len(rs.Receipts) != 5 {
		t.Fatalf("receipts of T-1: %+v", rs.Receipts)
	}
	for _, rc := range rs.Receipts {
		if rc.TaskID != "T-1" || rc.Repo != "alpha" {
			t.Errorf("a receipt of T-1 names task %q repo %q", rc.TaskID, rc.Repo)
		}
	}
	trigger := rs.Receipts[0].TriggerID
	r = run(t, e, nil, "receipts", "--trigger", trigger)
	if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); r.Status != 0 || len(lines) != 6 ||
		!regexp.MustCompile(`^WHEN +KIND +STATUS +TASK +REPO +LEASE +REASON$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^(just now|\d+s ago) +lease\.offered +offered +T-1 +alpha +`+id+`#1 +task_actionable$`).MatchString(lines[2]) {
		t.Errorf("receipts of T-1's trigger: %s", r)
	}
	// A task id is no trigger id: not an empty list, but where to look.
	r = run(t, e, nil, "receipts", "--trigger", "T-1")
	if r.Status != errs.ExitStatus(errs.NotFound) || r.Stdout != "" || !strings.Contains(r.Stderr, "no trigger T-1") ||
		!strings.Contains(r.Stderr, "use --task T-1") {
		t.Errorf("receipts of a task id as a trigger: %s", r)
	}
	if r := run(t, e, nil, "receipts", "--lease", id, "--task", "T-2"); r.Status != 0 || strings.Count(r.Stdout, "\n") != 1 {
		t.Errorf("receipts of T-1's lease about T-2: %s", r)
	}
	inert(t, "receipts", run(t, e, nil, "receipts"))
	inert(t, "receipts of a hostile task", run(t, e, nil, "receipts", "--task", hostile))

	// Checkpoints: newest first, the agent's words escaped.
	r = run(t, e, nil, "checkpoints")
	inert(t, "checkpoints", r)
	want := `^(just now|\d+s ago)  lease ` + beta + ` attempt 1  task T-2
  summary: \\x1b\[2J\\x1b\]52;c;cHduZWQ=\\x07evil\\x0aT-1  alpha  forged
  next:    \\x1b\[2J.*
  files:   x\\x1b\[31m\.go
  blocked: human

(just now|\d+s ago)  lease ` + beta + ` attempt 1  task T-2
  summary: parser done
  next:    wire it into the CLI
  files:   parse\.go
$`
	if r.Status != 0 || !regexp.MustCompile(want).MatchString(r.Stdout) {
		t.Errorf("checkpoints: %s", r)
	}
	var cps api.CheckpointsResult
	run(t, e, &cps, "checkpoints", "--task", "T-2", "--limit", "1", "--json")
	if !cps.Offline || len(cps.Checkpoints) != 1 || cps.Checkpoints[0].Summary != hostile || cps.Checkpoints[0].Attempt != 1 {
		t.Errorf("the newest checkpoint of T-2 while stopped: %+v", cps)
	}
	for _, args := range [][]string{{"--task", "T-1"}, {"--lease", id}} {
		var none api.CheckpointsResult
		if r := run(t, e, &none, append([]string{"checkpoints", "--json"}, args...)...); r.Status != 0 || len(none.Checkpoints) != 0 {
			t.Errorf("checkpoints %v: %s", args, r)
		}
	}
	var offline api.CheckpointsResult
	r = run(t, e, &offline, "checkpoints", "--json")
	if !strings.Contains(r.Stdout, `"recorded_at": "20`) || len(offline.Checkpoints) != 2 {
		t.Errorf("checkpoints --json: %s", r)
	}

	// The running engine answers the same.
	e.Engine(t, "start", "--detach")
	var live api.CheckpointsResult
	if r := run(t, e, &live, "checkpoints", "--json"); r.Stderr != "" || live.Offline {
		t.Errorf("the running engine's checkpoints say offline: %s", r)
	}
	offline.Offline = false
	if a, b := jsonOf(t, offline), jsonOf(t, live); a != b {
		t.Errorf("checkpoints read while stopped\n%s\ndiffer from the running engine's\n%s", a, b)
	}
	if r := run(t, e, nil, "receipts", "--trigger", "T-1"); r.Status != errs.ExitStatus(errs.NotFound) || !strings.Contains(r.Stderr, "use --task T-1") {
		t.Errorf("the running engine: receipts of a task id as a trigger: %s", r)
	}
	if r := run(t, e, nil, "receipts", "--trigger", trigger); r.Status != 0 || strings.Count(r.Stdout, "\n") != 6 {
		t.Errorf("the running engine: receipts of T-1's trigger: %s", r)
	}
	inert(t, "checkpoints of the running engine", run(t, e, nil, "checkpoints"))
}

// A listing larger than one protocol frame comes whole, page by page,
// from the running engine and from its database while it is stopped, up
// to its limit.
func TestListsLargerThanAFrame(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	p := enginePaths(t, e)
	id := seedLease(t, p)
	st, err := store.Open(context.Background(), p, time.Second, clock.System)
	if err != nil {
		t.Fatal(err)
	}
	// 40 checkpoints of 4 KiB and 600 receipts: about three frames each.
	for i := range 40 {
		if _, err := st.DB.Writer.Exec(`INSERT INTO checkpoints (lease_id, task_id, summary, recorded_at, attempt) VALUES (?, 'T-1', ?, ?, 1)`,
			id, fmt.Sprintf("n-%02d ", i)+strings.Repeat("x", 4000), 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 600 {
		if _, err := st.DB.Writer.Exec(`INSERT INTO receipts (at, kind, lease_id, status, reason) VALUES (?, 'wake.failed', ?, 'failed', ?)`,
			2000+i, id, fmt.Sprintf("r-%03d ", i)+strings.Repeat("y", 150)); err != nil {
			t.Fatal(err)
		}
	}
	st.DB.Close()

	check := func(when string) {
		t.Helper()
		var cps api.CheckpointsResult
		run(t, e, &cps, "checkpoints", "--json")
		if len(cps.Checkpoints) != 40 || !strings.HasPrefix(cps.Checkpoints[0].Summary, "n-39 ") || !strings.HasPrefix(cps.Checkpoints[39].Summary, "n-00 ") {
			t.Errorf("%s: %d checkpoints", when, len(cps.Checkpoints))
		}
		run(t, e, &cps, "checkpoints", "--json", "--limit", "25")
		if len(cps.Checkpoints) != 25 || !strings.HasPrefix(cps.Checkpoints[24].Summary, "n-15 ") {
			t.Errorf("%s: %d checkpoints of 25", when, len(cps.Checkpoints))
		}
		var rs api.ReceiptsResult
		run(t, e, &rs, "receipts", "--lease", id, "--json")
		if n := len(rs.Receipts); n != 604 || !strings.HasPrefix(rs.Receipts[n-1].Reason, "r-599 ") {
			t.Errorf("%s: %d receipts of the lease", when, n)
		}
		run(t, e, &rs, "receipts", "--lease", id, "--json", "--limit", "300")
		if n := len(rs.Receipts); n != 300 || !strings.HasPrefix(rs.Receipts[0].Reason, "r-300 ") {
			t.Errorf("%s: %d receipts of 300", when, n)
		}
	}
	check("stopped")
	e.Engine(t, "start", "--detach")
	check("running")
}
