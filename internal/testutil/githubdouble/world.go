package githubdouble

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The first IDs handed out. Issue and comment IDs start above 2^31, as
// GitHub's have for years, so that a driver keeping them in 32 bits fails
// here rather than in production.
const (
	firstUserID    = 583231 // octocat's
	firstRepoID    = 1296269
	firstIssueID   = 3_000_000_001
	firstLabelID   = 8_000_000_001
	firstCommentID = 3_500_000_001
)

// world is what the double holds: users, repositories, their labels and
// issues (pull requests are issues with pull set), comments and
// dependencies. It does no locking; Server's mutex guards it.
type world struct {
	me         *user
	users      map[string]*user // by lower-case login
	repos      map[string]*repo // by lower-case full name: GitHub matches owner and name case-insensitively
	reposByID  map[int64]*repo
	issuesByID map[int64]*issue
	created    time.Time

	nextUserID, nextRepoID, nextIssueID, nextLabelID, nextCommentID int64
}

type user struct {
	id    int64
	login string
}

type repo struct {
	id                      int64
	owner                   *user
	name                    string
	private, issuesDisabled bool
	createdAt               time.Time
	labels                  []*label
	issues                  []*issue // issues[n-1] is number n; pull requests share the numbering
}

type label struct {
	id    int64
	name  string
	color string
}

type issue struct {
	id          int64
	number      int
	repo        *repo
	pull        bool
	title       string
	body        string // "" is answered as null
	state       string // "open" or "closed"
	stateReason string // "" is answered as null
	labels      []*label
	author      *user
	association string
	comments    []*comment
	blockedBy   []*issue
	blocking    []*issue
	createdAt   time.Time
	updatedAt   time.Time
	closedAt    *time.Time
	closedBy    *user

	// rev moves with every change to what the issue's JSON shows,
	// including the dependency summary, which changes when a linked issue
	// opens or closes; the methods below move it. json is the issue
	// rendered at jsonRev for jsonBase, so that a page of unchanged
	// issues is not encoded again.
	rev      uint64
	json     []byte
	jsonBase string
	jsonRev  uint64
}

type comment struct {
	id          int64
	issue       *issue
	body        string
	author      *user
	association string
	createdAt   time.Time
	updatedAt   time.Time
}

func (w *world) init(login string, now time.Time) {
	w.users = map[string]*user{}
	w.repos = map[string]*repo{}
	w.reposByID = map[int64]*repo{}
	w.issuesByID = map[int64]*issue{}
	w.created = now
	w.nextUserID = firstUserID
	w.nextRepoID = firstRepoID
	w.nextIssueID = firstIssueID
	w.nextLabelID = firstLabelID
	w.nextCommentID = firstCommentID
	w.me = w.user(login)
}

// user returns the account with login, making it on first mention.
func (w *world) user(login string) *user {
	if u, ok := w.users[strings.ToLower(login)]; ok {
		return u
	}
	u := &user{id: w.nextUserID, login: login}
	w.nextUserID++
	w.users[strings.ToLower(login)] = u
	return u
}

func (w *world) repo(fullName string) *repo { return w.repos[strings.ToLower(fullName)] }

func (r *repo) fullName() string { return r.owner.login + "/" + r.name }

func (r *repo) issue(number int) *issue {
	if number < 1 || number > len(r.issues) {
		return nil
	}
	return r.issues[number-1]
}

// label finds a repository label by name; GitHub's label names are
// case-insensitive.
func (r *repo) label(name string) *label {
	for _, l := range r.labels {
		if strings.EqualFold(l.name, name) {
			return l
		}
	}
	return nil
}

// defaultLabelColor is the grey GitHub gives a label made without a color,
// as when an issue is labelled with a name the repository lacks.
const defaultLabelColor = "ededed"

// ensureLabel returns the repository's label name, making it first if
// missing, as GitHub does when an issue is labelled with a new name.
func (w *world) ensureLabel(r *repo, name, color string) (*label, bool) {
	if l := r.label(name); l != nil {
		return l, false
	}
	if color == "" {
		color = defaultLabelColor
	}
	l := &label{id: w.nextLabelID, name: name, color: color}
	w.nextLabelID++
	r.labels = append(r.labels, l)
	return l, true
}

func (w *world) addRepo(fullName string, o RepoOptions, now time.Time) *repo {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("githubdouble: repository %q is not owner/name", fullName))
	}
	if w.repo(fullName) != nil {
		panic(fmt.Sprintf("githubdouble: repository %q exists", fullName))
	}
	r := &repo{
		id:             w.nextRepoID,
		owner:          w.user(owner),
		name:           name,
		private:        o.Private,
		issuesDisabled: o.IssuesDisabled,
		createdAt:      now,
	}
	w.nextRepoID++
	w.repos[strings.ToLower(fullName)] = r
	w.reposByID[r.id] = r
	return r
}

func (w *world) createIssue(r *repo, title, body string, labels []string, author *user, association string, pull bool, now time.Time) *issue {
	i := &issue{
		id:          w.nextIssueID,
		number:      len(r.issues) + 1,
		repo:        r,
		pull:        pull,
		title:       title,
		body:        body,
		state:       "open",
		author:      author,
		association: association,
		createdAt:   now,
		updatedAt:   now,
	}
	w.nextIssueID++
	for _, name := range labels {
		l, _ := w.ensureLabel(r, name, "")
		i.addLabel(l)
	}
	r.issues = append(r.issues, i)
	w.issuesByID[i.id] = i
	return i
}

// touch records a change people see on the issue: updated_at moves.
func (i *issue) touch(now time.Time) {
	i.updatedAt = now
	i.rev++
}

// addLabel puts l on the issue, keeping the labels in name order as
// GitHub lists them; it reports whether the labels changed. The caller
// touches the issue.
func (i *issue) addLabel(l *label) bool {
	if slices.Contains(i.labels, l) {
		return false
	}
	i.labels = append(i.labels, l)
	slices.SortFunc(i.labels, func(a, b *label) int {
		return strings.Compare(strings.ToLower(a.name), strings.ToLower(b.name))
	})
	i.rev++
	return true
}

func (i *issue) removeLabel(name string) bool {
	n := len(i.labels)
	i.labels = slices.DeleteFunc(i.labels, func(l *label) bool { return strings.EqualFold(l.name, name) })
	if len(i.labels) == n {
		return false
	}
	i.rev++
	return true
}

func (i *issue) hasLabel(name string) bool {
	return slices.ContainsFunc(i.labels, func(l *label) bool { return strings.EqualFold(l.name, name) })
}

// close closes the issue with reason, as GitHub does: closed_at and
// closed_by are set when it was open, and a closed issue keeps its
// closed_at when only the reason changes.
func (i *issue) close(reason string, by *user, now time.Time) {
	if i.state != "closed" {
		i.closedAt = &now
		i.closedBy = by
	}
	i.state = "closed"
	i.stateReason = reason
	i.touch(now)
	i.linkedChanged()
}

// reopen opens the issue again; GitHub then answers state_reason
// "reopened" and a null closed_at.
func (i *issue) reopen(now time.Time) {
	i.state = "open"
	i.stateReason = "reopened"
	i.closedAt = nil
	i.closedBy = nil
	i.touch(now)
	i.linkedChanged()
}

// linkedChanged marks the issues linked to i by dependencies as changed:
// their summaries count i only while it is open.
func (i *issue) linkedChanged() {
	for _, l := range i.blockedBy {
		l.rev++
	}
	for _, l := range i.blocking {
		l.rev++
	}
}

// addBlockedBy records that b blocks i. Dependencies do not change either
// issue's updated_at; they change the issue_dependencies_summary only.
func (i *issue) addBlockedBy(b *issue) bool {
	if slices.Contains(i.blockedBy, b) {
		return false
	}
	i.blockedBy = append(i.blockedBy, b)
	b.blocking = append(b.blocking, i)
	i.rev++
	b.rev++
	return true
}

func (i *issue) removeBlockedBy(b *issue) bool {
	if !slices.Contains(i.blockedBy, b) {
		return false
	}
	i.blockedBy = slices.DeleteFunc(i.blockedBy, func(x *issue) bool { return x == b })
	b.blocking = slices.DeleteFunc(b.blocking, func(x *issue) bool { return x == i })
	i.rev++
	b.rev++
	return true
}

// addComment adds a comment; a new comment moves the issue's updated_at,
// as on GitHub.
func (w *world) addComment(i *issue, author *user, association, body string, now time.Time) *comment {
	c := &comment{
		id:          w.nextCommentID,
		issue:       i,
		body:        body,
		author:      author,
		association: association,
		createdAt:   now,
		updatedAt:   now,
	}
	w.nextCommentID++
	i.comments = append(i.comments, c)
	i.touch(now)
	return c
}

func countOpen(issues []*issue) int {
	n := 0
	for _, i := range issues {
		if i.state == "open" {
			n++
		}
	}
	return n
}
