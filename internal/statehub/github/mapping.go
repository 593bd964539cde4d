package github

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// The mapping of GitHub Issues onto the contract's model (docs/trackers.md
// has its table): a repository is a workplan, its issues that carry the
// agent label are its tasks, labels carry status and gates, GitHub's issue
// dependencies are depends_on. It is pure: the look feeds it what GitHub
// answered.

// TaskID is the id of issue number of repository fullName ("owner/name"):
// "owner/name#N", as GitHub writes a reference to an issue.
func TaskID(fullName string, number int) string {
	return fullName + "#" + strconv.Itoa(number)
}

// ParseTaskID splits a task id into the repository ("owner/name") and the
// issue's number.
func ParseTaskID(id string) (fullName string, number int, err error) {
	repo, num, ok := strings.Cut(id, "#")
	n, convErr := strconv.Atoi(num)
	switch {
	case !ok || convErr != nil || n < 1 || num != strconv.Itoa(n):
		return "", 0, errs.New(errs.BadRequest, "%q is not a GitHub task id (owner/name#number)", id)
	}
	if _, _, err := config.ParseGitHubRepo(repo); err != nil {
		return "", 0, errs.New(errs.BadRequest, "%q is not a GitHub task id: %v", id, err)
	}
	return repo, n, nil
}

// labelNames are the names of an issue's labels, as GitHub spells them.
func labelNames(is *gogh.Issue) []string {
	out := make([]string, 0, len(is.Labels))
	for _, l := range is.Labels {
		if l != nil && l.GetName() != "" {
			out = append(out, l.GetName())
		}
	}
	return out
}

// hasLabel compares as GitHub does: label names are not case sensitive.
func hasLabel(names []string, want string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, want) })
}

// isTask says whether an issue is a task: an issue (not a pull request)
// that carries the agent label. The list is asked for that label already;
// the look checks it again, so that a server that ignored the filter
// wakes nobody for an issue no person labelled.
func isTask(is *gogh.Issue, label string) bool {
	return is != nil && !is.IsPullRequest() && is.GetNumber() > 0 && hasLabel(labelNames(is), label)
}

// status is the contract's status of an issue: closed as completed is done,
// closed otherwise (not planned, a duplicate) cancelled; an open issue is
// blocked or in_progress by its labels (blocked first), else todo.
func status(is *gogh.Issue, g config.GitHub) string {
	names := labelNames(is)
	switch {
	case is.GetState() == "closed" && (is.GetStateReason() == "completed" || is.GetStateReason() == ""):
		return "done"
	case is.GetState() == "closed":
		return "cancelled"
	case hasLabel(names, g.BlockedLabel):
		return "blocked"
	case hasLabel(names, g.InProgressLabel):
		return "in_progress"
	}
	return "todo"
}

// priorityPrefix is the label that sets a task's priority: "priority:N".
const priorityPrefix = "priority:"

// priority is the lowest N of the issue's "priority:N" labels, else its
// number: lower goes first, and of two unlabelled issues the older.
func priority(is *gogh.Issue) int {
	best, found := 0, false
	for _, n := range labelNames(is) {
		rest, ok := cutPrefixFold(n, priorityPrefix)
		if !ok {
			continue
		}
		p, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil || p < 0 {
			continue
		}
		if !found || p < best {
			best, found = p, true
		}
	}
	if found {
		return best
	}
	return is.GetNumber()
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// task maps one issue of repository fullName, watched as gita's slug, to a
// contract task, with blockers the ids of the issues that block it.
func task(is *gogh.Issue, fullName, slug string, blockers []string, g config.GitHub) contract.Task {
	names := labelNames(is)
	t := contract.Task{
		ID:              TaskID(fullName, is.GetNumber()),
		Title:           is.GetTitle(),
		Status:          status(is, g),
		Repo:            slug,
		DependsOn:       slices.Clone(blockers),
		Priority:        priority(is),
		NeedsHuman:      hasLabel(names, g.NeedsHumanLabel),
		SecretsRequired: hasLabel(names, g.SecretsRequiredLabel),
	}
	if t.DependsOn == nil {
		t.DependsOn = []string{}
	}
	if hasLabel(names, g.DestructiveLabel) {
		t.ProposedActions = []contract.ProposedAction{{Category: string(policy.Destructive), Summary: "labelled " + g.DestructiveLabel}}
	}
	t.Revision = revision(t, names)
	return t
}

// revision is derived from what the engine reads of an issue, since
// GitHub's updated_at does not move when a dependency is added: the title,
// the status, every label (they carry status, gates and priority) and the
// blockers. The body is not among them: it is read only when the agent
// asks, and an edit of it wakes nobody.
func revision(t contract.Task, labels []string) string {
	lower := make([]string, len(labels))
	for i, l := range labels {
		lower[i] = strings.ToLower(l)
	}
	slices.Sort(lower)
	deps := slices.Sorted(slices.Values(t.DependsOn))
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00%s\x00%q\x00%q", t.Title, t.Status, lower, deps)
	return "gh-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// outsideStatus is the contract's status of an issue that blocks a task
// without being one: done when closed as completed, cancelled when closed
// otherwise, else todo (a person's work: the task waits for it).
func outsideStatus(is *gogh.Issue) string {
	switch {
	case is.GetState() == "closed" && (is.GetStateReason() == "completed" || is.GetStateReason() == ""):
		return "done"
	case is.GetState() == "closed":
		return "cancelled"
	}
	return "todo"
}

// workplanRevision changes whenever any task of the workplan does.
func workplanRevision(tasks []contract.Task) string {
	h := sha256.New()
	for _, t := range tasks {
		fmt.Fprintf(h, "%s=%s\x00", t.ID, t.Revision)
	}
	return "gh-" + hex.EncodeToString(h.Sum(nil)[:8])
}
