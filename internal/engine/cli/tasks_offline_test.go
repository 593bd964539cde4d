package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// While the engine is stopped, tasks answers from its database, as leases,
// receipts and explain do: every task it has a trigger of, where its gates
// and leases leave it (what needs a person first), State Hub's status
// unknown ("-"), a note on stderr and "offline" in --json; hostile text
// stays inert.
func TestTasksReadTheDatabaseWhileStopped(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, "[statehub]\napi_base = \"http://127.0.0.1:9\"\n")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	p := enginePaths(t, e)

	if r := run(t, e, nil, "tasks"); r.Status != 8 || !strings.Contains(r.Stderr, "has no database yet") {
		t.Errorf("tasks without a database: %s", r)
	}
	seedLease(t, p)
	beta := seedMore(t, p)
	st := seedStore(t, p)
	ctx := context.Background()
	gated, _, err := st.Triggers.AddTrigger(ctx, lease.Trigger{Source: lease.SourceTask, SourceID: "T-4", SourceRevision: "2",
		TargetRepo: "delta", TaskID: "T-4", WorkplanID: "W-4", Reason: lease.TaskActionable})
	if err == nil {
		err = st.Triggers.StopTrigger(ctx, gated.ID, "human", "a person decides")
	}
	st.DB.Close()
	if err != nil {
		t.Fatal(err)
	}

	r := run(t, e, nil, "tasks")
	inert(t, "tasks", r)
	if r.Status != 0 || !strings.HasPrefix(r.Stderr, "coordination-engine: not running: this is its database as last written (") {
		t.Fatalf("tasks while stopped: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	for i, want := range []string{
		`^TASK +REPO +STATUS +STANDING$`,
		`^T-4 +delta +- +needs you: human gate`,
		`^\\x1b\[2J.* +gamma +- +working: lease \S+ attempt 1, offered`,
		`^T-2 +beta +- +working: lease ` + beta + ` attempt 1, acked by broker`,
		`^T-1 +alpha +- +waiting: State Hub is not observed while the engine is stopped; its latest trigger is completed$`,
	} {
		if i >= len(lines) || !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("tasks while stopped: line %d is not like %s:\n%s", i+1, want, r.Stdout)
		}
	}
	var res api.TasksResult
	r = run(t, e, &res, "tasks", "--needs-you", "--json")
	if r.Status != 0 || !res.Offline || len(res.Tasks) != 1 || res.Tasks[0].ID != "T-4" || res.Tasks[0].Gate != "" && res.Tasks[0].Gate != "human" ||
		res.Counts["needs_you"] != 1 || res.Counts["working"] != 2 || res.Counts["waiting"] != 1 {
		t.Errorf("tasks --needs-you --json while stopped: %+v\n%s", res, r)
	}
	if r := run(t, e, nil, "tasks", "--repo", "beta"); r.Status != 0 || strings.Count(r.Stdout, "\n") != 2 || !strings.Contains(r.Stdout, "T-2") {
		t.Errorf("tasks --repo beta while stopped: %s", r)
	}
}
