package githubdouble

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// docsRoot is the documentation_url GitHub gives for a route it does not
// have and for authentication failures.
const docsRoot = "https://docs.github.com/rest"

// The documentation_url of each operation (its externalDocs.url in the
// description): GitHub puts it in the operation's error answers.
const (
	docGetUser        = "https://docs.github.com/rest/users/users#get-the-authenticated-user"
	docRateLimit      = "https://docs.github.com/rest/rate-limit/rate-limit#get-rate-limit-status-for-the-authenticated-user"
	docGetRepo        = "https://docs.github.com/rest/repos/repos#get-a-repository"
	docListIssues     = "https://docs.github.com/rest/issues/issues#list-repository-issues"
	docCreateIssue    = "https://docs.github.com/rest/issues/issues#create-an-issue"
	docGetIssue       = "https://docs.github.com/rest/issues/issues#get-an-issue"
	docUpdateIssue    = "https://docs.github.com/rest/issues/issues#update-an-issue"
	docAddLabels      = "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue"
	docRemoveLabel    = "https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue"
	docGetLabel       = "https://docs.github.com/rest/issues/labels#get-a-label"
	docCreateLabel    = "https://docs.github.com/rest/issues/labels#create-a-label"
	docListComments   = "https://docs.github.com/rest/issues/comments#list-issue-comments"
	docCreateComment  = "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
	docListBlockedBy  = "https://docs.github.com/rest/issues/issue-dependencies#list-dependencies-an-issue-is-blocked-by"
	docAddBlockedBy   = "https://docs.github.com/rest/issues/issue-dependencies#add-a-dependency-an-issue-is-blocked-by"
	docRemoveBlocked  = "https://docs.github.com/rest/issues/issue-dependencies#remove-dependency-an-issue-is-blocked-by"
	docListBlocking   = "https://docs.github.com/rest/issues/issue-dependencies#list-dependencies-an-issue-is-blocking"
	issuesDisabledMsg = "Issues are disabled for this repo"
)

// call is one request being answered, under the server's mutex.
type call struct {
	s    *Server
	r    *http.Request
	rel  string // the escaped path after PathPrefix
	body []byte
	now  time.Time
	base string
	a    *answer

	repo *repo
	// repoPath is the escaped path after the repository part
	// ("/issues/3/comments"), for Link URLs of the
	// /repositories/{id} form.
	repoPath string
}

// op is one operation of a repository: what it answers, and what its
// errors link to.
type op struct {
	doc string
	// issues marks the issue routes, answered 410 when the repository's
	// issues are disabled.
	issues bool
	run    func(c *call, args []string)
}

func (c *call) render() renderer {
	return renderer{base: c.base, web: "https://" + c.s.opts.WebHost}
}

// route answers the request from the path's segments.
func (c *call) route() {
	escaped := strings.Split(strings.TrimPrefix(c.rel, "/"), "/")
	seg := make([]string, len(escaped))
	for i, e := range escaped {
		u, err := url.PathUnescape(e)
		if err != nil {
			c.a.notFound(docsRoot)
			return
		}
		seg[i] = u
	}
	m := c.r.Method
	switch {
	case len(seg) == 1 && seg[0] == "user" && m == http.MethodGet:
		c.a.json(c.render().me(&c.s.world, c.s.opts.Scopes))
	case len(seg) == 1 && seg[0] == "rate_limit" && m == http.MethodGet:
		c.rateLimit()
	case len(seg) >= 3 && seg[0] == "repos":
		c.repoRoute(c.s.world.repo(seg[1]+"/"+seg[2]), seg[3:], escaped[3:])
	case len(seg) >= 2 && seg[0] == "repositories":
		id, err := strconv.ParseInt(seg[1], 10, 64)
		if err != nil {
			c.a.notFound(docsRoot)
			return
		}
		c.repoRoute(c.s.world.reposByID[id], seg[2:], escaped[2:])
	default:
		c.a.notFound(docsRoot)
	}
}

// repoRoute answers the operations under a repository: 404 with the
// operation's docs for a repository the double does not hold, 410 for
// its issue routes when issues are disabled.
func (c *call) repoRoute(r *repo, rest, escaped []string) {
	o, args, ok := repoOp(c.r.Method, rest)
	if !ok {
		c.a.notFound(docsRoot)
		return
	}
	if r == nil {
		c.a.notFound(o.doc)
		return
	}
	if o.issues && r.issuesDisabled {
		c.a.error(http.StatusGone, issuesDisabledMsg, o.doc)
		return
	}
	c.repo = r
	if len(escaped) > 0 {
		c.repoPath = "/" + strings.Join(escaped, "/")
	}
	o.run(c, args)
}

// repoOp finds the operation for a method and the path segments after
// the repository. A method a path does not have is a 404, as on GitHub.
func repoOp(method string, rest []string) (op, []string, bool) {
	get, post := method == http.MethodGet, method == http.MethodPost
	patch, del := method == http.MethodPatch, method == http.MethodDelete
	n := len(rest)
	switch {
	case n == 0 && get:
		return op{doc: docGetRepo, run: (*call).getRepo}, nil, true
	case n == 1 && rest[0] == "issues" && get:
		return op{doc: docListIssues, issues: true, run: (*call).listIssues}, nil, true
	case n == 1 && rest[0] == "issues" && post:
		return op{doc: docCreateIssue, issues: true, run: (*call).createIssue}, nil, true
	case n == 1 && rest[0] == "labels" && post:
		return op{doc: docCreateLabel, run: (*call).createLabel}, nil, true
	case n == 2 && rest[0] == "labels" && get:
		return op{doc: docGetLabel, run: (*call).getLabel}, rest[1:], true
	}
	if n < 2 || rest[0] != "issues" || !isNumber(rest[1]) {
		return op{}, nil, false
	}
	args := rest[1:]
	var o op
	switch tail := strings.Join(rest[2:min(n, 4)], "/"); {
	case n == 2 && get:
		o = op{doc: docGetIssue, run: (*call).getIssue}
	case n == 2 && patch:
		o = op{doc: docUpdateIssue, run: (*call).updateIssue}
	case n == 3 && tail == "labels" && post:
		o = op{doc: docAddLabels, run: (*call).addLabels}
	case n == 4 && rest[2] == "labels" && del:
		o = op{doc: docRemoveLabel, run: (*call).removeLabel}
	case n == 3 && tail == "comments" && get:
		o = op{doc: docListComments, run: (*call).listComments}
	case n == 3 && tail == "comments" && post:
		o = op{doc: docCreateComment, run: (*call).createComment}
	case n == 4 && tail == "dependencies/blocked_by" && get:
		o = op{doc: docListBlockedBy, run: (*call).listBlockedBy}
	case n == 4 && tail == "dependencies/blocked_by" && post:
		o = op{doc: docAddBlockedBy, run: (*call).addBlockedBy}
	case n == 5 && tail == "dependencies/blocked_by" && del && isNumber(rest[4]):
		o = op{doc: docRemoveBlocked, run: (*call).removeBlockedBy}
	case n == 4 && tail == "dependencies/blocking" && get:
		o = op{doc: docListBlocking, run: (*call).listBlocking}
	default:
		return op{}, nil, false
	}
	o.issues = true
	return o, args, true
}

func isNumber(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// issue finds the issue numbered args[0], answering 404 with doc when
// there is none.
func (c *call) issue(args []string, doc string) *issue {
	n, _ := strconv.Atoi(args[0])
	i := c.repo.issue(n)
	if i == nil {
		c.a.notFound(doc)
	}
	return i
}

func (c *call) getRepo(_ []string) { c.a.json(c.render().repo(c.repo)) }

func (c *call) getIssue(args []string) {
	if i := c.issue(args, docGetIssue); i != nil {
		c.a.raw(c.render().issueBytes(i))
	}
}

func (c *call) getLabel(args []string) {
	l := c.repo.label(args[0])
	if l == nil {
		c.a.notFound(docGetLabel)
		return
	}
	c.a.json(c.render().label(c.repo, l))
}

// rateLimit is GET /rate_limit: the core budget as the headers say it,
// and untouched budgets for the other resources of the description's
// rate-limit-overview whose limits GitHub documents. It does not count
// against the limit.
func (c *call) rateLimit() {
	limit := c.s.opts.RateLimit
	c.s.rate.roll(c.now)
	used := min(c.s.rate.used, limit)
	core := rateJSON{Limit: limit, Used: used, Remaining: limit - used, Reset: c.s.rate.resetAt(c.now).Unix()}
	hour := c.now.Add(time.Hour).Unix()
	fresh := func(limit int, reset int64) rateJSON {
		return rateJSON{Limit: limit, Remaining: limit, Reset: reset}
	}
	c.a.json(rateLimitJSON{
		Resources: map[string]rateJSON{
			"core":                        core,
			"search":                      fresh(30, c.now.Add(time.Minute).Unix()),
			"graphql":                     fresh(5000, hour),
			"integration_manifest":        fresh(5000, hour),
			"source_import":               fresh(100, c.now.Add(time.Minute).Unix()),
			"actions_runner_registration": fresh(10000, hour),
			"scim":                        fresh(15000, hour),
			"dependency_snapshots":        fresh(100, c.now.Add(time.Minute).Unix()),
			"dependency_sbom":             fresh(100, hour),
			"code_search":                 fresh(10, c.now.Add(time.Minute).Unix()),
			"code_scanning_autofix":       fresh(10, c.now.Add(time.Minute).Unix()),
		},
		Rate: core,
	})
}

func (a *answer) error(status int, message, doc string) {
	a.status = status
	a.json(errorBody{Message: message, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

func (a *answer) notFound(doc string) { a.error(http.StatusNotFound, "Not Found", doc) }

// validationFailed is GitHub's 422 for a value it understood but refuses.
func (a *answer) validationFailed(doc string, errs ...fieldError) {
	a.status = http.StatusUnprocessableEntity
	a.json(errorBody{Message: "Validation Failed", Errors: errs, DocumentationURL: doc, Status: "422"})
}

// invalidRequest is GitHub's 422 for a body that does not fit the
// operation's schema (a missing required field, a wrong type).
func (a *answer) invalidRequest(doc, detail string) {
	a.error(http.StatusUnprocessableEntity, "Invalid request.\n\n"+detail, doc)
}
