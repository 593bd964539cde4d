package engineapi

import (
	"fmt"
	"strings"
	"time"
)

// OpTasks lists every task of the engine's last observation of State Hub with
// where it stands, what needs a person first.
const OpTasks = "tasks"

// TasksArgs narrows the task list: to a repo, to one kind of standing
// (needs_you, working, retry, waiting, ready, done), and pages it.
type TasksArgs struct {
	Repo   string `json:"repo,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// TasksResult is the task list, ordered by what needs a person first, then
// by workplan and id. Counts are of every task of the observation, whatever
// the filter and page. More says the answer was cut to fit one protocol
// frame: the next page starts at Offset+len(Tasks).
type TasksResult struct {
	ObservedAt *time.Time `json:"observed_at,omitempty"`
	// StateHubUnreachableSince is set while the engine's observer fails:
	// the first failed look since ObservedAt, the last good one. The
	// standings are then ObservedAt's, however old (see StaleLine).
	StateHubUnreachableSince *time.Time     `json:"statehub_unreachable_since,omitempty"`
	Counts                   TaskCounts     `json:"counts"`
	Tasks                    []TaskStanding `json:"tasks"`
	More                     bool           `json:"more,omitempty"`
	// Offline: the engine is not running; the list is read from its
	// database (the tasks it has triggers of, without State Hub's status).
	Offline bool `json:"offline,omitempty"`
}

// TaskStanding is one task and where it stands: Words say it for a person,
// the other fields are the same facts for a program. Times are UTC.
type TaskStanding struct {
	ID        string   `json:"id"`
	Repo      string   `json:"repo"`
	Workplan  string   `json:"workplan"`
	Status    string   `json:"status"`
	Priority  int      `json:"priority"`
	DependsOn []string `json:"depends_on,omitempty"`
	Kind      string   `json:"kind"`
	Words     string   `json:"words"`
	// URL is where a person reads the task (a GitHub issue's page); ""
	// when the tracker has none.
	URL string `json:"url,omitempty"`

	Gate       string `json:"gate,omitempty"`
	GateReason string `json:"gate_reason,omitempty"`
	// Skipped says why the engine skips the task: what State Hub sends of
	// it breaks the engine's rules (a revision with a newline), so it is
	// never woken until mended there. Its kind is needs_you.
	Skipped string `json:"skipped,omitempty"`
	Wait    string `json:"wait,omitempty"`
	// HeldBy is the host whose claim the task waits for ([cluster]:
	// another host's agent is on it; Wait is held_by_host).
	HeldBy      string     `json:"held_by,omitempty"`
	Dependency  string     `json:"dependency,omitempty"`
	LeaseID     string     `json:"lease_id,omitempty"`
	Attempt     int        `json:"attempt,omitempty"`
	MaxAttempts int        `json:"max_attempts,omitempty"`
	Dialog      string     `json:"dialog_window,omitempty"`
	AckedBy     string     `json:"acked_by,omitempty"`
	AckedAt     *time.Time `json:"acked_at,omitempty"`
	RenewedAt   *time.Time `json:"renewed_at,omitempty"`
	RetryAt     *time.Time `json:"retry_at,omitempty"`
}

// TaskCounts counts tasks by where they stand (the kinds of TaskStanding).
type TaskCounts map[string]int

// Line is what a status bar shows: how many tasks need a person and how
// many agents work, "2 need you · 3 working"; "" when neither.
func (c TaskCounts) Line() string {
	var parts []string
	if n := c["needs_you"]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d need you", n))
	}
	if n := c["working"]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d working", n))
	}
	return strings.Join(parts, " · ")
}

// StaleLine is what a person reads above standings that State Hub's outage
// froze: "State Hub unreachable since 10:02:03; standings as of 10:01:58"
// (local times, as a clock on the wall says them); "" while State Hub
// answers (since is nil). asOf is the last good look, nil when none was.
func StaleLine(since, asOf *time.Time) string {
	if since == nil {
		return ""
	}
	line := "State Hub unreachable since " + since.Local().Format(time.TimeOnly)
	if asOf == nil {
		return line + "; no standings yet"
	}
	return line + "; standings as of " + asOf.Local().Format(time.TimeOnly)
}

// TmuxLine is the line of `tamq status --tmux-line`: Line, led by
// "State Hub down" while the engine cannot observe State Hub, since the
// counts are then as old as its last good look.
func (r TasksResult) TmuxLine() string {
	line := r.Counts.Line()
	if r.StateHubUnreachableSince == nil {
		return line
	}
	if line == "" {
		return "State Hub down"
	}
	return "State Hub down · " + line
}
