// Package hubtest is the one conformance suite of the State Hub port
// (statehub.Hub): the same cases run against every driver (the HTTP
// contract against the reference server, GitHub Issues against a double
// written from GitHub's published REST description, the fake in memory),
// as river's riverdrivertest runs one suite against every database driver.
// A driver is done when Run passes against the real tracker or a double
// faithful to its published behaviour; each case fails on a driver that
// gets its part wrong.
//
// The suite builds the same world in every kind of tracker through a
// Tracker, which changes the tracker as the people who use it would, and
// reads back what the driver wrote.
package hubtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// Task is a task as the suite makes, changes and reads it, in the
// contract's words.
type Task struct {
	Title string
	// Body is the task's description, where the tracker has one.
	Body   string
	Status string // todo | in_progress | blocked | done | cancelled
	// DependsOn are the ids of the tasks it waits for.
	DependsOn []string
	// Priority, lower first; 0 leaves it to the tracker's default.
	Priority                                 int
	NeedsHuman, SecretsRequired, Destructive bool
	// Note is what Read says the last status came with.
	Note string
}

// Tracker is the tracker behind a driver, in the hands of its people.
type Tracker interface {
	// AddTask makes a task of repo (a gita slug the driver watches) and
	// returns its id as the driver names it.
	AddTask(t testing.TB, repo string, task Task) string
	// Change replaces what a person can change of a task: its title, its
	// status, its gates and its dependencies (the others of task are
	// ignored).
	Change(t testing.TB, id string, task Task)
	// Read is the task as the tracker has it now.
	Read(t testing.TB, id string) Task
	// Unknown is an id in the driver's form that names no task of repo.
	Unknown(repo string) string
	// Refuse makes the tracker refuse the driver's credentials from now
	// on; Down makes it unreachable. Secret is the credential the driver
	// holds, which no error may show.
	Refuse(t testing.TB)
	Down(t testing.TB)
	Secret() string
	// Charged counts the requests that used up the tracker's request
	// budget (0 for a tracker without one).
	Charged() int
	// Kept is how many of the receipts posted the tracker keeps where its
	// people see them.
	Kept(t testing.TB) int
}

// Messenger is a Tracker of a kind that has coordination messages and
// checkpoints (Offers.Messages, Offers.Checkpoints).
type Messenger interface {
	AddMessage(t testing.TB, m contract.MessageWithBody) string
	AddCheckpoint(t testing.TB, c contract.Checkpoint)
}

// Outsider is a Tracker whose tasks can wait for an item that is not a
// task (GitHub: an issue nobody labelled, or in a repository nobody
// watches).
type Outsider interface {
	// AddOutside makes such an item in repo and returns its id.
	AddOutside(t testing.TB, repo string) string
	// Close closes it as done.
	Close(t testing.TB, id string)
}

// Harness makes a tracker and a driver of it for each case.
type Harness struct {
	// Open starts a tracker with repos (gita slugs) and a driver watching
	// them.
	Open func(t *testing.T, repos ...string) (statehub.Hub, Tracker)
}

// Run runs every case of the suite against h.
func Run(t *testing.T, h Harness) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub, tr := h.Open(t, "alpha", "beta")
			c.run(t, hub, tr)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, hub statehub.Hub, tr Tracker)
}{
	{"FirstLookSeesEveryTask", firstLook},
	{"AnUnchangedTrackerIsAnUnchangedLook", unchangedLook},
	{"AChangeChangesItsTaskOnly", changeSeen},
	{"ADependencyChangesTheRevision", dependencyRevision},
	{"DependenciesCrossRepos", dependenciesAcross},
	{"GatesAreRead", gates},
	{"PriorityOrders", priorities},
	{"AnAgentSetsItsTaskStatus", setStatus},
	{"AnUnknownTaskIsNotFound", unknownTask},
	{"TaskBodies", taskBodies},
	{"Messages", messages},
	{"Checkpoints", checkpoints},
	{"Receipts", receipts},
	{"Events", events},
	{"OutsideDependencies", outside},
	{"RefusedCredentials", refused},
	{"Unreachable", unreachable},
}

// timeout bounds each call of the suite to a driver.
const timeout = 15 * time.Second

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// look is one Board that must succeed.
func look(t *testing.T, hub statehub.Hub) statehub.Board {
	t.Helper()
	b, err := hub.Board(ctxOf(t))
	if err != nil {
		t.Fatalf("Board: %v", err)
	}
	return b
}

// find is a task of the board, and its workplan.
func find(b statehub.Board, id string) (contract.Task, contract.Workplan, bool) {
	for _, wp := range b.Workplans {
		for _, task := range wp.Tasks {
			if task.ID == id {
				return task, wp, true
			}
		}
	}
	return contract.Task{}, contract.Workplan{}, false
}

func mustFind(t *testing.T, b statehub.Board, id string) (contract.Task, contract.Workplan) {
	t.Helper()
	task, wp, ok := find(b, id)
	if !ok {
		t.Fatalf("task %s is not on the board: %s", id, ids(b))
	}
	return task, wp
}

func ids(b statehub.Board) []string {
	var out []string
	for _, wp := range b.Workplans {
		for _, task := range wp.Tasks {
			out = append(out, task.ID)
		}
	}
	slices.Sort(out)
	return out
}

func firstLook(t *testing.T, hub statehub.Hub, tr Tracker) {
	made := map[string]Task{}
	repoOf := map[string]string{}
	for i, status := range []string{"todo", "in_progress", "blocked", "done", "cancelled"} {
		repo := []string{"alpha", "beta"}[i%2]
		task := Task{Title: "task " + status, Status: status}
		id := tr.AddTask(t, repo, task)
		made[id], repoOf[id] = task, repo
	}
	b := look(t, hub)
	if !b.Changed {
		t.Error("the first look is not a change")
	}
	if got, want := ids(b), slices.Sorted(func(yield func(string) bool) {
		for id := range made {
			if !yield(id) {
				return
			}
		}
	}); !slices.Equal(got, want) {
		t.Fatalf("tasks %v, want %v", got, want)
	}
	for id, want := range made {
		got, wp := mustFind(t, b, id)
		switch {
		case got.Status != want.Status:
			t.Errorf("%s: status %q, want %q", id, got.Status, want.Status)
		case got.Title != want.Title:
			t.Errorf("%s: title %q, want %q", id, got.Title, want.Title)
		case got.Repo != repoOf[id] || wp.Repo != repoOf[id]:
			t.Errorf("%s: repo %q in a workplan of %q, want %q", id, got.Repo, wp.Repo, repoOf[id])
		case got.Revision == "" || wp.Revision == "" || wp.ID == "":
			t.Errorf("%s: no revision or workplan id: %+v in %s", id, got, wp.ID)
		case wp.Status != "active" && wp.Status != "ready":
			t.Errorf("%s: its workplan is %s", id, wp.Status)
		}
	}
	if r := hub.Report(); r.Kind != hub.Kind() {
		t.Errorf("the report's kind %q, the driver's %q", r.Kind, hub.Kind())
	}
}

func unchangedLook(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	tr.AddTask(t, "beta", Task{Title: "B", Status: "todo", DependsOn: []string{a}})
	first := look(t, hub)
	charged := tr.Charged()
	second := look(t, hub)
	if second.Changed {
		t.Error("a look at an unchanged tracker says it changed")
	}
	if c := tr.Charged(); c != charged {
		t.Errorf("a look at an unchanged tracker used %d of its request budget; it should cost nothing", c-charged)
	}
	if !slices.EqualFunc(first.Workplans, second.Workplans, func(x, y contract.Workplan) bool {
		return x.ID == y.ID && x.Revision == y.Revision && slices.EqualFunc(x.Tasks, y.Tasks, func(p, q contract.Task) bool {
			return p.ID == q.ID && p.Revision == q.Revision && p.Status == q.Status
		})
	}) {
		t.Errorf("an unchanged look answered other workplans:\n%+v\n%+v", first.Workplans, second.Workplans)
	}
}

func changeSeen(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	other := tr.AddTask(t, "alpha", Task{Title: "other", Status: "todo"})
	before := look(t, hub)
	ta, wpa := mustFind(t, before, a)
	to, _ := mustFind(t, before, other)
	tr.Change(t, a, Task{Title: "A, renamed", Status: "todo"})
	after := look(t, hub)
	if !after.Changed {
		t.Fatal("a renamed task is not a change")
	}
	na, nwpa := mustFind(t, after, a)
	no, _ := mustFind(t, after, other)
	switch {
	case na.Title != "A, renamed":
		t.Errorf("title %q after the change", na.Title)
	case na.Revision == ta.Revision:
		t.Error("the changed task kept its revision")
	case no.Revision != to.Revision:
		t.Error("a task that did not change has a new revision")
	case nwpa.Revision == wpa.Revision:
		t.Error("the workplan of a changed task kept its revision")
	}
	tr.Change(t, a, Task{Title: "A, renamed", Status: "done"})
	if got, _ := mustFind(t, look(t, hub), a); got.Status != "done" {
		t.Errorf("status %q after a person closed it", got.Status)
	}
}

func dependencyRevision(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	b := tr.AddTask(t, "alpha", Task{Title: "B", Status: "todo"})
	before, _ := mustFind(t, look(t, hub), b)
	tr.Change(t, b, Task{Title: "B", Status: "todo", DependsOn: []string{a}})
	board := look(t, hub)
	after, _ := mustFind(t, board, b)
	if !board.Changed || after.Revision == before.Revision {
		t.Errorf("a dependency added: changed %v, revision %s then %s", board.Changed, before.Revision, after.Revision)
	}
	if !slices.Equal(after.DependsOn, []string{a}) {
		t.Errorf("depends on %v, want [%s]", after.DependsOn, a)
	}
	tr.Change(t, b, Task{Title: "B", Status: "todo"})
	if got, _ := mustFind(t, look(t, hub), b); len(got.DependsOn) != 0 || got.Revision == after.Revision {
		t.Errorf("a dependency removed: %v, revision %s", got.DependsOn, got.Revision)
	}
}

func dependenciesAcross(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	b := tr.AddTask(t, "beta", Task{Title: "B", Status: "todo", DependsOn: []string{a}})
	board := look(t, hub)
	tb, _ := mustFind(t, board, b)
	if !slices.Equal(tb.DependsOn, []string{a}) {
		t.Errorf("B depends on %v, want [%s]", tb.DependsOn, a)
	}
	if _, ok := board.Outside[a]; ok {
		t.Errorf("task %s is named outside the workplans too", a)
	}
}

func gates(t *testing.T, hub statehub.Hub, tr Tracker) {
	plain := tr.AddTask(t, "alpha", Task{Title: "plain", Status: "todo"})
	human := tr.AddTask(t, "alpha", Task{Title: "human", Status: "todo", NeedsHuman: true})
	secret := tr.AddTask(t, "alpha", Task{Title: "secret", Status: "todo", SecretsRequired: true})
	destructive := tr.AddTask(t, "beta", Task{Title: "destructive", Status: "todo", Destructive: true})
	b := look(t, hub)
	isDestructive := func(task contract.Task) bool {
		return slices.ContainsFunc(task.ProposedActions, func(a contract.ProposedAction) bool { return a.Category == "destructive" })
	}
	for _, c := range []struct {
		id                         string
		human, secret, destructive bool
	}{{plain, false, false, false}, {human, true, false, false}, {secret, false, true, false}, {destructive, false, false, true}} {
		task, _ := mustFind(t, b, c.id)
		if task.NeedsHuman != c.human || task.SecretsRequired != c.secret || isDestructive(task) != c.destructive {
			t.Errorf("%s: needs_human %v, secrets_required %v, destructive %v; want %v %v %v",
				c.id, task.NeedsHuman, task.SecretsRequired, isDestructive(task), c.human, c.secret, c.destructive)
		}
	}
	// A gate a person clears is a change of the task.
	before, _ := mustFind(t, b, human)
	tr.Change(t, human, Task{Title: "human", Status: "todo"})
	after, _ := mustFind(t, look(t, hub), human)
	if after.NeedsHuman || after.Revision == before.Revision {
		t.Errorf("the gate cleared: needs_human %v, revision %s then %s", after.NeedsHuman, before.Revision, after.Revision)
	}
}

func priorities(t *testing.T, hub statehub.Hub, tr Tracker) {
	late := tr.AddTask(t, "alpha", Task{Title: "late", Status: "todo", Priority: 3})
	soon := tr.AddTask(t, "alpha", Task{Title: "soon", Status: "todo", Priority: 1})
	b := look(t, hub)
	l, _ := mustFind(t, b, late)
	s, _ := mustFind(t, b, soon)
	if s.Priority >= l.Priority {
		t.Errorf("priority 1 is %d, priority 3 is %d: the first must come first", s.Priority, l.Priority)
	}
}

func setStatus(t *testing.T, hub statehub.Hub, tr Tracker) {
	if !hub.Offers().TaskSet {
		id := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
		if err := hub.SetTask(ctxOf(t), id, contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.Unsupported) {
			t.Errorf("a driver that does not offer task set answered %v", err)
		}
		return
	}
	id := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	look(t, hub)
	for _, status := range []string{"in_progress", "blocked", "in_progress", "done"} {
		note := "the agent says " + status
		if err := hub.SetTask(ctxOf(t), id, contract.TaskUpdate{Status: status, Note: note}); err != nil {
			t.Fatalf("set %s: %v", status, err)
		}
		got := tr.Read(t, id)
		if got.Status != status || !strings.Contains(got.Note, note) {
			t.Errorf("after set %s: the tracker has %q with note %q", status, got.Status, got.Note)
		}
		b := look(t, hub)
		if task, _ := mustFind(t, b, id); !b.Changed || task.Status != status {
			t.Errorf("after set %s: the next look says %q (changed %v)", status, task.Status, b.Changed)
		}
	}
	if !slices.Equal(engineapi.TaskSetStatuses, []string{"in_progress", "blocked", "done"}) {
		t.Errorf("the statuses an agent states are %v: cover them here", engineapi.TaskSetStatuses)
	}
}

func unknownTask(t *testing.T, hub statehub.Hub, tr Tracker) {
	tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	look(t, hub)
	id := tr.Unknown("alpha")
	if _, ok := mustFindNot(look(t, hub), id); !ok {
		t.Fatalf("Unknown gave %s, a task", id)
	}
	if !hub.Offers().TaskSet {
		return
	}
	if err := hub.SetTask(ctxOf(t), id, contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.NotFound) {
		t.Errorf("set on an unknown task: %v, want not_found", err)
	}
}

func mustFindNot(b statehub.Board, id string) (contract.Task, bool) {
	task, _, found := find(b, id)
	return task, !found
}

func taskBodies(t *testing.T, hub statehub.Hub, tr Tracker) {
	body := "Line one.\n\nLine two, with `code` and a trailing newline.\n"
	id := tr.AddTask(t, "alpha", Task{Title: "with a body", Body: body, Status: "todo"})
	look(t, hub)
	got, err := hub.TaskBody(ctxOf(t), id)
	if !hub.Offers().TaskBodies {
		if !errs.Is(err, errs.Unsupported) {
			t.Errorf("a driver without task bodies answered %+v, %v", got, err)
		}
		return
	}
	switch {
	case err != nil:
		t.Fatalf("TaskBody: %v", err)
	case got.Body != body || got.Title != "with a body" || got.ID != id || got.Repo != "alpha" || got.Status != "todo":
		t.Errorf("TaskBody %+v", got)
	}
	if _, err := hub.TaskBody(ctxOf(t), tr.Unknown("alpha")); !errs.Is(err, errs.NotFound) {
		t.Errorf("the body of an unknown task: %v, want not_found", err)
	}
}

func messages(t *testing.T, hub statehub.Hub, tr Tracker) {
	ms, ok := tr.(Messenger)
	if !hub.Offers().Messages || !ok {
		unread, _, err := hub.UnreadMessages(ctxOf(t))
		if err != nil || len(unread) != 0 {
			t.Errorf("a tracker without messages lists %v, %v", unread, err)
		}
		if _, err := hub.Message(ctxOf(t), "m-1"); !errs.Is(err, errs.Unsupported) {
			t.Errorf("a message of a tracker without messages: %v, want unsupported", err)
		}
		if err := hub.MarkRead(ctxOf(t), "m-1"); !errs.Is(err, errs.Unsupported) {
			t.Errorf("marking read on a tracker without messages: %v, want unsupported", err)
		}
		return
	}
	id := ms.AddMessage(t, contract.MessageWithBody{Message: contract.Message{ToRepo: "beta", From: "alpha", Subject: "look at this", RequestsAction: true},
		Body: "the body\nof the message"})
	unread, bad, err := hub.UnreadMessages(ctxOf(t))
	if err != nil || len(bad) != 0 || !slices.ContainsFunc(unread, func(m contract.Message) bool { return m.ID == id && m.ToRepo == "beta" && m.RequestsAction }) {
		t.Fatalf("unread %+v %v %v", unread, bad, err)
	}
	m, err := hub.Message(ctxOf(t), id)
	if err != nil || m.Body != "the body\nof the message" || m.Subject != "look at this" {
		t.Errorf("Message %+v %v", m, err)
	}
	if err := hub.MarkRead(ctxOf(t), id); err != nil {
		t.Fatalf("MarkRead: %v", err)
	}
	unread, _, _ = hub.UnreadMessages(ctxOf(t))
	if slices.ContainsFunc(unread, func(m contract.Message) bool { return m.ID == id }) {
		t.Error("a message marked read is still unread")
	}
	if _, err := hub.Message(ctxOf(t), "no-such-message"); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown message: %v, want not_found", err)
	}
}

func checkpoints(t *testing.T, hub statehub.Hub, tr Tracker) {
	ms, ok := tr.(Messenger)
	if !hub.Offers().Checkpoints || !ok {
		cps, cursor, _, err := hub.Checkpoints(ctxOf(t), "c7")
		if err != nil || len(cps) != 0 || cursor != "c7" {
			t.Errorf("a tracker without checkpoints answered %v, cursor %q, %v", cps, cursor, err)
		}
		return
	}
	cp := func(summary string) contract.Checkpoint {
		return contract.Checkpoint{Repo: "alpha", LeaseID: "lease-1", TaskID: "t", Summary: summary, NextAction: "go on"}
	}
	ms.AddCheckpoint(t, cp("first"))
	ms.AddCheckpoint(t, cp("second"))
	got, cursor, bad, err := hub.Checkpoints(ctxOf(t), "")
	if err != nil || len(bad) != 0 || len(got) != 2 || got[0].Summary != "first" || got[1].Summary != "second" {
		t.Fatalf("checkpoints %+v %v %v", got, bad, err)
	}
	if again, next, _, err := hub.Checkpoints(ctxOf(t), cursor); err != nil || len(again) != 0 || next != cursor {
		t.Errorf("since the cursor: %+v, cursor %q then %q, %v", again, cursor, next, err)
	}
	ms.AddCheckpoint(t, cp("third"))
	if more, _, _, err := hub.Checkpoints(ctxOf(t), cursor); err != nil || len(more) != 1 || more[0].Summary != "third" {
		t.Errorf("a new checkpoint since the cursor: %+v %v", more, err)
	}
}

func receipts(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	look(t, hub)
	now := time.Now().UTC().Truncate(time.Second)
	batch := []contract.Receipt{
		{ID: "coordination-engine:suite:1", Source: "coordination-engine", Kind: "trigger.observed", Status: "pending", TaskID: a, Repo: "alpha", At: now},
		{ID: "coordination-engine:suite:2", Source: "coordination-engine", Kind: "lease.offered", Status: "offered", TaskID: a, Repo: "alpha", LeaseID: "l-1", Attempt: 1, At: now},
	}
	for try := range 2 {
		n, err := hub.PostProgress(ctxOf(t), batch)
		if err != nil || n > len(batch) || try == 1 && n != 0 {
			t.Fatalf("PostProgress, time %d: %d newly kept of %d, %v", try+1, n, len(batch), err)
		}
	}
	want := 0
	if hub.Offers().Receipts == "published" {
		want = len(batch) // each once, however often posted
	}
	if got := tr.Kept(t); got != want {
		t.Errorf("the tracker keeps %d receipts; want %d (receipts %s)", got, want, hub.Offers().Receipts)
	}
}

func events(t *testing.T, hub statehub.Hub, tr Tracker) {
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if !hub.Offers().Events {
		if err := hub.Events(ctx, func() {}, func() {}); !errors.Is(err, statehub.ErrNoEvents) {
			t.Errorf("a tracker without events answered %v", err)
		}
		return
	}
	connected, hinted := make(chan struct{}), make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- hub.Events(ctx, func() { close(connected) }, func() {
			select {
			case hinted <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-connected:
	case err := <-done:
		t.Fatalf("the event stream ended before it connected: %v", err)
	case <-ctx.Done():
		t.Fatal("the event stream did not connect")
	}
	tr.Change(t, a, Task{Title: "A", Status: "done"})
	select {
	case <-hinted:
	case <-ctx.Done():
		t.Fatal("no hint after a change")
	}
	cancel()
	<-done
}

func outside(t *testing.T, hub statehub.Hub, tr Tracker) {
	o, ok := tr.(Outsider)
	if !ok {
		return // the kind has no dependencies on items that are not tasks
	}
	x := o.AddOutside(t, "beta")
	a := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo", DependsOn: []string{x}})
	b := look(t, hub)
	task, _ := mustFind(t, b, a)
	if _, _, isTask := find(b, x); isTask {
		t.Fatalf("%s, which is not a task, is on the board", x)
	}
	if !slices.Equal(task.DependsOn, []string{x}) || b.Outside[x] != "todo" {
		t.Fatalf("A depends on %v; outside %v", task.DependsOn, b.Outside)
	}
	o.Close(t, x)
	b = look(t, hub)
	if !b.Changed || b.Outside[x] != "done" {
		t.Errorf("after it closed: changed %v, outside %v", b.Changed, b.Outside)
	}
}

func refused(t *testing.T, hub statehub.Hub, tr Tracker) {
	id := tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	look(t, hub)
	tr.Refuse(t)
	_, err := hub.Board(ctxOf(t))
	if !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("Board with refused credentials: %v, want permission_denied", err)
	}
	if s := tr.Secret(); s != "" && err != nil && strings.Contains(err.Error(), s) {
		t.Errorf("the error shows the credential: %v", err)
	}
	if hub.Offers().TaskSet {
		if err := hub.SetTask(ctxOf(t), id, contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.PermissionDeny) {
			t.Errorf("SetTask with refused credentials: %v, want permission_denied", err)
		}
	}
}

func unreachable(t *testing.T, hub statehub.Hub, tr Tracker) {
	tr.AddTask(t, "alpha", Task{Title: "A", Status: "todo"})
	look(t, hub)
	tr.Down(t)
	if _, err := hub.Board(ctxOf(t)); !errs.Is(err, errs.Unavailable) {
		t.Errorf("Board of a tracker that is down: %v, want unavailable", err)
	}
	if err := hub.Probe(ctxOf(t), time.Second); err == nil {
		t.Error("Probe of a tracker that is down answered")
	}
}
