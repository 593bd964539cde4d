package githubdouble

import (
	"fmt"
	"time"
)

// This file is the Go API a test uses to change the world as people on
// github.com would.

// RepoOptions describe a repository made with AddRepo.
type RepoOptions struct{ Private, IssuesDisabled bool }

// Repo names a repository the double holds.
type Repo struct {
	ID       int64
	FullName string
}

// IssueInput is an issue or pull request as someone opens it.
type IssueInput struct {
	Title, Body       string
	Labels            []string // created in the repo when missing, as GitHub does when an issue is labelled
	Author            string   // "" → the token's login
	AuthorAssociation string   // "" → "OWNER"
}

// Issue is a snapshot of one issue or pull request as the double holds it.
type Issue struct {
	ID                   int64
	Number               int
	Repo                 string
	Title, Body, State   string
	StateReason          string
	Labels               []string
	PullRequest          bool
	Comments             []Comment
	BlockedBy            []IssueRef
	CreatedAt, UpdatedAt time.Time
	ClosedAt             *time.Time
}

// IssueRef names an issue by repository and number.
type IssueRef struct {
	Repo   string
	Number int
}

// Comment is a snapshot of one issue comment.
type Comment struct {
	ID        int64
	Body      string
	Author    string
	CreatedAt time.Time
}

// The methods below panic on a repository or issue the double does not
// hold: that is a mistake in the test, not a situation to answer.

// AddRepo makes the repository "owner/name", owned by owner.
func (s *Server) AddRepo(fullName string, o RepoOptions) Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.world.addRepo(fullName, o, s.now())
	return Repo{ID: r.id, FullName: r.fullName()}
}

// CreateLabel makes a label in repo; it does nothing if one of that name
// (in any case) exists.
func (s *Server) CreateLabel(repo, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.world.ensureLabel(s.mustRepo(repo), name, "")
}

// CreateIssue opens an issue in repo.
func (s *Server) CreateIssue(repo string, in IssueInput) Issue {
	return s.open(repo, in, false)
}

// CreatePullRequest opens a pull request in repo. GitHub lists pull
// requests among the issues, each with a "pull_request" object.
func (s *Server) CreatePullRequest(repo string, in IssueInput) Issue {
	return s.open(repo, in, true)
}

func (s *Server) open(repo string, in IssueInput, pull bool) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repo)
	author := s.world.me
	if in.Author != "" {
		author = s.world.user(in.Author)
	}
	assoc := in.AuthorAssociation
	if assoc == "" {
		assoc = "OWNER"
	}
	i := s.world.createIssue(r, in.Title, in.Body, in.Labels, author, assoc, pull, s.now())
	return snapshot(i)
}

// AddLabels puts labels on an issue, making missing ones in the repo.
func (s *Server) AddLabels(repo string, number int, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	changed := false
	for _, name := range labels {
		l, _ := s.world.ensureLabel(i.repo, name, "")
		changed = i.addLabel(l) || changed
	}
	if changed {
		i.touch(s.now())
	}
}

// RemoveLabel takes label off an issue; it does nothing if it is not there.
func (s *Server) RemoveLabel(repo string, number int, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	if i.removeLabel(label) {
		i.touch(s.now())
	}
}

// Close closes an issue with reason "completed" or "not_planned" ("" is
// "completed", as on GitHub).
func (s *Server) Close(repo string, number int, reason string) {
	if reason == "" {
		reason = "completed"
	}
	if reason != "completed" && reason != "not_planned" && reason != "duplicate" {
		panic(fmt.Sprintf("githubdouble: %q is not a reason to close an issue", reason))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustIssue(repo, number).close(reason, s.world.me, s.now())
}

// Reopen opens a closed issue again.
func (s *Server) Reopen(repo string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	if i.state == "open" {
		return
	}
	i.reopen(s.now())
}

// SetTitle changes an issue's title.
func (s *Server) SetTitle(repo string, number int, title string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	if i.title != title {
		i.title = title
		i.touch(s.now())
	}
}

// SetBody changes an issue's body ("" clears it; GitHub then answers null).
func (s *Server) SetBody(repo string, number int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	if i.body != body {
		i.body = body
		i.touch(s.now())
	}
}

// AddComment comments on an issue as author ("" → the token's login).
func (s *Server) AddComment(repo string, number int, author, body string) Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	u, assoc := s.world.me, "OWNER"
	if author != "" && author != s.world.me.login {
		u, assoc = s.world.user(author), "NONE"
	}
	c := s.world.addComment(i, u, assoc, body, s.now())
	return commentSnapshot(c)
}

// AddBlockedBy records that blocker (which may be in another repository)
// blocks the issue. It changes both issues' issue_dependencies_summary but
// not their updated_at.
func (s *Server) AddBlockedBy(repo string, number int, blocker IssueRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	b := s.mustIssue(blocker.Repo, blocker.Number)
	if i == b {
		panic("githubdouble: an issue cannot block itself")
	}
	i.addBlockedBy(b)
}

// RemoveBlockedBy removes the dependency AddBlockedBy recorded.
func (s *Server) RemoveBlockedBy(repo string, number int, blocker IssueRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.mustIssue(repo, number)
	i.removeBlockedBy(s.mustIssue(blocker.Repo, blocker.Number))
}

// Issue returns a snapshot of an issue or pull request.
func (s *Server) Issue(repo string, number int) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.mustIssue(repo, number))
}

// Comments returns an issue's comments, oldest first.
func (s *Server) Comments(repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.mustIssue(repo, number)).Comments
}

func (s *Server) mustRepo(fullName string) *repo {
	r := s.world.repo(fullName)
	if r == nil {
		panic(fmt.Sprintf("githubdouble: no repository %q (AddRepo it first)", fullName))
	}
	return r
}

func (s *Server) mustIssue(repo string, number int) *issue {
	i := s.mustRepo(repo).issue(number)
	if i == nil {
		panic(fmt.Sprintf("githubdouble: no issue %s#%d", repo, number))
	}
	return i
}

func snapshot(i *issue) Issue {
	out := Issue{
		ID:          i.id,
		Number:      i.number,
		Repo:        i.repo.fullName(),
		Title:       i.title,
		Body:        i.body,
		State:       i.state,
		StateReason: i.stateReason,
		PullRequest: i.pull,
		CreatedAt:   i.createdAt,
		UpdatedAt:   i.updatedAt,
	}
	for _, l := range i.labels {
		out.Labels = append(out.Labels, l.name)
	}
	for _, c := range i.comments {
		out.Comments = append(out.Comments, commentSnapshot(c))
	}
	for _, b := range i.blockedBy {
		out.BlockedBy = append(out.BlockedBy, IssueRef{Repo: b.repo.fullName(), Number: b.number})
	}
	if i.closedAt != nil {
		t := *i.closedAt
		out.ClosedAt = &t
	}
	return out
}

func commentSnapshot(c *comment) Comment {
	return Comment{ID: c.id, Body: c.body, Author: c.author.login, CreatedAt: c.createdAt}
}
