package statehub

import (
	"context"
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// Hub is the engine's one port to a tracker: everything coordination-engine
// reads from it and writes to it, whatever the tracker is. Each kind of
// State Hub is a driver of it ([statehub] kind): the HTTP contract
// (Client, kind "contract"), GitHub Issues (internal/statehub/github), and
// in memory for tests (internal/statehub/fakehub). Every driver passes the
// one conformance suite, internal/statehub/hubtest.
//
// A driver maps the tracker onto the contract's model (workplans of tasks
// with revisions, dependencies and gates; messages; checkpoints; receipts)
// and says what it cannot offer (Offers) rather than guessing. What comes
// from the tracker is untrusted text: titles are cleaned where they are
// shown, and bodies are read only when an agent asks and scanned first.
type Hub interface {
	// Kind names the driver: "contract", "github", ...
	Kind() string
	// Offers says what the tracker has beyond workplans and tasks.
	Offers() Offers
	// Board is the tracker's workplans, and whether they changed since the
	// last call: a look at an unchanged tracker answers Changed false
	// with the workplans kept from before, and costs the tracker as little
	// as it allows (conditional requests).
	Board(ctx context.Context) (Board, error)
	// UnreadMessages are the unread coordination messages; none when the
	// tracker has no messages.
	UnreadMessages(ctx context.Context) ([]contract.Message, []Invalid, error)
	// Message is one message with its body (errs.Unsupported when the
	// tracker has no messages, errs.NotFound for an unknown id).
	Message(ctx context.Context, id string) (contract.MessageWithBody, error)
	// MarkRead marks a message read for the agent it was for.
	MarkRead(ctx context.Context, id string) error
	// Checkpoints are the checkpoints recorded in the tracker after cursor
	// ("" for all) and the cursor to ask from next time.
	Checkpoints(ctx context.Context, cursor string) ([]contract.Checkpoint, string, []Invalid, error)
	// Events follows the tracker's change hints until ctx ends or they
	// break: ErrNoEvents when it has none.
	Events(ctx context.Context, onConnected, onEvent func()) error
	// SetTask states a task's status (and a note) as its agent gave it.
	SetTask(ctx context.Context, id string, u contract.TaskUpdate) error
	// TaskBody is a task's description, for the agent that works on it
	// (errs.Unsupported when the tracker's tasks have none).
	TaskBody(ctx context.Context, id string) (TaskBody, error)
	// PostProgress hands the tracker sanitized receipts, each kept once by
	// id however often it is posted; nil means the tracker has them all.
	// It returns how many the tracker newly keeps. A tracker that is not a
	// log keeps them local (takes them, keeping nothing) except what it is
	// told to post.
	PostProgress(ctx context.Context, receipts []contract.Receipt) (int, error)
	// Probe says whether the tracker answers at all (any answer counts).
	Probe(ctx context.Context, timeout time.Duration) error
	// CheckAccess makes one authorized read, for doctor: nil, or why not
	// (errs.PermissionDeny when the credentials are refused).
	CheckAccess(ctx context.Context) error
	// Report is what status shows of the driver: where it looks, its
	// request budget, what it does not watch and why.
	Report() Report
	// Link is the page where a person reads a task (or a workplan), ""
	// when the tracker has none.
	Link(id string) string
}

// Offers is what a tracker has beyond workplans and tasks.
type Offers struct {
	Messages    bool // coordination messages (UnreadMessages, Message, MarkRead)
	Checkpoints bool // checkpoints recorded in the tracker
	Events      bool // a change-hint stream
	TaskBodies  bool // tasks have a description (TaskBody)
	TaskSet     bool // an agent's task status is written to the tracker
	// Receipts is where PostProgress puts receipts: "published" (the
	// tracker keeps them all) or "local" (they stay in the engine's
	// database; a tracker may still post some where people look).
	Receipts string
}

// Board is one look at the tracker's workplans.
type Board struct {
	Workplans []contract.Workplan
	// Changed: something the engine reads differs from the last look.
	Changed bool
	// Invalid are the objects skipped, and why.
	Invalid []Invalid
	// Outside are dependencies of tasks that are not tasks themselves (an
	// issue blocking a task that carries no agent label, or lives in a
	// repository nobody watches), by id: their status in the contract's
	// words, so that a task waits on them as on any other dependency.
	Outside map[string]string
}

// TaskBody is a task with its description, as the tracker has it now.
type TaskBody struct {
	ID, Title, Repo, Status string
	// URL is where a person reads the task ("" when the tracker has no
	// such page).
	URL  string
	Body string
}

// MaxTaskBody is the most of a task's description the engine relays.
const MaxTaskBody = contract.MaxMessageBody

// Report is a driver's account of itself for status and doctor.
type Report struct {
	Kind string `json:"kind"`
	// Watched are the places the driver looks (repositories, for GitHub),
	// and NotWatched what it leaves out and why.
	Watched    []Watched `json:"watched,omitempty"`
	NotWatched []Watched `json:"not_watched,omitempty"`
	// Budget is the tracker's request budget as it last said it; nil when
	// it has none.
	Budget *Budget `json:"budget,omitempty"`
	// PausedUntil: the tracker asked for no requests before then.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	PauseReason string     `json:"pause_reason,omitempty"`
	// Requests counts the requests made since the start, NotModified those
	// answered "unchanged" (free where the tracker says so).
	Requests    int64 `json:"requests"`
	NotModified int64 `json:"not_modified"`
}

// Watched is one place a driver looks, or leaves out (Problem says why).
type Watched struct {
	Repo    string `json:"repo"`              // the gita slug
	Where   string `json:"where,omitempty"`   // "owner/name" on GitHub
	Link    string `json:"link,omitempty"`    // its page for people
	Problem string `json:"problem,omitempty"` // why it is not watched, or what is wrong with it
	// Elsewhere: not watched because its work is not in this tracker (no
	// GitHub origin): as it should be, not a problem to fix.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// Budget is a rate limit as the tracker last reported it.
type Budget struct {
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// RetryLater is the error of a request the tracker asked not to be made
// before Until (a rate limit): the engine waits until then instead of
// backing off on its own, and asking sooner would only lengthen the wait.
type RetryLater struct {
	Until  time.Time
	Reason string
}

func (e *RetryLater) Error() string {
	return e.Reason + " until " + e.Until.UTC().Format(time.RFC3339)
}

// RetryAt is when the tracker asked to be asked again, if err says so.
func RetryAt(err error) (time.Time, bool) {
	var rl *RetryLater
	if errors.As(err, &rl) {
		return rl.Until, true
	}
	return time.Time{}, false
}
