// Package fakehub is a State Hub in memory: a driver of the Hub port
// (internal/statehub) and the tracker behind it at once, for tests of the
// engine that run in one process with an injected clock rather than
// against a server. It offers everything the port has (messages,
// checkpoints, events, task descriptions, published receipts) and passes
// the conformance suite (internal/statehub/hubtest) like every driver.
package fakehub

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// Kind is the fake's kind.
const Kind = "fake"

// Hub is the fake State Hub. Its zero value is not usable: New makes one.
type Hub struct {
	// Now is its clock (message and checkpoint times).
	Now func() time.Time

	mu          sync.Mutex
	repos       []string
	tasks       map[string]*entry
	outside     map[string]string // items that are not tasks, by id: their status
	messages    []contract.MessageWithBody
	checkpoints []contract.Checkpoint
	receipts    map[string]bool
	rev, ids    int
	seen        string // the board's signature at the last look
	refused     bool
	down        bool
	pausedUntil time.Time // as a rate limit asks: no requests before then
	hints       map[chan struct{}]bool
	looks       int
}

type entry struct {
	task contract.Task
	body string
	note string
}

var (
	_ statehub.Hub      = (*Hub)(nil)
	_ hubtest.Tracker   = (*Hub)(nil)
	_ hubtest.Messenger = (*Hub)(nil)
	_ hubtest.Outsider  = (*Hub)(nil)
)

// New is a fake State Hub whose workplans are repos' (gita slugs).
func New(repos ...string) *Hub {
	return &Hub{Now: time.Now, repos: slices.Clone(repos), tasks: map[string]*entry{}, outside: map[string]string{},
		receipts: map[string]bool{}, hints: map[chan struct{}]bool{}}
}

// Kind is "fake".
func (h *Hub) Kind() string { return Kind }

// Offers is everything.
func (h *Hub) Offers() statehub.Offers {
	return statehub.Offers{Messages: true, Checkpoints: true, Events: true, TaskBodies: true, TaskSet: true, Receipts: "published"}
}

// check is the fake's answer to a request while it is down, refusing, or
// asking for no requests (a rate limit's pause).
func (h *Hub) check() error {
	switch {
	case h.down:
		return errs.New(errs.Unavailable, "the fake State Hub is down")
	case h.refused:
		return errs.New(errs.PermissionDeny, "the fake State Hub refused the credentials")
	case h.Now().Before(h.pausedUntil):
		rl := &statehub.RetryLater{Until: h.pausedUntil, Reason: "the fake State Hub asked to wait"}
		return errs.Wrap(errs.Unavailable, rl, "the fake State Hub")
	}
	return nil
}

// PauseUntil makes the fake ask for no requests before until, as GitHub's
// rate limits do: each one meanwhile fails with statehub.RetryLater.
func (h *Hub) PauseUntil(until time.Time) {
	h.mu.Lock()
	h.pausedUntil = until
	h.mu.Unlock()
}

// Looks counts the looks asked of the fake (Board), refused ones included.
func (h *Hub) Looks() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.looks
}

// Board is a workplan per repo, of its tasks in the order they were made.
func (h *Hub) Board(context.Context) (statehub.Board, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.looks++
	if err := h.check(); err != nil {
		return statehub.Board{}, err
	}
	b := statehub.Board{Outside: map[string]string{}}
	var sig strings.Builder
	for _, repo := range h.repos {
		wp := contract.Workplan{ID: "wp-" + repo, Repo: repo, Status: "active", Tasks: []contract.Task{}}
		var revs []string
		for _, id := range h.order() {
			if e := h.tasks[id]; e.task.Repo == repo {
				wp.Tasks = append(wp.Tasks, e.task)
				revs = append(revs, e.task.Revision)
			}
		}
		wp.Revision = strings.Join(revs, ".")
		if wp.Revision == "" {
			wp.Revision = "empty"
		}
		fmt.Fprintf(&sig, "%s=%s;", wp.ID, wp.Revision)
		b.Workplans = append(b.Workplans, wp)
	}
	for id, status := range h.outside {
		b.Outside[id] = status
		fmt.Fprintf(&sig, "%s:%s;", id, status)
	}
	b.Changed = sig.String() != h.seen
	h.seen = sig.String()
	return b, nil
}

// order is the tasks' ids as they were made.
func (h *Hub) order() []string {
	ids := make([]string, 0, len(h.tasks))
	for id := range h.tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		x, _ := strconv.Atoi(a[strings.LastIndex(a, "-")+1:])
		y, _ := strconv.Atoi(b[strings.LastIndex(b, "-")+1:])
		return x - y
	})
	return ids
}

// changed gives a task a new revision and hints the event streams.
func (h *Hub) changed(e *entry) {
	h.rev++
	e.task.Revision = "r" + strconv.Itoa(h.rev)
	for ch := range h.hints {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// UnreadMessages are the messages not read.
func (h *Hub) UnreadMessages(context.Context) ([]contract.Message, []statehub.Invalid, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return nil, nil, err
	}
	var out []contract.Message
	for _, m := range h.messages {
		if !m.Read {
			out = append(out, m.Message)
		}
	}
	return out, nil, nil
}

// Message is one message with its body.
func (h *Hub) Message(_ context.Context, id string) (contract.MessageWithBody, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return contract.MessageWithBody{}, err
	}
	for _, m := range h.messages {
		if m.ID == id {
			return m, nil
		}
	}
	return contract.MessageWithBody{}, errs.New(errs.NotFound, "the fake State Hub has no message %s", id)
}

// MarkRead marks a message read.
func (h *Hub) MarkRead(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return err
	}
	for i := range h.messages {
		if h.messages[i].ID == id {
			h.messages[i].Read = true
			return nil
		}
	}
	return errs.New(errs.NotFound, "the fake State Hub has no message %s", id)
}

// Checkpoints are those after cursor, the count already seen.
func (h *Hub) Checkpoints(_ context.Context, cursor string) ([]contract.Checkpoint, string, []statehub.Invalid, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return nil, cursor, nil, err
	}
	since, _ := strconv.Atoi(cursor)
	since = min(max(since, 0), len(h.checkpoints))
	return slices.Clone(h.checkpoints[since:]), strconv.Itoa(len(h.checkpoints)), nil, nil
}

// Events hints every change until ctx ends.
func (h *Hub) Events(ctx context.Context, onConnected, onEvent func()) error {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if err := h.check(); err != nil {
		h.mu.Unlock()
		return err
	}
	h.hints[ch] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.hints, ch)
		h.mu.Unlock()
	}()
	onConnected()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			onEvent()
		}
	}
}

// SetTask states a task's status and keeps the note.
func (h *Hub) SetTask(_ context.Context, id string, u contract.TaskUpdate) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return err
	}
	e, ok := h.tasks[id]
	if !ok {
		return errs.New(errs.NotFound, "the fake State Hub has no task %s", id)
	}
	if !slices.Contains(contract.TaskStatuses, u.Status) {
		return errs.New(errs.BadRequest, "status %q", u.Status)
	}
	e.task.Status, e.note = u.Status, u.Note
	h.changed(e)
	return nil
}

// TaskBody is a task with its description.
func (h *Hub) TaskBody(_ context.Context, id string) (statehub.TaskBody, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return statehub.TaskBody{}, err
	}
	e, ok := h.tasks[id]
	if !ok {
		return statehub.TaskBody{}, errs.New(errs.NotFound, "the fake State Hub has no task %s", id)
	}
	return statehub.TaskBody{ID: id, Title: e.task.Title, Repo: e.task.Repo, Status: e.task.Status, Body: e.body}, nil
}

// PostProgress keeps each receipt once by id.
func (h *Hub) PostProgress(_ context.Context, rs []contract.Receipt) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.check(); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rs {
		if !h.receipts[r.ID] {
			h.receipts[r.ID] = true
			n++
		}
	}
	return n, nil
}

// Probe fails while the fake is down.
func (h *Hub) Probe(context.Context, time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return errs.New(errs.Unavailable, "the fake State Hub is down")
	}
	return nil
}

// CheckAccess fails while the fake is down or refusing.
func (h *Hub) CheckAccess(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.check()
}

// Link is "": the fake has no pages.
func (h *Hub) Link(string) string { return "" }

// Report names the kind.
func (h *Hub) Report() statehub.Report { return statehub.Report{Kind: Kind} }

// The tracker's side, for the conformance suite and the engine's tests.

// AddTask makes a task of repo.
func (h *Hub) AddTask(_ testing.TB, repo string, t hubtest.Task) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids++
	id := "task-" + strconv.Itoa(h.ids)
	e := &entry{task: contract.Task{ID: id, Repo: repo, InterventionNotes: []contract.Note{}}, body: t.Body}
	h.tasks[id] = e
	h.set(e, t)
	return id
}

// set applies what a person may change of a task.
func (h *Hub) set(e *entry, t hubtest.Task) {
	e.task.Title, e.task.Status = t.Title, t.Status
	e.task.DependsOn = append([]string{}, t.DependsOn...)
	if t.Priority != 0 {
		e.task.Priority = t.Priority
	}
	e.task.NeedsHuman, e.task.SecretsRequired = t.NeedsHuman, t.SecretsRequired
	e.task.ProposedActions = nil
	if t.Destructive {
		e.task.ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "marked destructive"}}
	}
	h.changed(e)
}

// Change changes a task as a person would.
func (h *Hub) Change(t testing.TB, id string, task hubtest.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.tasks[id]
	if !ok {
		t.Fatalf("fakehub: no task %s", id)
	}
	h.set(e, task)
}

// Read is a task as the fake has it.
func (h *Hub) Read(t testing.TB, id string) hubtest.Task {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.tasks[id]
	if !ok {
		t.Fatalf("fakehub: no task %s", id)
	}
	return hubtest.Task{Title: e.task.Title, Body: e.body, Status: e.task.Status, DependsOn: e.task.DependsOn,
		Priority: e.task.Priority, NeedsHuman: e.task.NeedsHuman, SecretsRequired: e.task.SecretsRequired, Note: e.note}
}

// Unknown is an id no task has.
func (h *Hub) Unknown(string) string { return "task-0" }

// Refuse and Down break the fake; Secret is its credential (none).
func (h *Hub) Refuse(testing.TB) { h.mu.Lock(); h.refused = true; h.mu.Unlock() }
func (h *Hub) Down(testing.TB)   { h.mu.Lock(); h.down = true; h.mu.Unlock() }
func (h *Hub) Secret() string    { return "" }

// Charged is 0: the fake has no request budget.
func (h *Hub) Charged() int { return 0 }

// Kept counts the receipts kept.
func (h *Hub) Kept(testing.TB) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.receipts)
}

// AddMessage adds a message (an id is made when it has none).
func (h *Hub) AddMessage(_ testing.TB, m contract.MessageWithBody) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids++
	if m.ID == "" {
		m.ID = "m-" + strconv.Itoa(h.ids)
	}
	m.Revision, m.CreatedAt = "r"+strconv.Itoa(h.ids), h.Now().UTC()
	h.messages = append(h.messages, m)
	return m.ID
}

// AddCheckpoint adds a checkpoint.
func (h *Hub) AddCheckpoint(_ testing.TB, c contract.Checkpoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.ID = "c" + strconv.Itoa(len(h.checkpoints)+1)
	if c.RecordedAt.IsZero() {
		c.RecordedAt = h.Now().UTC()
	}
	h.checkpoints = append(h.checkpoints, c)
}

// AddOutside adds an item that is not a task, open.
func (h *Hub) AddOutside(_ testing.TB, repo string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids++
	id := "outside-" + repo + "-" + strconv.Itoa(h.ids)
	h.outside[id] = "todo"
	return id
}

// Close closes an outside item as done.
func (h *Hub) Close(_ testing.TB, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outside[id] = "done"
}
