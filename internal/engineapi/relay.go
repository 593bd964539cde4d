package engineapi

import (
	"slices"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The operations an agent reaches State Hub by through the engine, which
// holds State Hub's address and credentials: it reads a message's body,
// marks a message read, states its task's status. The engine relays what
// the agent states; it never decides a task's state.
const (
	OpMessageShow = "message_show"
	OpMessageRead = "message_read"
	OpTaskSet     = "task_set"
	// OpTaskShow reads a task's description (a GitHub issue's body), for
	// the agent that works on it.
	OpTaskShow = "task_show"
)

// TaskSetStatuses are the statuses an agent may state for its task: the
// others (todo, ready, cancelled) are a person's to set in the tracker.
var TaskSetStatuses = []string{"in_progress", "blocked", "done"}

// MaxTaskNote bounds the note a status comes with: a line for the people
// who read the tracker, not a report.
const MaxTaskNote = 500

// PieceArgs ask for a text the tracker holds (a message's body, a task's
// description) from Offset on, in bytes of it. Such a text can be larger
// than one protocol frame, so it comes in pieces; Revision, once known,
// makes the engine refuse one that changed between pieces (conflict).
type PieceArgs struct {
	Offset   int    `json:"offset,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// Piece is the piece of such a text from Offset; Next is where the next
// piece starts (0: none). The client joins the pieces: what a command
// prints has the whole text and neither Offset nor Next. With Withheld set
// (the secret gate), there is no text at all.
type Piece struct {
	Body      string    `json:"body"`
	BodyBytes int       `json:"body_bytes"`
	Offset    int       `json:"offset,omitempty"`
	Next      int       `json:"next,omitempty"`
	Withheld  *Withheld `json:"withheld,omitempty"`
}

// MessageShowArgs asks for a message and its body, in pieces.
type MessageShowArgs struct {
	MessageID string `json:"message_id"`
	PieceArgs
}

// Withheld says why a text is not shown or not kept: secret material,
// found by Rule at Offset of Field. For a message's body (and subject, when
// it is the subject that holds it) the secret gate applies: a person reads
// it in State Hub. For what an agent hands the engine (a release reason, a
// checkpoint's summary, next action or a changed file's name) the engine
// keeps and publishes WithheldText instead, and Gate is empty.
type Withheld struct {
	Field  string `json:"field"` // body | subject | reason | summary | next_action | files_changed
	Rule   string `json:"rule"`
	Offset int    `json:"offset"`
	Gate   string `json:"gate,omitempty"` // secret, for a message
}

// WithheldText is what the engine keeps and publishes in place of a text
// an agent handed it that looks like it holds a secret.
const WithheldText = "withheld (secret-looking text)"

// MessageShowResult is the message as State Hub has it, with a piece of
// its body.
type MessageShowResult struct {
	Message contract.Message `json:"message"`
	Piece
}

// MessageReadArgs names the message to mark read.
type MessageReadArgs struct {
	MessageID string `json:"message_id"`
}

// MessageReadResult says the message is marked read in State Hub.
type MessageReadResult struct {
	MessageID string `json:"message_id"`
	Read      bool   `json:"read"`
}

// TaskSetArgs is what an agent states about its task.
type TaskSetArgs struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
	// Note goes to the tracker with the status, never into receipts.
	Note string `json:"note,omitempty"`
}

// TaskShowArgs asks for a task and its description, in pieces.
type TaskShowArgs struct {
	TaskID string `json:"task_id"`
	PieceArgs
}

// TaskShown is a task as its tracker has it now: URL is where a person
// reads it ("" when the tracker has no pages); Revision changes with its
// title or description.
type TaskShown struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Repo     string `json:"repo"`
	Status   string `json:"status"`
	URL      string `json:"url,omitempty"`
	Revision string `json:"revision"`
}

// TaskShowResult is the task with a piece of its description; with
// Withheld set the title too is left out when it is the title that holds
// the secret.
type TaskShowResult struct {
	Task TaskShown `json:"task"`
	Piece
}

// TaskSetResult says State Hub took the status.
type TaskSetResult struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
}

// CheckStateHubID refuses an id that cannot name a State Hub object in a
// route: empty, long, not plain text, or a path step ("." or "..").
func CheckStateHubID(what, id string) error {
	if p := textsafe.NameProblem(id); p != "" {
		return errs.New(errs.BadRequest, "%s %q: %s", what, textsafe.Escape(id), p)
	}
	if id == "." || id == ".." {
		return errs.New(errs.BadRequest, "%s %q is not an id", what, id)
	}
	return nil
}

// Check refuses what an agent may not state: another status, a note that
// is long or not one line of plain text. The command checks it before it
// asks, the engine again.
func (a TaskSetArgs) Check() error {
	if err := CheckStateHubID("task id", a.TaskID); err != nil {
		return err
	}
	if !slices.Contains(TaskSetStatuses, a.Status) {
		return errs.New(errs.BadRequest, "status %q: an agent states done, blocked or in_progress", textsafe.Escape(a.Status))
	}
	if len(a.Note) > MaxTaskNote {
		return errs.New(errs.BadRequest, "a note of %d bytes; at most %d", len(a.Note), MaxTaskNote)
	}
	if p := textsafe.ControlProblem(a.Note); p != "" {
		return errs.New(errs.BadRequest, "the note must be one line of plain text: it %s", p)
	}
	return nil
}
