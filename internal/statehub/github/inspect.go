package github

import (
	"context"
	"net/http"
	"strings"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
)

// What doctor asks of GitHub: whose the token is and what it may do, each
// watched repository as GitHub has it, and the request budget.

// Identity is the token's owner as GitHub says it.
type Identity struct {
	Login string
	// Scopes are a classic token's scopes (X-OAuth-Scopes); Classic says
	// GitHub named them. A fine-grained token's permissions are not said.
	Scopes  []string
	Classic bool
}

// Whoami asks GitHub whose the token is (GET /user).
func (d *Driver) Whoami(ctx context.Context) (Identity, error) {
	var u *gogh.User
	resp, err := d.call(ctx, "read the token's user", func(ctx context.Context) (*gogh.Response, error) {
		var resp *gogh.Response
		var err error
		u, resp, err = d.gh.Users.Get(ctx, "")
		return resp, err
	})
	if err != nil {
		return Identity{}, err
	}
	id := Identity{Login: u.GetLogin()}
	if v, ok := resp.Header[http.CanonicalHeaderKey("X-OAuth-Scopes")]; ok {
		id.Classic = true
		for _, s := range strings.Split(strings.Join(v, ","), ",") {
			if s = strings.TrimSpace(s); s != "" {
				id.Scopes = append(id.Scopes, s)
			}
		}
	}
	return id, nil
}

// RepoFacts is a watched repository as GitHub has it for the token.
type RepoFacts struct {
	FullName  string
	Private   bool
	HasIssues bool
	// CanTriage: the token's user may label issues; CanWrite: may close
	// them and comment (GitHub's triage role can close too).
	CanTriage bool
	// LabelExists: the agent label is defined in the repository.
	LabelExists bool
}

// Inspect reads one repository ("owner/name") and whether its agent label
// exists.
func (d *Driver) Inspect(ctx context.Context, fullName string) (RepoFacts, error) {
	owner, name, err := config.ParseGitHubRepo(fullName)
	if err != nil {
		return RepoFacts{}, errs.New(errs.BadRequest, "%v", err)
	}
	var repo *gogh.Repository
	if _, err := d.call(ctx, "read repository "+fullName, func(ctx context.Context) (*gogh.Response, error) {
		var resp *gogh.Response
		var err error
		repo, resp, err = d.gh.Repositories.Get(ctx, owner, name)
		return resp, err
	}); err != nil {
		return RepoFacts{}, err
	}
	f := RepoFacts{FullName: repo.GetFullName(), Private: repo.GetPrivate(), HasIssues: repo.GetHasIssues()}
	perms := repo.GetPermissions()
	f.CanTriage = perms.GetAdmin() || perms.GetMaintain() || perms.GetPush() || perms.GetTriage()
	_, err = d.call(ctx, "read the label "+d.o.Settings.Label+" of "+fullName, func(ctx context.Context) (*gogh.Response, error) {
		_, resp, err := d.gh.Issues.GetLabel(ctx, owner, name, d.o.Settings.Label)
		return resp, err
	})
	switch {
	case err == nil:
		f.LabelExists = true
	case !errs.Is(err, errs.NotFound):
		return f, err
	}
	return f, nil
}

// RateBudget asks GitHub for its core request budget (GET /rate_limit,
// which does not count against it).
func (d *Driver) RateBudget(ctx context.Context) (statehub.Budget, error) {
	var rl *gogh.RateLimits
	if _, err := d.call(ctx, "read the rate limit", func(ctx context.Context) (*gogh.Response, error) {
		var resp *gogh.Response
		var err error
		rl, resp, err = d.gh.RateLimit.Get(ctx)
		return resp, err
	}); err != nil {
		return statehub.Budget{}, err
	}
	core := rl.GetCore()
	return statehub.Budget{Limit: core.Limit, Remaining: core.Remaining, Reset: core.Reset.UTC()}, nil
}

// Watch says which repositories the driver watches and which it does not,
// and why, as the registry and the remotes say now.
func (d *Driver) Watch(ctx context.Context) (watched, notWatched []statehub.Watched, err error) {
	if _, err := d.watch(ctx); err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]statehub.Watched(nil), d.report...), append([]statehub.Watched(nil), d.notWatched...), nil
}
