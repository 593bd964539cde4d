package beads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The mapping of a beads database onto the contract's model
// (docs/trackers.md has its table): a repo's database is a workplan, its
// issues are the tasks, `blocks` and `waits-for` dependencies are
// depends_on, labels carry the gates. It is pure: the look feeds it what
// `bd list --json` printed.

// issue is what the driver reads of one of bd's issues (bd's JSON names;
// its other fields are left alone).
type issue struct {
	ID           string       `json:"id"`
	Title        string       `json:"title"`
	Description  string       `json:"description"`
	Status       string       `json:"status"`
	Priority     int          `json:"priority"`
	IssueType    string       `json:"issue_type"`
	CloseReason  string       `json:"close_reason"`
	Labels       []string     `json:"labels"`
	Dependencies []dependency `json:"dependencies"`
}

// dependency is one of bd's typed links: IssueID depends on DependsOnID.
type dependency struct {
	IssueID     string `json:"issue_id"`
	DependsOnID string `json:"depends_on_id"`
	Type        string `json:"type"`
}

// waitsOn are the links that make a task wait: `blocks` and `waits-for`.
// A `parent-child` link is structure, not an order of work, and
// `conditional-blocks` (run only if the other fails) is not a plain wait.
var waitsOn = []string{"blocks", "waits-for"}

// TaskID is the id of bd's issue bdID in the database of repo (a gita
// slug): "slug/bd-id".
func TaskID(slug, bdID string) string { return slug + "/" + bdID }

// ParseTaskID splits a task id into the gita slug and bd's issue id.
func ParseTaskID(id string) (slug, bdID string, err error) {
	slug, bdID, ok := strings.Cut(id, "/")
	if !ok || slug == "" || !validID(bdID) || textsafe.NameProblem(slug) != "" {
		return "", "", errs.New(errs.BadRequest, "%q is not a beads task id (repo/bd-id)", textsafe.Escape(id))
	}
	return slug, bdID, nil
}

// validID accepts bd's ids (prefix-hash, with dots for children: "bd-a3f8.1"):
// letters, digits, '-', '.', '_' only, so one never reads as an option or
// another argument of a bd command line.
func validID(id string) bool {
	if id == "" || len(id) > 100 || id[0] == '-' {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// status is the contract's status of one of bd's: open is todo, closed is
// done; deferred and pinned (put aside, kept open for ever) are not
// actionable: cancelled; hooked (claimed by a worker of bd's) in progress.
func status(s string) string {
	switch s {
	case "open", "":
		return "todo"
	case "in_progress", "hooked":
		return "in_progress"
	case "blocked":
		return "blocked"
	case "closed":
		return "done"
	}
	return "cancelled" // deferred, pinned, and what a later bd adds
}

// hasAny compares as bd does not (its labels are case sensitive), but a
// person writing "Human" means the gate too.
func hasAny(labels, want []string) bool {
	return slices.ContainsFunc(labels, func(l string) bool {
		return slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(l, w) })
	})
}

// task maps one issue of repo's database (slug) to a contract task. owner
// says which repo's database holds a bd id ("" for none watched): a link
// to an issue this database does not hold (bd accepts another database's
// id, and "external:<repo>:<id>") names that repo's task, or, held by none,
// the id as it is in this repo, for the engine to wait on as on any item
// that is not a task.
func task(is issue, slug string, owner func(bdID string) string, b config.Beads) contract.Task {
	t := contract.Task{
		ID:              TaskID(slug, is.ID),
		Title:           is.Title,
		Status:          status(is.Status),
		Repo:            slug,
		DependsOn:       []string{},
		Priority:        is.Priority,
		NeedsHuman:      hasAny(is.Labels, b.NeedsHumanLabels),
		SecretsRequired: hasAny(is.Labels, b.SecretsRequiredLabels),
	}
	for _, d := range is.Dependencies {
		if d.IssueID != is.ID || !slices.Contains(waitsOn, d.Type) {
			continue
		}
		var dep string
		if other, bdID, ok := crossRepo(d.DependsOnID); ok {
			dep = TaskID(other, bdID)
		} else if validID(d.DependsOnID) {
			repo := owner(d.DependsOnID)
			if repo == "" {
				repo = slug
			}
			dep = TaskID(repo, d.DependsOnID)
		} else {
			continue // not an id bd makes: nothing to wait on
		}
		if !slices.Contains(t.DependsOn, dep) {
			t.DependsOn = append(t.DependsOn, dep)
		}
	}
	slices.Sort(t.DependsOn)
	if hasAny(is.Labels, b.DestructiveLabels) {
		t.ProposedActions = []contract.ProposedAction{{Category: string(policy.Destructive), Summary: "labelled destructive in beads"}}
	}
	t.Revision = revision(t, is.Labels)
	return t
}

// crossRepo reads a link to another repo's database as bd writes an
// external one, "external:<repo>:<bd-id>" (bd dep add … external:…):
// beads keeps one database per repository, so a task waiting on another
// repo's work names it so.
func crossRepo(dep string) (slug, bdID string, ok bool) {
	rest, ok := strings.CutPrefix(dep, "external:")
	if !ok {
		return "", "", false
	}
	slug, bdID, ok = strings.Cut(rest, ":")
	if !ok || textsafe.NameProblem(slug) != "" || !validID(bdID) {
		return "", "", false
	}
	return slug, bdID, true
}

// revision is derived from what the engine reads of an issue, since bd
// keeps no revision and its updated_at does not move when a label, a
// comment or a dependency changes: the title, the status, the priority,
// every label (they carry the gates) and the dependencies. The description
// is not among them: it is read only when the agent asks.
func revision(t contract.Task, labels []string) string {
	lower := make([]string, len(labels))
	for i, l := range labels {
		lower[i] = strings.ToLower(l)
	}
	slices.Sort(lower)
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00%s\x00%d\x00%q\x00%q", t.Title, t.Status, t.Priority, lower, t.DependsOn)
	return "bd-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// workplanRevision changes whenever any task of the workplan does.
func workplanRevision(tasks []contract.Task) string {
	h := sha256.New()
	for _, t := range tasks {
		fmt.Fprintf(h, "%s=%s\x00", t.ID, t.Revision)
	}
	return "bd-" + hex.EncodeToString(h.Sum(nil)[:8])
}
