package githubdouble_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
)

// clock is the fake time a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var start = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// setup starts a double on a fake clock.
func setup(t *testing.T, o githubdouble.Options) (*githubdouble.Server, *clock) {
	t.Helper()
	c := &clock{now: start}
	if o.Now == nil {
		o.Now = c.Now
	}
	return githubdouble.Start(t, o), c
}

// reply is one answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON (%v): %s", r.status, err, r.body)
	}
}

// object decodes an answer that must be a JSON object.
func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// noRedirects is a client that hands back a 301 instead of following it,
// as a careful driver must when the Location leaves the API host.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call sends one request to the double with its token, unless header sets
// Authorization ("" sends none); a "Host" pair sets the Host the double
// sees. path is relative to URL() unless it is absolute.
func call(t *testing.T, s *githubdouble.Server, method, path, body string, header ...string) reply {
	t.Helper()
	target := path
	if !strings.HasPrefix(path, "http") {
		target = s.URL() + path
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token())
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func wantStatus(t *testing.T, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
}

// numbers lists the issue numbers of a list answer, in order.
func numbers(t *testing.T, r reply) []int {
	t.Helper()
	var items []struct {
		Number int `json:"number"`
	}
	r.decode(t, &items)
	out := []int{}
	for _, i := range items {
		out = append(out, i.Number)
	}
	return out
}

// links reads a Link header into rel → URL.
func links(t *testing.T, r reply) map[string]string {
	t.Helper()
	out := map[string]string{}
	h := r.header.Get("Link")
	if h == "" {
		return out
	}
	re := regexp.MustCompile(`^<([^>]+)>; rel="([a-z]+)"$`)
	for _, part := range strings.Split(h, ", ") {
		m := re.FindStringSubmatch(part)
		if m == nil {
			t.Fatalf("Link entry %q is not of GitHub's form in %q", part, h)
		}
		out[m[2]] = m[1]
	}
	return out
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{Token: "ghp_right"})
	tests := []struct {
		name          string
		authorization string
		status        int
		message       string
	}{
		{"no header", "", 401, "Requires authentication"},
		{"wrong token", "Bearer ghp_wrong", 401, "Bad credentials"},
		{"not a token scheme", "Digest ghp_right", 401, "Requires authentication"},
		{"basic, wrong password", "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:ghp_wrong")), 401, "Bad credentials"},
		{"basic, token as password", "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:ghp_right")), 200, ""},
		{"bearer", "Bearer ghp_right", 200, ""},
		{"token form", "token ghp_right", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, s, "GET", "/user", "", "Authorization", tt.authorization)
			wantStatus(t, r, tt.status)
			if tt.status != 200 {
				body := r.object(t)
				if body["message"] != tt.message || body["documentation_url"] != "https://docs.github.com/rest" || body["status"] != "401" {
					t.Errorf("body %s, want message %q, the docs root and status \"401\"", r.body, tt.message)
				}
				if r.header.Get("X-RateLimit-Remaining") != "" {
					t.Errorf("a refused request carries rate-limit headers: %v", r.header)
				}
			}
			reqs := s.Requests()
			if got := reqs[len(reqs)-1]; got.Authorized != (tt.status == 200) || got.CountedAgainstLimit != (tt.status == 200) {
				t.Errorf("recorded %+v", got)
			}
		})
	}

	t.Run("a changed token", func(t *testing.T) {
		s.SetToken("ghp_new")
		r := call(t, s, "GET", "/user", "", "Authorization", "Bearer ghp_right")
		wantStatus(t, r, 401)
		if r.object(t)["message"] != "Bad credentials" {
			t.Errorf("old token: %s", r.body)
		}
		wantStatus(t, call(t, s, "GET", "/user", ""), 200)
	})
}

func TestUserAndScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scopes   []string
		header   string
		viewType string
	}{
		{nil, "repo", "public"},
		{[]string{"repo", "read:user", "workflow"}, "repo, read:user, workflow", "private"},
		{[]string{}, "", "public"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			s, _ := setup(t, githubdouble.Options{Login: "mona", Scopes: tt.scopes})
			r := call(t, s, "GET", "/user", "")
			wantStatus(t, r, 200)
			if got := r.header.Get("X-OAuth-Scopes"); got != tt.header {
				t.Errorf("X-OAuth-Scopes %q, want %q", got, tt.header)
			}
			if _, ok := r.header["X-Oauth-Scopes"]; !ok {
				t.Errorf("X-OAuth-Scopes missing: %v", r.header)
			}
			u := r.object(t)
			if u["login"] != "mona" || u["user_view_type"] != tt.viewType || u["type"] != "User" {
				t.Errorf("user %s", r.body)
			}
			_, hasPrivate := u["total_private_repos"]
			if hasPrivate != (tt.viewType == "private") {
				t.Errorf("private fields present=%v for %s", hasPrivate, tt.viewType)
			}
			if r.header.Get("Content-Type") != "application/json; charset=utf-8" || r.header.Get("X-GitHub-Media-Type") != "github.v3; format=json" {
				t.Errorf("headers %v", r.header)
			}
		})
	}
}

func TestRepository(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	repo := s.AddRepo("octocat/hello", githubdouble.RepoOptions{Private: true})
	s.CreateIssue("octocat/hello", githubdouble.IssueInput{Title: "one"})
	s.CreatePullRequest("octocat/hello", githubdouble.IssueInput{Title: "two"})

	for _, path := range []string{"/repos/octocat/hello", "/repos/OctoCat/HELLO", "/repositories/" + strconv.FormatInt(repo.ID, 10)} {
		r := call(t, s, "GET", path, "")
		wantStatus(t, r, 200)
		m := r.object(t)
		if m["full_name"] != "octocat/hello" || m["id"] != float64(repo.ID) || m["private"] != true || m["has_issues"] != true ||
			m["default_branch"] != "main" || m["open_issues_count"] != float64(2) || m["visibility"] != "private" {
			t.Errorf("%s: %s", path, r.body)
		}
		perms, _ := m["permissions"].(map[string]any)
		for _, p := range []string{"admin", "maintain", "push", "triage", "pull"} {
			if perms[p] != true {
				t.Errorf("%s: permission %s is %v", path, p, perms[p])
			}
		}
		owner, _ := m["owner"].(map[string]any)
		if owner["login"] != "octocat" || m["html_url"] != "https://github.com/octocat/hello" {
			t.Errorf("%s: owner %v html_url %v", path, owner, m["html_url"])
		}
	}
	r := call(t, s, "GET", "/repos/octocat/missing", "")
	wantStatus(t, r, 404)
	if m := r.object(t); m["message"] != "Not Found" || m["documentation_url"] != "https://docs.github.com/rest/repos/repos#get-a-repository" {
		t.Errorf("missing repository: %s", r.body)
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	s.CreateIssue("o/r", githubdouble.IssueInput{Title: "t"})
	for _, tt := range []struct{ method, path string }{
		{"GET", "/nothing/here"},
		{"DELETE", "/repos/o/r/issues/1"},
		{"GET", "/repos/o/r/issues/x"},
		{"GET", "/repos/o/r/issues/"},
		{"PUT", "/user"},
	} {
		r := call(t, s, tt.method, tt.path, "")
		wantStatus(t, r, 404)
		if string(r.body) != `{"message":"Not Found","documentation_url":"https://docs.github.com/rest","status":"404"}` {
			t.Errorf("%s %s: %s", tt.method, tt.path, r.body)
		}
	}
	r := call(t, s, "GET", "/repos/o/r/issues/7", "")
	wantStatus(t, r, 404)
	if r.object(t)["documentation_url"] != "https://docs.github.com/rest/issues/issues#get-an-issue" {
		t.Errorf("missing issue: %s", r.body)
	}
}

// seedList makes the issues the list tests read: created a minute apart,
// so that created order is number order.
func seedList(t *testing.T) (*githubdouble.Server, *clock) {
	t.Helper()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	add := func(title string, labels ...string) {
		c.Advance(time.Minute)
		s.CreateIssue("o/r", githubdouble.IssueInput{Title: title, Labels: labels})
	}
	add("1", "bug", "ui")         // #1
	add("2", "bug")               // #2
	add("3", "Bug", "UI", "high") // #3
	add("4")                      // #4
	c.Advance(time.Minute)
	s.CreatePullRequest("o/r", githubdouble.IssueInput{Title: "5", Labels: []string{"bug"}}) // #5
	add("6", "ui")                                                                           // #6
	c.Advance(time.Minute)
	s.Close("o/r", 2, "completed")
	c.Advance(time.Minute)
	s.SetTitle("o/r", 1, "1 again") // #1 is now the most recently updated
	s.AddComment("o/r", 4, "", "first")
	s.AddComment("o/r", 4, "", "second")
	s.AddComment("o/r", 6, "", "only")
	return s, c
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	s, _ := seedList(t)
	tests := []struct {
		query string
		want  []int
	}{
		{"", []int{6, 5, 4, 3, 1}},
		{"?state=closed", []int{2}},
		{"?state=all", []int{6, 5, 4, 3, 2, 1}},
		{"?labels=bug", []int{5, 3, 1}},
		{"?labels=bug,ui", []int{3, 1}},
		{"?labels=BUG,%20Ui", []int{3, 1}},
		{"?labels=bug,ui,high", []int{3}},
		{"?labels=bug,missing", []int{}},
		{"?labels=bug&state=all", []int{5, 3, 2, 1}},
		{"?direction=asc", []int{1, 3, 4, 5, 6}},
		{"?sort=updated", []int{6, 4, 1, 5, 3}},
		{"?sort=comments", []int{4, 6, 5, 3, 1}},
		{"?sort=comments&direction=asc", []int{1, 3, 5, 6, 4}},
		{"?since=2026-12-06T10:08:00Z", []int{6, 4, 1}},
		{"?since=2026-12-06T10:08:00Z&state=all", []int{6, 4, 1}},
		{"?since=2026-12-06T10:07:00Z&state=all", []int{6, 4, 2, 1}},
		{"?since=2026-12-06T10:07:01Z&state=all", []int{6, 4, 1}},
		{"?since=2026-12-06", []int{6, 5, 4, 3, 1}},
		{"?creator=octocat", []int{6, 5, 4, 3, 1}},
		{"?creator=someone", []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := call(t, s, "GET", "/repos/o/r/issues"+tt.query, "")
			wantStatus(t, r, 200)
			if got := numbers(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("numbers %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("pull requests carry pull_request", func(t *testing.T) {
		var items []map[string]any
		call(t, s, "GET", "/repos/o/r/issues?state=all", "").decode(t, &items)
		for _, it := range items {
			pr, isPR := it["pull_request"].(map[string]any)
			if isPR != (it["number"] == float64(5)) {
				t.Errorf("#%v: pull_request %v", it["number"], it["pull_request"])
			}
			if isPR && (pr["url"] != s.URL()+"/repos/o/r/pulls/5" || pr["html_url"] != "https://github.com/o/r/pull/5" || pr["merged_at"] != nil) {
				t.Errorf("pull_request %v", pr)
			}
		}
	})

	for _, q := range []string{"?state=bogus", "?sort=size", "?direction=up", "?since=yesterday"} {
		t.Run("refuses "+q, func(t *testing.T) {
			r := call(t, s, "GET", "/repos/o/r/issues"+q, "")
			wantStatus(t, r, 422)
			if m := r.object(t); m["message"] != "Validation Failed" {
				t.Errorf("%s", r.body)
			}
		})
	}
}

func TestIssueJSON(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	s.CreateIssue("o/r", githubdouble.IssueInput{Title: "Fix <it> & more", Labels: []string{"bug"}, Author: "hubot", AuthorAssociation: "CONTRIBUTOR"})
	r := call(t, s, "GET", "/repos/o/r/issues/1", "")
	wantStatus(t, r, 200)
	m := r.object(t)
	required := []string{"assignee", "closed_at", "comments", "comments_url", "events_url", "html_url", "id", "node_id",
		"labels", "labels_url", "milestone", "number", "repository_url", "state", "locked", "title", "url", "user",
		"created_at", "updated_at", "state_reason", "body", "assignees", "active_lock_reason", "closed_by",
		"author_association", "issue_dependencies_summary", "reactions", "sub_issues_summary", "timeline_url"}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			t.Errorf("issue lacks %q: %s", k, r.body)
		}
	}
	for _, k := range []string{"body", "closed_at", "state_reason", "assignee", "milestone", "closed_by", "active_lock_reason"} {
		if m[k] != nil {
			t.Errorf("%s is %v, want null", k, m[k])
		}
	}
	if _, ok := m["pull_request"]; ok {
		t.Errorf("an issue carries pull_request")
	}
	if !strings.Contains(string(r.body), `"title":"Fix <it> & more"`) {
		t.Errorf("title escaped unlike GitHub: %s", r.body)
	}
	stampRE := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	if m["created_at"] != "2026-12-06T10:00:00Z" || !stampRE.MatchString(m["updated_at"].(string)) {
		t.Errorf("times %v %v", m["created_at"], m["updated_at"])
	}
	id := int64(m["id"].(float64))
	if id <= 1<<31 {
		t.Errorf("issue id %d fits 32 bits; GitHub's no longer do", id)
	}
	user, _ := m["user"].(map[string]any)
	if user["login"] != "hubot" || m["author_association"] != "CONTRIBUTOR" || user["gravatar_id"] != "" {
		t.Errorf("user %v association %v", user, m["author_association"])
	}
	labels, _ := m["labels"].([]any)
	if len(labels) != 1 {
		t.Fatalf("labels %v", m["labels"])
	}
	l := labels[0].(map[string]any)
	for _, k := range []string{"id", "node_id", "url", "name", "description", "color", "default"} {
		if _, ok := l[k]; !ok {
			t.Errorf("label lacks %q: %v", k, l)
		}
	}
	if l["name"] != "bug" || l["url"] != s.URL()+"/repos/o/r/labels/bug" {
		t.Errorf("label %v", l)
	}
	if m["html_url"] != "https://github.com/o/r/issues/1" || m["url"] != s.URL()+"/repos/o/r/issues/1" {
		t.Errorf("urls %v %v", m["html_url"], m["url"])
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	repo := s.AddRepo("o/r", githubdouble.RepoOptions{})
	for i := range 75 {
		c.Advance(time.Second)
		s.CreateIssue("o/r", githubdouble.IssueInput{Title: fmt.Sprint(i + 1), Labels: []string{"x"}})
	}
	repoLists := s.URL() + "/repositories/" + strconv.FormatInt(repo.ID, 10) + "/issues"

	first := call(t, s, "GET", "/repos/o/r/issues?per_page=30&labels=x", "")
	wantStatus(t, first, 200)
	got := links(t, first)
	want := map[string]string{
		"next": repoLists + "?per_page=30&labels=x&page=2",
		"last": repoLists + "?per_page=30&labels=x&page=3",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("first page links %v, want %v", got, want)
	}
	if h := first.header.Get("Link"); !strings.HasPrefix(h, "<"+want["next"]+`>; rel="next", `) {
		t.Errorf("Link %q does not start with next", h)
	}

	var seen []int
	r, pages := first, 1
	for {
		seen = append(seen, numbers(t, r)...)
		next, ok := links(t, r)["next"]
		if !ok {
			break
		}
		r = call(t, s, "GET", next, "")
		wantStatus(t, r, 200)
		pages++
	}
	if pages != 3 || len(seen) != 75 || seen[0] != 75 || seen[74] != 1 {
		t.Errorf("walked %d pages, %d issues (%v...)", pages, len(seen), seen[:3])
	}
	lastLinks := links(t, r)
	if lastLinks["prev"] != repoLists+"?per_page=30&labels=x&page=2" || lastLinks["first"] != repoLists+"?per_page=30&labels=x&page=1" || lastLinks["last"] != "" {
		t.Errorf("last page links %v", lastLinks)
	}
	mid := call(t, s, "GET", repoLists+"?per_page=30&labels=x&page=2", "")
	if l := links(t, mid); len(l) != 4 {
		t.Errorf("middle page links %v, want prev, next, last, first", l)
	}
	if h := mid.header.Get("Link"); !regexp.MustCompile(`^<[^>]+>; rel="prev", <[^>]+>; rel="next", <[^>]+>; rel="last", <[^>]+>; rel="first"$`).MatchString(h) {
		t.Errorf("middle page Link %q is not in GitHub's order", h)
	}

	capped := call(t, s, "GET", "/repos/o/r/issues?per_page=500", "")
	if n := len(numbers(t, capped)); n != 75 || capped.header.Get("Link") != "" {
		t.Errorf("per_page=500 gave %d issues and Link %q", n, capped.header.Get("Link"))
	}
	for range 40 {
		s.CreateIssue("o/r", githubdouble.IssueInput{Title: "more"})
	}
	capped = call(t, s, "GET", "/repos/o/r/issues?per_page=500", "")
	if n := len(numbers(t, capped)); n != 100 || links(t, capped)["last"] != repoLists+"?per_page=500&page=2" {
		t.Errorf("per_page=500 of 115 gave %d issues and links %v", n, links(t, capped))
	}
	if n := len(numbers(t, call(t, s, "GET", "/repos/o/r/issues", ""))); n != 30 {
		t.Errorf("default page has %d issues, want 30", n)
	}
}

func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/a", githubdouble.RepoOptions{})
	s.AddRepo("o/b", githubdouble.RepoOptions{})
	s.CreateIssue("o/a", githubdouble.IssueInput{Title: "blocked"})
	s.CreateIssue("o/b", githubdouble.IssueInput{Title: "blocker"})
	c.Advance(time.Minute)

	r := call(t, s, "GET", "/repos/o/a/issues", "")
	wantStatus(t, r, 200)
	tag := r.header.Get("ETag")
	if !regexp.MustCompile(`^W/"[0-9a-f]{64}"$`).MatchString(tag) {
		t.Fatalf("ETag %q is not weak SHA-256 hex", tag)
	}
	remaining := r.header.Get("X-RateLimit-Remaining")

	notModified := call(t, s, "GET", "/repos/o/a/issues", "", "If-None-Match", tag)
	wantStatus(t, notModified, 304)
	if len(notModified.body) != 0 || notModified.header.Get("X-RateLimit-Remaining") != remaining || notModified.header.Get("ETag") != tag {
		t.Errorf("304 body %q, remaining %q (was %q), ETag %q", notModified.body, notModified.header.Get("X-RateLimit-Remaining"), remaining, notModified.header.Get("ETag"))
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; !last.Conditional || last.CountedAgainstLimit || last.Status != 304 {
		t.Errorf("304 recorded as %+v", last)
	}
	strong := strings.TrimPrefix(tag, "W/")
	wantStatus(t, call(t, s, "GET", "/repos/o/a/issues", "", "If-None-Match", `"other", `+strong), 304)
	if again := call(t, s, "GET", "/repos/o/a/issues", ""); again.header.Get("ETag") != tag || string(again.body) != string(r.body) {
		t.Errorf("an unchanged page changed ETag: %q then %q", tag, again.header.Get("ETag"))
	}
	otherRepo := call(t, s, "GET", "/repos/o/b/issues", "").header.Get("ETag")

	blocker := s.Issue("o/b", 1)
	s.AddBlockedBy("o/a", 1, githubdouble.IssueRef{Repo: "o/b", Number: 1})
	changed := call(t, s, "GET", "/repos/o/a/issues", "", "If-None-Match", tag)
	wantStatus(t, changed, 200)
	if changed.header.Get("ETag") == tag {
		t.Errorf("the dependency did not change the page's ETag")
	}
	var items []struct {
		UpdatedAt string `json:"updated_at"`
		Summary   struct {
			BlockedBy      int `json:"blocked_by"`
			TotalBlockedBy int `json:"total_blocked_by"`
		} `json:"issue_dependencies_summary"`
	}
	changed.decode(t, &items)
	if items[0].Summary.BlockedBy != 1 || items[0].Summary.TotalBlockedBy != 1 || items[0].UpdatedAt != "2026-12-06T10:00:00Z" {
		t.Errorf("after a dependency: %+v (updated_at must not move)", items[0])
	}
	if got := s.Issue("o/a", 1).UpdatedAt; !got.Equal(start) {
		t.Errorf("a dependency moved updated_at to %v", got)
	}
	if s.Issue("o/b", 1).UpdatedAt != blocker.UpdatedAt {
		t.Errorf("a dependency moved the blocker's updated_at")
	}
	if got := call(t, s, "GET", "/repos/o/b/issues", "").header.Get("ETag"); got == otherRepo {
		t.Errorf("the blocker's page kept its ETag though its blocking count changed")
	}

	single := call(t, s, "GET", "/repos/o/a/issues/1", "")
	wantStatus(t, call(t, s, "GET", "/repos/o/a/issues/1", "", "If-None-Match", single.header.Get("ETag")), 304)
	s.SetTitle("o/a", 1, "renamed")
	wantStatus(t, call(t, s, "GET", "/repos/o/a/issues/1", "", "If-None-Match", single.header.Get("ETag")), 200)
}

// The double keeps each issue's JSON and each page between requests; every
// change, by a person or through the API, must show in the next answer
// exactly as a fresh rendering does. A request under another Host renders
// afresh, because the url fields follow the Host.
func TestEveryChangeShowsInTheNextAnswer(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/a", githubdouble.RepoOptions{})
	s.AddRepo("o/b", githubdouble.RepoOptions{})
	for range 3 {
		s.CreateIssue("o/a", githubdouble.IssueInput{Title: "a", Labels: []string{"x"}})
	}
	other := s.CreateIssue("o/b", githubdouble.IssueInput{Title: "b"})
	id := func(repo string, n int) string { return strconv.FormatInt(s.Issue(repo, n).ID, 10) }
	send := func(method, path, body string, status int) func() {
		return func() { wantStatus(t, call(t, s, method, path, body), status) }
	}
	changes := []struct {
		name   string
		change func()
	}{
		{"title", func() { s.SetTitle("o/a", 1, "new title") }},
		{"body", func() { s.SetBody("o/a", 2, "a body") }},
		{"labels added", func() { s.AddLabels("o/a", 3, "y") }},
		{"label removed", func() { s.RemoveLabel("o/a", 3, "x") }},
		{"comment", func() { s.AddComment("o/a", 1, "", "hi") }},
		{"blocked by another repository", func() { s.AddBlockedBy("o/a", 1, githubdouble.IssueRef{Repo: "o/b", Number: other.Number}) }},
		{"the blocker closes", func() { s.Close("o/b", other.Number, "completed") }},
		{"the blocker reopens", func() { s.Reopen("o/b", other.Number) }},
		{"blocked within the repository", func() { s.AddBlockedBy("o/a", 2, githubdouble.IssueRef{Repo: "o/a", Number: 3}) }},
		{"a blocked issue closes", func() { s.Close("o/a", 2, "not_planned") }},
		{"dependency removed", func() { s.RemoveBlockedBy("o/a", 1, githubdouble.IssueRef{Repo: "o/b", Number: other.Number}) }},
		{"new issue", func() { s.CreateIssue("o/a", githubdouble.IssueInput{Title: "late"}) }},
		{"PATCH", send("PATCH", "/repos/o/a/issues/1", `{"title":"patched","labels":["z"]}`, 200)},
		{"PATCH reopen", send("PATCH", "/repos/o/a/issues/2", `{"state":"open"}`, 200)},
		{"POST labels", send("POST", "/repos/o/a/issues/2/labels", `["w"]`, 200)},
		{"DELETE label", send("DELETE", "/repos/o/a/issues/2/labels/w", "", 200)},
		{"POST comment", send("POST", "/repos/o/a/issues/3/comments", `{"body":"x"}`, 201)},
		{"POST dependency", func() {
			send("POST", "/repos/o/a/issues/3/dependencies/blocked_by", `{"issue_id":`+id("o/b", 1)+`}`, 201)()
		}},
		{"PATCH closes a blocker elsewhere", send("PATCH", "/repos/o/b/issues/1", `{"state":"closed"}`, 200)},
		{"DELETE dependency", func() { send("DELETE", "/repos/o/a/issues/3/dependencies/blocked_by/"+id("o/b", 1), "", 200)() }},
	}
	host := strings.TrimPrefix(s.URL(), "http://")
	lists := []string{"/repos/o/a/issues?state=all", "/repos/o/b/issues?state=all", "/repos/o/a/issues/1"}
	for _, tt := range changes {
		var before []reply
		for _, path := range lists {
			before = append(before, call(t, s, "GET", path, ""))
		}
		c.Advance(time.Minute)
		tt.change()
		changed := false
		for k, path := range lists {
			after := call(t, s, "GET", path, "")
			fresh := call(t, s, "GET", path, "", "Host", "fresh.test")
			if want := strings.ReplaceAll(string(fresh.body), "http://fresh.test", "http://"+host); string(after.body) != want {
				t.Errorf("%s: %s answered\n%s\nbut renders afresh as\n%s", tt.name, path, after.body, want)
			}
			same := string(before[k].body) == string(after.body)
			if same != (before[k].header.Get("ETag") == after.header.Get("ETag")) {
				t.Errorf("%s: %s ETag %s → %s while the body changed=%v", tt.name, path, before[k].header.Get("ETag"), after.header.Get("ETag"), !same)
			}
			changed = changed || !same
		}
		if !changed {
			t.Errorf("%s changed no answer", tt.name)
		}
	}
}

func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{RateLimit: 5})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	for i := 1; i <= 3; i++ {
		c.Advance(time.Second)
		r := call(t, s, "GET", "/repos/o/r", "")
		h := r.header
		if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != strconv.Itoa(5-i) ||
			h.Get("X-RateLimit-Used") != strconv.Itoa(i) || h.Get("X-RateLimit-Resource") != "core" {
			t.Errorf("request %d: %v", i, h)
		}
		if want := strconv.FormatInt(start.Add(time.Second+time.Hour).Unix(), 10); h.Get("X-RateLimit-Reset") != want {
			t.Errorf("request %d: reset %s, want %s (an hour after the first counted request)", i, h.Get("X-RateLimit-Reset"), want)
		}
	}

	rl := call(t, s, "GET", "/rate_limit", "")
	wantStatus(t, rl, 200)
	var overview struct {
		Resources map[string]struct{ Limit, Used, Remaining int } `json:"resources"`
		Rate      struct{ Limit, Used, Remaining int }            `json:"rate"`
	}
	rl.decode(t, &overview)
	if core := overview.Resources["core"]; core.Used != 3 || core.Remaining != 2 || overview.Rate != core {
		t.Errorf("rate_limit %s", rl.body)
	}
	if _, ok := overview.Resources["search"]; !ok {
		t.Errorf("rate_limit lacks search: %s", rl.body)
	}
	if rl.header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("/rate_limit counted: %v", rl.header)
	}
	if reqs := s.Requests(); reqs[len(reqs)-1].CountedAgainstLimit {
		t.Errorf("/rate_limit recorded as counted")
	}

	call(t, s, "GET", "/repos/o/r", "")
	r := call(t, s, "GET", "/repos/o/r", "")
	wantStatus(t, r, 200)
	if r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("fifth request leaves %s", r.header.Get("X-RateLimit-Remaining"))
	}
	refused := call(t, s, "GET", "/repos/o/r", "")
	wantStatus(t, refused, 403)
	if refused.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("refusal headers %v", refused.header)
	}
	if m := refused.object(t); !strings.HasPrefix(m["message"].(string), "API rate limit exceeded for user ID 583231.") ||
		m["documentation_url"] != "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting" {
		t.Errorf("refusal body %s", refused.body)
	}

	c.Advance(time.Hour)
	again := call(t, s, "GET", "/repos/o/r", "")
	wantStatus(t, again, 200)
	if again.header.Get("X-RateLimit-Remaining") != "4" {
		t.Errorf("after the window: %v", again.header)
	}
}

func TestSpendPrimary(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	s.SpendPrimary()
	r := call(t, s, "GET", "/repos/o/r/issues", "")
	wantStatus(t, r, 403)
	if r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Used") != "5000" ||
		r.header.Get("X-RateLimit-Reset") != strconv.FormatInt(start.Add(time.Hour).Unix(), 10) {
		t.Errorf("headers %v", r.header)
	}
	if m := r.object(t); !regexp.MustCompile(`^API rate limit exceeded for user ID 583231\. If you reach out to GitHub Support for help, please include the request ID [0-9A-F:]+ and timestamp 2026-12-06 10:00:00 UTC\.$`).MatchString(m["message"].(string)) {
		t.Errorf("message %q", m["message"])
	}
	wantStatus(t, call(t, s, "GET", "/rate_limit", ""), 200)
	c.Advance(time.Hour)
	wantStatus(t, call(t, s, "GET", "/repos/o/r/issues", ""), 200)
}

func TestSecondaryLimit(t *testing.T) {
	t.Parallel()
	for _, status := range []int{403, 429} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			s, c := setup(t, githubdouble.Options{})
			s.AddRepo("o/r", githubdouble.RepoOptions{})
			before := call(t, s, "GET", "/repos/o/r", "").header.Get("X-RateLimit-Remaining")
			s.SecondaryLimit(time.Minute, status)

			r := call(t, s, "POST", "/repos/o/r/issues", `{"title":"x"}`)
			wantStatus(t, r, status)
			if r.header.Get("Retry-After") != "60" || r.header.Get("X-RateLimit-Remaining") != before {
				t.Errorf("headers %v", r.header)
			}
			m := r.object(t)
			if !strings.HasPrefix(m["message"].(string), "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.") ||
				!strings.HasSuffix(m["documentation_url"].(string), "#about-secondary-rate-limits") {
				t.Errorf("body %s", r.body)
			}
			c.Advance(20*time.Second + 500*time.Millisecond)
			if r := call(t, s, "GET", "/rate_limit", ""); r.status != status || r.header.Get("Retry-After") != "40" {
				t.Errorf("later: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
			}
			if s.EarlyRetries() != 2 {
				t.Errorf("EarlyRetries %d, want 2", s.EarlyRetries())
			}
			c.Advance(40 * time.Second)
			wantStatus(t, call(t, s, "GET", "/repos/o/r", ""), 200)
			if s.EarlyRetries() != 2 {
				t.Errorf("a request after the window counted as early")
			}
			for _, req := range s.Requests()[1:3] {
				if req.CountedAgainstLimit {
					t.Errorf("a refused request counted: %+v", req)
				}
			}
		})
	}
}

func TestLabels(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	s.CreateLabel("o/r", "bug")
	s.CreateLabel("o/r", "BUG") // no-op: names are case-insensitive
	s.CreateIssue("o/r", githubdouble.IssueInput{Title: "t"})

	names := func(r reply) []string {
		var ls []struct{ Name string }
		r.decode(t, &ls)
		var out []string
		for _, l := range ls {
			out = append(out, l.Name)
		}
		return out
	}
	for _, tt := range []struct{ body, want string }{
		{`{"labels":["bug"]}`, "[bug]"},
		{`["ui","bug"]`, "[bug ui]"},
		{`[{"name":"agent:ready"}]`, "[agent:ready bug ui]"},
		{`{"labels":[{"name":"high"}]}`, "[agent:ready bug high ui]"},
	} {
		r := call(t, s, "POST", "/repos/o/r/issues/1/labels", tt.body)
		wantStatus(t, r, 200)
		if got := fmt.Sprint(names(r)); got != tt.want {
			t.Errorf("after %s: %s, want %s", tt.body, got, tt.want)
		}
	}
	for _, body := range []string{`{"labels":[]}`, `{"names":["x"]}`, `[1]`} {
		if r := call(t, s, "POST", "/repos/o/r/issues/1/labels", body); r.status != 422 {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	wantStatus(t, call(t, s, "POST", "/repos/o/r/issues/1/labels", `{"labels":`), 400)

	got := call(t, s, "GET", "/repos/o/r/labels/agent:ready", "")
	wantStatus(t, got, 200)
	if m := got.object(t); m["name"] != "agent:ready" || m["color"] != "ededed" || m["default"] != false || m["description"] != nil {
		t.Errorf("label %s", got.body)
	}
	wantStatus(t, call(t, s, "GET", "/repos/o/r/labels/AGENT%3AREADY", ""), 200)
	if r := call(t, s, "GET", "/repos/o/r/labels/nope", ""); r.status != 404 || r.object(t)["documentation_url"] != "https://docs.github.com/rest/issues/labels#get-a-label" {
		t.Errorf("absent label: %d %s", r.status, r.body)
	}

	removed := call(t, s, "DELETE", "/repos/o/r/issues/1/labels/UI", "")
	wantStatus(t, removed, 200)
	if fmt.Sprint(names(removed)) != "[agent:ready bug high]" {
		t.Errorf("after removing: %s", removed.body)
	}
	absent := call(t, s, "DELETE", "/repos/o/r/issues/1/labels/ui", "")
	wantStatus(t, absent, 404)
	if string(absent.body) != `{"message":"Label does not exist","documentation_url":"https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue","status":"404"}` {
		t.Errorf("absent label body %s", absent.body)
	}

	created := call(t, s, "POST", "/repos/o/r/labels", `{"name":"needs human","color":"F29513","description":"a person decides"}`)
	wantStatus(t, created, 201)
	if m := created.object(t); m["color"] != "f29513" || m["description"] != "a person decides" && m["description"] != nil ||
		created.header.Get("Location") != s.URL()+"/repos/o/r/labels/needs%20human" {
		t.Errorf("created %s, Location %q", created.body, created.header.Get("Location"))
	}
	dup := call(t, s, "POST", "/repos/o/r/labels", `{"name":"Needs Human"}`)
	wantStatus(t, dup, 422)
	if string(dup.body) != `{"message":"Validation Failed","errors":[{"resource":"Label","field":"name","code":"already_exists"}],"documentation_url":"https://docs.github.com/rest/issues/labels#create-a-label","status":"422"}` {
		t.Errorf("duplicate: %s", dup.body)
	}
	if r := call(t, s, "POST", "/repos/o/r/labels", `{"name":"x","color":"red"}`); r.status != 422 {
		t.Errorf("bad color: %d %s", r.status, r.body)
	}
	if got := s.Issue("o/r", 1).Labels; fmt.Sprint(got) != "[agent:ready bug high]" {
		t.Errorf("snapshot labels %v", got)
	}
}

func TestCreateAndUpdateIssue(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})

	created := call(t, s, "POST", "/repos/o/r/issues", `{"title":"Found a bug","body":"It breaks.","labels":["bug",{"name":"ui"}]}`)
	wantStatus(t, created, 201)
	if created.header.Get("Location") != s.URL()+"/repos/o/r/issues/1" {
		t.Errorf("Location %q", created.header.Get("Location"))
	}
	if m := created.object(t); m["state"] != "open" || m["body"] != "It breaks." || m["author_association"] != "OWNER" {
		t.Errorf("created %s", created.body)
	}
	missing := call(t, s, "POST", "/repos/o/r/issues", `{"body":"no title"}`)
	wantStatus(t, missing, 422)
	if m := missing.object(t); m["message"] != "Invalid request.\n\n\"title\" wasn't supplied." {
		t.Errorf("missing title: %s", missing.body)
	}
	wantStatus(t, call(t, s, "POST", "/repos/o/r/issues", `{"title":42}`), 201)
	wantStatus(t, call(t, s, "POST", "/repos/o/r/issues", `not json`), 400)

	c.Advance(time.Minute)
	closed := call(t, s, "PATCH", "/repos/o/r/issues/1", `{"state":"closed","state_reason":"not_planned"}`)
	wantStatus(t, closed, 200)
	m := closed.object(t)
	if m["state"] != "closed" || m["state_reason"] != "not_planned" || m["closed_at"] != "2026-12-06T10:01:00Z" || m["updated_at"] != "2026-12-06T10:01:00Z" {
		t.Errorf("closed %s", closed.body)
	}
	if by, _ := m["closed_by"].(map[string]any); by["login"] != "octocat" {
		t.Errorf("closed_by %v", m["closed_by"])
	}
	snap := s.Issue("o/r", 1)
	if snap.State != "closed" || snap.StateReason != "not_planned" || snap.ClosedAt == nil || !snap.ClosedAt.Equal(start.Add(time.Minute)) {
		t.Errorf("snapshot %+v", snap)
	}

	c.Advance(time.Minute)
	reopened := call(t, s, "PATCH", "/repos/o/r/issues/1", `{"state":"open"}`)
	wantStatus(t, reopened, 200)
	if m := reopened.object(t); m["state"] != "open" || m["state_reason"] != "reopened" || m["closed_at"] != nil || m["closed_by"] != nil {
		t.Errorf("reopened %s", reopened.body)
	}
	completed := call(t, s, "PATCH", "/repos/o/r/issues/1", `{"state":"closed"}`)
	if m := completed.object(t); m["state_reason"] != "completed" {
		t.Errorf("closing without a reason gives %v", m["state_reason"])
	}

	for _, tt := range []struct{ body, field string }{
		{`{"state":"done"}`, "state"},
		{`{"state":"closed","state_reason":"wontfix"}`, "state_reason"},
		{`{"state":"open","state_reason":"completed"}`, "state_reason"},
	} {
		before := s.Issue("o/r", 1)
		r := call(t, s, "PATCH", "/repos/o/r/issues/1", tt.body)
		wantStatus(t, r, 422)
		var v struct {
			Message string
			Errors  []struct{ Resource, Field, Code string }
		}
		r.decode(t, &v)
		if v.Message != "Validation Failed" || len(v.Errors) != 1 || v.Errors[0].Field != tt.field || v.Errors[0].Code != "invalid" || v.Errors[0].Resource != "Issue" {
			t.Errorf("%s: %s", tt.body, r.body)
		}
		if after := s.Issue("o/r", 1); after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("%s changed the issue", tt.body)
		}
	}

	edited := call(t, s, "PATCH", "/repos/o/r/issues/1", `{"title":"Renamed","body":null,"labels":["agent"]}`)
	wantStatus(t, edited, 200)
	snap = s.Issue("o/r", 1)
	if snap.Title != "Renamed" || snap.Body != "" || fmt.Sprint(snap.Labels) != "[agent]" {
		t.Errorf("after edit %+v", snap)
	}
	if m := edited.object(t); m["body"] != nil {
		t.Errorf("cleared body is %v, want null", m["body"])
	}
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/a", githubdouble.RepoOptions{})
	s.AddRepo("o/b", githubdouble.RepoOptions{})
	blocked := s.CreateIssue("o/a", githubdouble.IssueInput{Title: "blocked"})
	first := s.CreateIssue("o/b", githubdouble.IssueInput{Title: "first blocker"})
	second := s.CreateIssue("o/a", githubdouble.IssueInput{Title: "second blocker"})
	pr := s.CreatePullRequest("o/a", githubdouble.IssueInput{Title: "a pull request"})
	c.Advance(time.Minute)

	summary := func(repo string, n int) [4]int {
		var raw struct {
			Summary map[string]int `json:"issue_dependencies_summary"`
		}
		r := call(t, s, "GET", "/repos/"+repo+"/issues/"+strconv.Itoa(n), "")
		wantStatus(t, r, 200)
		r.decode(t, &raw)
		return [4]int{raw.Summary["blocked_by"], raw.Summary["blocking"], raw.Summary["total_blocked_by"], raw.Summary["total_blocking"]}
	}

	add := call(t, s, "POST", "/repos/o/a/issues/1/dependencies/blocked_by", fmt.Sprintf(`{"issue_id":%d}`, first.ID))
	wantStatus(t, add, 201)
	if m := add.object(t); m["number"] != float64(1) || add.header.Get("Location") != s.URL()+"/repos/o/a/issues/1/dependencies/blocked_by" {
		t.Errorf("added %s, Location %q", add.body, add.header.Get("Location"))
	}
	wantStatus(t, call(t, s, "POST", "/repos/o/a/issues/1/dependencies/blocked_by", fmt.Sprintf(`{"issue_id":%d}`, second.ID)), 201)

	for _, tt := range []struct{ name, body string }{
		{"a number, not an id", `{"issue_id":3}`},
		{"itself", fmt.Sprintf(`{"issue_id":%d}`, blocked.ID)},
		{"twice", fmt.Sprintf(`{"issue_id":%d}`, first.ID)},
		{"a pull request", fmt.Sprintf(`{"issue_id":%d}`, pr.ID)},
		{"no issue_id", `{}`},
		{"a string", `{"issue_id":"3"}`},
	} {
		if r := call(t, s, "POST", "/repos/o/a/issues/1/dependencies/blocked_by", tt.body); r.status != 422 {
			t.Errorf("%s: %d %s", tt.name, r.status, r.body)
		}
	}

	if got := summary("o/a", 1); got != [4]int{2, 0, 2, 0} {
		t.Errorf("blocked summary %v", got)
	}
	if got := summary("o/b", 1); got != [4]int{0, 1, 0, 1} {
		t.Errorf("blocker summary %v", got)
	}
	list := call(t, s, "GET", "/repos/o/a/issues/1/dependencies/blocked_by", "")
	var items []struct {
		ID            int64  `json:"id"`
		RepositoryURL string `json:"repository_url"`
	}
	list.decode(t, &items)
	if len(items) != 2 || items[0].ID != first.ID || items[0].RepositoryURL != s.URL()+"/repos/o/b" || items[1].ID != second.ID {
		t.Errorf("blocked_by %s", list.body)
	}
	if got := numbers(t, call(t, s, "GET", "/repos/o/b/issues/1/dependencies/blocking", "")); !slices.Equal(got, []int{1}) {
		t.Errorf("blocking %v", got)
	}

	s.Close("o/b", 1, "completed")
	if got := summary("o/a", 1); got != [4]int{1, 0, 2, 0} {
		t.Errorf("after a blocker closed: %v (blocked_by counts open blockers only)", got)
	}
	if got := summary("o/a", 2); got != [4]int{0, 1, 0, 1} {
		t.Errorf("open blocker: %v", got)
	}
	if got := summary("o/b", 1); got != [4]int{0, 1, 0, 1} {
		t.Errorf("closed blocker: %v", got)
	}
	s.Close("o/a", 1, "completed")
	if got := summary("o/b", 1); got != [4]int{0, 0, 0, 1} {
		t.Errorf("blocker of a closed issue: %v (blocking counts open blocked issues)", got)
	}
	s.Reopen("o/a", 1)

	removed := call(t, s, "DELETE", fmt.Sprintf("/repos/o/a/issues/1/dependencies/blocked_by/%d", first.ID), "")
	wantStatus(t, removed, 200)
	wantStatus(t, call(t, s, "DELETE", fmt.Sprintf("/repos/o/a/issues/1/dependencies/blocked_by/%d", first.ID), ""), 404)
	if got := s.Issue("o/a", 1).BlockedBy; fmt.Sprint(got) != "[{o/a 2}]" {
		t.Errorf("snapshot blocked by %v", got)
	}
	if got := s.Issue("o/a", 1).UpdatedAt; !got.Equal(start.Add(time.Minute)) {
		t.Errorf("updated_at %v: dependency changes moved it (only the close and reopen should)", got)
	}
}

func TestComments(t *testing.T) {
	t.Parallel()
	s, c := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	s.CreateIssue("o/r", githubdouble.IssueInput{Title: "t"})
	s.AddComment("o/r", 1, "hubot", "from a bot")
	c.Advance(time.Minute)

	created := call(t, s, "POST", "/repos/o/r/issues/1/comments", `{"body":"Me too"}`)
	wantStatus(t, created, 201)
	m := created.object(t)
	id := int64(m["id"].(float64))
	if m["body"] != "Me too" || m["created_at"] != "2026-12-06T10:01:00Z" || m["issue_url"] != s.URL()+"/repos/o/r/issues/1" ||
		m["html_url"] != fmt.Sprintf("https://github.com/o/r/issues/1#issuecomment-%d", id) || created.header.Get("Location") != m["url"] {
		t.Errorf("created %s (Location %q)", created.body, created.header.Get("Location"))
	}
	if got := s.Issue("o/r", 1); len(got.Comments) != 2 || !got.UpdatedAt.Equal(start.Add(time.Minute)) {
		t.Errorf("issue after comment %+v", got)
	}
	if r := call(t, s, "POST", "/repos/o/r/issues/1/comments", `{}`); r.status != 422 {
		t.Errorf("no body: %d", r.status)
	}
	if r := call(t, s, "POST", "/repos/o/r/issues/1/comments", `{"body":"  "}`); r.status != 422 {
		t.Errorf("blank body: %d", r.status)
	}

	var all []struct {
		Body string
		User struct{ Login string }
	}
	call(t, s, "GET", "/repos/o/r/issues/1/comments", "").decode(t, &all)
	if len(all) != 2 || all[0].Body != "from a bot" || all[0].User.Login != "hubot" || all[1].Body != "Me too" {
		t.Errorf("comments %+v", all)
	}
	recent := call(t, s, "GET", "/repos/o/r/issues/1/comments?since=2026-12-06T10:00:30Z", "")
	var bodies []struct{ Body string }
	recent.decode(t, &bodies)
	if len(bodies) != 1 || bodies[0].Body != "Me too" {
		t.Errorf("since: %s", recent.body)
	}
	paged := call(t, s, "GET", "/repos/o/r/issues/1/comments?per_page=1", "")
	if l := links(t, paged); !strings.HasSuffix(l["next"], "/issues/1/comments?per_page=1&page=2") || !strings.Contains(l["next"], "/repositories/") {
		t.Errorf("comment links %v", l)
	}
	var issue struct{ Comments int }
	call(t, s, "GET", "/repos/o/r/issues/1", "").decode(t, &issue)
	if issue.Comments != 2 {
		t.Errorf("comments count %d", issue.Comments)
	}
}

func TestIssuesDisabled(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{IssuesDisabled: true})
	s.CreatePullRequest("o/r", githubdouble.IssueInput{Title: "pr"})
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/repos/o/r/issues", ""},
		{"POST", "/repos/o/r/issues", `{"title":"x"}`},
		{"GET", "/repos/o/r/issues/1", ""},
		{"PATCH", "/repos/o/r/issues/1", `{"state":"closed"}`},
		{"POST", "/repos/o/r/issues/1/comments", `{"body":"x"}`},
		{"GET", "/repos/o/r/issues/1/dependencies/blocked_by", ""},
	} {
		r := call(t, s, tt.method, tt.path, tt.body)
		wantStatus(t, r, 410)
		if m := r.object(t); m["message"] != "Issues are disabled for this repo" || m["status"] != "410" {
			t.Errorf("%s %s: %s", tt.method, tt.path, r.body)
		}
	}
	repo := call(t, s, "GET", "/repos/o/r", "")
	if m := repo.object(t); m["has_issues"] != false {
		t.Errorf("has_issues %v", m["has_issues"])
	}
	wantStatus(t, call(t, s, "POST", "/repos/o/r/labels", `{"name":"x"}`), 201)
}

func TestRedirectAndFail(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/new", githubdouble.RepoOptions{})
	s.Redirect("/repos/o/old", "https://elsewhere.example/repos/o/new")
	r := call(t, s, "GET", "/repos/o/old/issues?state=all&per_page=100", "")
	wantStatus(t, r, 301)
	if loc := r.header.Get("Location"); loc != "https://elsewhere.example/repos/o/new/issues?state=all&per_page=100" {
		t.Errorf("Location %q", loc)
	}
	if m := r.object(t); m["message"] != "Moved Permanently" || m["url"] != r.header.Get("Location") {
		t.Errorf("body %s", r.body)
	}
	s.Redirect("/repos/o/old", "")
	wantStatus(t, call(t, s, "GET", "/repos/o/old/issues", ""), 404)

	s.Fail("/repos/o/new/issues", 502)
	if r := call(t, s, "GET", "/repos/o/new/issues", ""); r.status != 502 || r.header.Get("X-RateLimit-Limit") == "" {
		t.Errorf("failed: %d %v", r.status, r.header)
	}
	wantStatus(t, call(t, s, "GET", "/repos/o/new", ""), 200)
	s.Fail("/repos/o/new/issues", 0)
	wantStatus(t, call(t, s, "GET", "/repos/o/new/issues", ""), 200)
}

func TestPathPrefix(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{PathPrefix: "/api/v3", WebHost: "ghe.example.com"})
	repo := s.AddRepo("o/r", githubdouble.RepoOptions{})
	for range 3 {
		s.CreateIssue("o/r", githubdouble.IssueInput{Title: "t"})
	}
	if !strings.HasSuffix(s.URL(), "/api/v3") {
		t.Fatalf("URL %q", s.URL())
	}
	r := call(t, s, "GET", "/repos/o/r/issues?per_page=1", "")
	wantStatus(t, r, 200)
	if next := links(t, r)["next"]; next != s.URL()+"/repositories/"+strconv.FormatInt(repo.ID, 10)+"/issues?per_page=1&page=2" {
		t.Errorf("next %q", next)
	}
	var raw []map[string]any
	r.decode(t, &raw)
	if raw[0]["url"] != s.URL()+"/repos/o/r/issues/3" || raw[0]["html_url"] != "https://ghe.example.com/o/r/issues/3" {
		t.Errorf("urls %v %v", raw[0]["url"], raw[0]["html_url"])
	}
	root := strings.TrimSuffix(s.URL(), "/api/v3")
	wantStatus(t, call(t, s, "GET", root+"/repos/o/r", ""), 404)
	reqs := s.Requests()
	if reqs[0].Path != "/repos/o/r/issues?per_page=1" {
		t.Errorf("recorded path %q", reqs[0].Path)
	}
}

func TestWatchAndRequests(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	events := s.Watch()
	call(t, s, "GET", "/repos/o/r", "")
	call(t, s, "GET", "/nope", "")
	for i, want := range []string{"/repos/o/r 200", "/nope 404"} {
		ev := <-events
		if got := ev.Path + " " + strconv.Itoa(ev.Status); got != want || !ev.At.Equal(start) {
			t.Errorf("event %d: %+v, want %s", i, ev, want)
		}
	}
	s.ResetRequests()
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests after reset", n)
	}
}

// TestConcurrentUse runs requests and world changes at once, for the race
// detector.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, githubdouble.Options{})
	s.AddRepo("o/r", githubdouble.RepoOptions{})
	events := s.Watch()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				call(t, s, "GET", "/repos/o/r/issues?state=all", "")
				call(t, s, "POST", "/repos/o/r/issues", `{"title":"x","labels":["a"]}`)
			}
		})
	}
	for i := range 40 {
		n := s.CreateIssue("o/r", githubdouble.IssueInput{Title: "y"}).Number
		s.AddLabels("o/r", n, "b")
		if i%2 == 0 {
			s.Close("o/r", n, "not_planned")
		}
	}
	wg.Wait()
	if got := len(s.Requests()); got != 8*20*2 {
		t.Errorf("%d requests recorded", got)
	}
	for range 8 * 20 * 2 {
		<-events
	}
	var all []struct{ Number int }
	call(t, s, "GET", "/repos/o/r/issues?state=all&per_page=100&page=3", "").decode(t, &all)
	if len(all) != 0 {
		t.Errorf("page 3 of 200 issues has %d", len(all))
	}
}

// BenchmarkListPage is the driver benchmark's look: 10 repositories of
// 100 labelled issues, each listed a page of 100 at a time.
func BenchmarkListPage(b *testing.B) {
	for _, tt := range []struct {
		name    string
		between func(s *githubdouble.Server, n int)
	}{
		{"unchanged", func(*githubdouble.Server, int) {}},
		{"changed", func(s *githubdouble.Server, n int) { s.SetTitle("o/r0", 1, strconv.Itoa(n)) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			s := githubdouble.New(githubdouble.Options{RateLimit: 1 << 40})
			for r := range 10 {
				name := fmt.Sprintf("o/r%d", r)
				s.AddRepo(name, githubdouble.RepoOptions{})
				for i := range 100 {
					s.CreateIssue(name, githubdouble.IssueInput{Title: fmt.Sprint("issue ", i), Body: "body", Labels: []string{"agent", "ready"}})
				}
			}
			h := s.Handler()
			reqs := make([]*http.Request, 10)
			for r := range reqs {
				reqs[r], _ = http.NewRequest("GET", fmt.Sprintf("http://api.test/repos/o/r%d/issues?labels=agent&per_page=100", r), nil)
				reqs[r].Header.Set("Authorization", "Bearer "+s.Token())
			}
			b.ResetTimer()
			for n := range b.N {
				tt.between(s, n)
				w := &discard{header: http.Header{}}
				h.ServeHTTP(w, reqs[n%10])
				if w.status != 200 {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

// discard is a ResponseWriter that keeps only the status.
type discard struct {
	header http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(status int)      { d.status = status }
