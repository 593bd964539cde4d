package observe

import (
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// defaultish is a policy like the default profile: repo edits allowed,
// destructive and the other human categories not, "orbit" unknown.
type defaultish struct{}

func (defaultish) Known(c string) bool { return c != "orbit" }
func (defaultish) RequiresHuman(c string) bool {
	return !slices.Contains([]string{"repo_edit", "local_checks", "state_updates"}, c)
}

func task(id, status, repo string, deps ...string) contract.Task {
	return contract.Task{ID: id, Title: "title of " + id, Status: status, Revision: "r-" + id, Repo: repo, DependsOn: deps}
}

func ids(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Trigger.SourceID)
	}
	return out
}

// Actionability: the workplan's and the task's status, then dependencies
// across workplans; the reason says whether dependencies were waited for.
func TestActionabilityAndDependenciesAcrossWorkplans(t *testing.T) {
	a := task("A", "todo", "net")
	b := task("B", "todo", "rail", "A")
	c := task("C", "ready", "rail")
	d := task("D", "in_progress", "rail")
	e := task("E", "todo", "rail", "ghost")
	f := task("F", "todo", "net")
	wps := []contract.Workplan{
		{ID: "W1", Repo: "net", Status: "active", Revision: "1", Tasks: []contract.Task{a}},
		{ID: "W2", Repo: "rail", Status: "ready", Revision: "1", Tasks: []contract.Task{b, c, d, e}},
		{ID: "W3", Repo: "net", Status: "paused", Revision: "1", Tasks: []contract.Task{f}},
	}
	obs := Tasks(wps, nil, defaultish{})
	if got := ids(obs.Candidates); !slices.Equal(got, []string{"A", "C"}) {
		t.Fatalf("candidates %v, want A and C", got)
	}
	if r := obs.Candidates[0].Trigger; r.Reason != lease.TaskActionable || r.WorkplanID != "W1" || r.TaskID != "A" || r.Title != "title of A" {
		t.Errorf("A's trigger %+v", r)
	}
	for id, want := range map[string]string{
		"B": "dependency A is todo", "D": "it is in_progress", "E": "dependency ghost is in no workplan", "F": "its workplan is paused",
	} {
		if got := obs.Tasks[id].Waiting; got != want {
			t.Errorf("%s waits: %q, want %q", id, got, want)
		}
	}
	// A is done: B (in another workplan, another repo) becomes actionable
	// with its own revision, because its dependency is satisfied.
	wps[0].Tasks[0].Status = "done"
	obs = Tasks(wps, nil, defaultish{})
	if got := ids(obs.Candidates); !slices.Equal(got, []string{"B", "C"}) {
		t.Fatalf("after A is done: %v", got)
	}
	if r := obs.Candidates[0].Trigger; r.Reason != lease.DependencySatisfied || r.SourceRevision != "r-B" || r.TargetRepo != "rail" {
		t.Errorf("B's trigger %+v", r)
	}
	if deps := obs.Tasks["B"].Deps; len(deps) != 1 || deps[0] != (Dep{ID: "A", Status: "done", Repo: "net", Found: true}) {
		t.Errorf("B's deps %+v", deps)
	}
}

// Candidates go lower priority first, then by id.
func TestCandidatesByPriority(t *testing.T) {
	x, y, z := task("x", "todo", "r"), task("y", "todo", "r"), task("z", "todo", "r")
	x.Priority, y.Priority, z.Priority = 3, 1, 1
	obs := Tasks([]contract.Workplan{{ID: "W", Repo: "r", Status: "active", Revision: "1", Tasks: []contract.Task{x, z, y}}}, nil, defaultish{})
	if got := ids(obs.Candidates); !slices.Equal(got, []string{"y", "z", "x"}) {
		t.Errorf("order %v", got)
	}
}

// Each gate of the contract, in its order of precedence.
func TestContentGates(t *testing.T) {
	for _, tc := range []struct {
		name       string
		edit       func(wp *contract.Workplan, t *contract.Task)
		gate       string
		reasonPart string
	}{
		{"none", func(*contract.Workplan, *contract.Task) {}, "", ""},
		{"task needs a human", func(_ *contract.Workplan, t *contract.Task) { t.NeedsHuman = true }, GateHuman, "task needs a human"},
		{"workplan needs a human", func(wp *contract.Workplan, _ *contract.Task) { wp.NeedsHuman = true }, GateHuman, "workplan W"},
		{"review note on the task", func(_ *contract.Workplan, t *contract.Task) {
			t.InterventionNotes = []contract.Note{{ID: "n1", Text: "private words", RequestsReview: true}}
		}, GateHuman, "note n1 on the task"},
		{"review note on the workplan", func(wp *contract.Workplan, _ *contract.Task) {
			wp.InterventionNotes = []contract.Note{{ID: "n2", RequestsReview: true}}
		}, GateHuman, "note n2 on the workplan"},
		{"a note without review", func(_ *contract.Workplan, t *contract.Task) {
			t.InterventionNotes = []contract.Note{{ID: "n3"}}
		}, "", ""},
		{"secrets required", func(_ *contract.Workplan, t *contract.Task) { t.SecretsRequired = true }, GateSecret, "requires secrets"},
		{"a secrets action", func(_ *contract.Workplan, t *contract.Task) {
			t.ProposedActions = []contract.ProposedAction{{Category: "secrets"}}
		}, GateSecret, "needs secrets"},
		{"destructive", func(_ *contract.Workplan, t *contract.Task) {
			t.ProposedActions = []contract.ProposedAction{{Category: "repo_edit"}, {Category: "destructive", Summary: "drop the table"}}
		}, "destructive", "destructive actions"},
		{"allowed actions", func(_ *contract.Workplan, t *contract.Task) {
			t.ProposedActions = []contract.ProposedAction{{Category: "repo_edit"}, {Category: "local_checks"}}
		}, "", ""},
		{"unknown category", func(_ *contract.Workplan, t *contract.Task) {
			t.ProposedActions = []contract.ProposedAction{{Category: "orbit"}}
		}, GatePolicy, "unknown category"},
		{"human before secrets", func(_ *contract.Workplan, t *contract.Task) { t.NeedsHuman, t.SecretsRequired = true, true }, GateHuman, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wp := contract.Workplan{ID: "W", Repo: "r", Status: "active", Revision: "1"}
			tk := task("T", "todo", "r")
			tc.edit(&wp, &tk)
			wp.Tasks = []contract.Task{tk}
			obs := Tasks([]contract.Workplan{wp}, nil, defaultish{})
			if len(obs.Candidates) != 1 {
				t.Fatalf("candidates %v", obs.Candidates)
			}
			c := obs.Candidates[0]
			if c.Gate != tc.gate || !contains(c.GateReason, tc.reasonPart) {
				t.Errorf("gate %q (%q), want %q (%q)", c.Gate, c.GateReason, tc.gate, tc.reasonPart)
			}
			if contains(c.GateReason, "private words") || contains(c.GateReason, "drop the table") {
				t.Errorf("a gate reason carries content: %q", c.GateReason)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A task id two workplans claim is used once and reported.
func TestDuplicateTaskIDs(t *testing.T) {
	obs := Tasks([]contract.Workplan{
		{ID: "W1", Repo: "a", Status: "active", Revision: "1", Tasks: []contract.Task{task("T", "todo", "a")}},
		{ID: "W2", Repo: "b", Status: "active", Revision: "1", Tasks: []contract.Task{task("T", "todo", "b")}},
	}, nil, defaultish{})
	if len(obs.Candidates) != 1 || obs.Candidates[0].Trigger.TargetRepo != "a" || len(obs.Problems) != 1 || obs.Problems[0].ID != "T" {
		t.Errorf("candidates %+v problems %+v", obs.Candidates, obs.Problems)
	}
}

// A dependency the tracker knows but not as a task (an issue nobody
// labelled) holds the task until it is done, and says what it is.
// Security issue 37 (low): a task whose revision holds a newline, or whose
// id is too long to keep, can never make a trigger. It is skipped (not a
// candidate), said so in its view, and one of the problems, its id escaped;
// actionable or not, the others go on.
func TestTasksTheEngineCannotKeepAreSkipped(t *testing.T) {
	nl := task("NL", "todo", "net")
	nl.Revision = "r1\n\x1b[2Jfake"
	long := task(strings.Repeat("L", lease.MaxID+1), "todo", "net")
	later := task("LATER", "todo", "net", "A")
	later.Revision = "r\n"
	wps := []contract.Workplan{{ID: "W1", Repo: "net", Status: "active", Revision: "1",
		Tasks: []contract.Task{task("A", "todo", "net"), nl, long, later}}}
	obs := Tasks(wps, nil, defaultish{})
	if got := ids(obs.Candidates); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("candidates %v, want A alone", got)
	}
	for _, id := range []string{"NL", long.ID, "LATER"} {
		if obs.Tasks[id].Skipped == "" {
			t.Errorf("%.20s is not said to be skipped: %+v", id, obs.Tasks[id])
		}
	}
	if got := obs.Tasks["NL"].Skipped; !contains(got, "revision") || !contains(got, "0x0a") {
		t.Errorf("NL skipped: %q", got)
	}
	if obs.Tasks["A"].Skipped != "" || obs.Tasks["LATER"].Waiting == "" {
		t.Errorf("A %+v, LATER %+v", obs.Tasks["A"], obs.Tasks["LATER"])
	}
	if len(obs.Problems) != 3 {
		t.Fatalf("problems %+v", obs.Problems)
	}
	for _, p := range obs.Problems {
		if p.Kind != "task" || p.Reason == "" || strings.ContainsAny(p.ID, "\n\x1b") {
			t.Errorf("problem %+v", p)
		}
	}
}

func TestOutsideDependencies(t *testing.T) {
	b := task("B", "todo", "r")
	b.DependsOn = []string{"o/x#5", "o/y#6"}
	wps := []contract.Workplan{{ID: "W", Repo: "r", Status: "active", Revision: "1", Tasks: []contract.Task{b}}}
	obs := Tasks(wps, map[string]string{"o/x#5": "todo", "o/y#6": "done"}, defaultish{})
	v := obs.Tasks["B"]
	if v.Actionable || v.Waiting != "dependency o/x#5 is open (not a task: a person's work)" || !v.Deps[0].Outside || !v.Deps[0].Found {
		t.Errorf("waiting on an open outside dependency: %+v", v)
	}
	obs = Tasks(wps, map[string]string{"o/x#5": "done", "o/y#6": "done"}, defaultish{})
	if v := obs.Tasks["B"]; !v.Actionable || len(obs.Candidates) != 1 || obs.Candidates[0].Trigger.Reason != "dependency_satisfied" {
		t.Errorf("both done: %+v %+v", v, obs.Candidates)
	}
	obs = Tasks(wps, map[string]string{"o/y#6": "done"}, defaultish{})
	if v := obs.Tasks["B"]; v.Actionable || v.Waiting != "dependency o/x#5 is in no workplan" {
		t.Errorf("unknown: %+v", v)
	}
}

// Only unread messages that request action wake anyone.
func TestMessages(t *testing.T) {
	got := Messages([]contract.Message{
		{ID: "m1", Revision: "1", ToRepo: "net", From: "rail", Subject: "please rebase", RequestsAction: true},
		{ID: "m2", Revision: "1", ToRepo: "net", Subject: "fyi"},
		{ID: "m3", Revision: "1", ToRepo: "net", RequestsAction: true, Read: true},
	})
	if len(got) != 1 {
		t.Fatalf("candidates %+v", got)
	}
	if tr := got[0].Trigger; tr.Source != lease.SourceMessage || tr.Reason != lease.InboxMessage || tr.Title != "please rebase" || tr.Sender != "rail" || tr.TargetRepo != "net" {
		t.Errorf("trigger %+v", tr)
	}
}

// Routing: what a person must decide is a gate (unregistered, several
// windows, another path); no window, no tamq, a manual window and no agent
// are waited for.
func TestRoute(t *testing.T) {
	one := []Host{{EndpointID: "ce-1", Path: "/src/net", Mode: lease.ModeTrigger}}
	for _, tc := range []struct {
		name       string
		registered bool
		hosts      []Host
		attached   bool
		endpoint   string
		gate       string
		wait       lease.Wait
	}{
		{"routed", true, one, true, "ce-1", "", ""},
		{"trailing slash is the same path", true, []Host{{EndpointID: "ce-1", Path: "/src/net/", Mode: lease.ModeTrigger}}, true, "ce-1", "", ""},
		{"not registered", false, one, true, "", GateUnregistered, ""},
		{"no window", true, nil, true, "", "", lease.WaitNoWindow},
		{"no tamq attached", true, nil, false, "", "", lease.WaitTamq},
		{"two endpoints", true, append(slices.Clone(one), Host{EndpointID: "ce-2", Path: "/src/net", Mode: lease.ModeTrigger}), true, "", GateAmbiguous, ""},
		{"manual", true, []Host{{EndpointID: "ce-1", Path: "/src/net", Mode: lease.ModeManual}}, true, "", "", lease.WaitManual},
		{"no agent running", true, []Host{{EndpointID: "ce-1", Path: "/src/net", Mode: lease.ModeTrigger, NoAgent: true}}, true, "", "", lease.WaitNoAgent},
		{"another path", true, []Host{{EndpointID: "ce-1", Path: "/tmp/net", Mode: lease.ModeTrigger}}, true, "", GateIdentity, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Route("net", "/src/net", tc.registered, tc.hosts, tc.attached)
			if r.EndpointID != tc.endpoint || r.Gate != tc.gate || r.Wait != tc.wait || ((r.Gate != "" || r.Wait != "") && r.Reason == "") {
				t.Errorf("Route = %+v; want endpoint %q, gate %q, wait %q", r, tc.endpoint, tc.gate, tc.wait)
			}
		})
	}
}

// The next attempt of work on a task is judged against the latest
// observation: ended or gated tasks stop it, a dependency reopened or a
// paused workplan makes it wait, an agent's in_progress goes on.
func TestAttempt(t *testing.T) {
	gated := task("G", "todo", "net")
	gated.NeedsHuman = true
	wps := []contract.Workplan{
		{ID: "W1", Repo: "net", Status: "active", Revision: "1", Tasks: []contract.Task{
			task("A", "todo", "net"), task("P", "in_progress", "net"), task("D", "done", "net"), task("C", "cancelled", "net"),
			task("B", "blocked", "net"), gated, task("X", "todo", "net", "A"),
		}},
		{ID: "W2", Repo: "net", Status: "paused", Revision: "1", Tasks: []contract.Task{task("Z", "todo", "net")}},
		{ID: "W3", Repo: "net", Status: "active", Revision: "1", NeedsHuman: true, Tasks: []contract.Task{task("H", "in_progress", "net")}},
	}
	obs := Tasks(wps, nil, defaultish{})
	for id, want := range map[string]Verdict{
		"A":     {},
		"P":     {},
		"D":     {Stop: true, Reason: "task_done: the task is done in State Hub"},
		"C":     {Stop: true, Reason: "task_cancelled: the task is cancelled in State Hub"},
		"B":     {Stop: true, Reason: "task_blocked: the task is blocked in State Hub"},
		"G":     {Stop: true, Gate: GateHuman, Reason: "the task needs a human"},
		"H":     {Stop: true, Gate: GateHuman, Reason: "its workplan W3 needs a human"},
		"X":     {Wait: true, Reason: "dependency A is todo"},
		"Z":     {Wait: true, Reason: "its workplan is paused"},
		"ghost": {Stop: true, Reason: "task_gone: the task is in no workplan"},
	} {
		if got := obs.Attempt(id); got != want {
			t.Errorf("%s: %+v, want %+v", id, got, want)
		}
	}
	if !obs.Tasks["P"].Open() || obs.Tasks["D"].Open() || obs.Tasks["B"].Open() {
		t.Error("Open")
	}
	// A candidate knows its workplan's revision.
	if c := obs.Candidates[0]; c.WorkplanRevision != "1" {
		t.Errorf("candidate %+v", c)
	}
}
