package githubdouble

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// page is the slice [lo, hi) of a list that one page answers.
type page struct{ lo, hi int }

// paginate applies per_page (default 30, at most 100: GitHub clamps
// larger values) and page (default 1) to a list of n items, and sets
// GitHub's Link header: absolute URLs of the /repositories/{id} form,
// carrying the request's other query parameters with page last, in the
// order prev, next, last, first, and none when everything fits on the
// first page.
func (c *call) paginate(q url.Values, n int) page {
	perPage := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	num := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		num = v
	}
	last := max(1, (n+perPage-1)/perPage)
	lo := min(n, (num-1)*perPage)
	p := page{lo: lo, hi: min(n, lo+perPage)}

	if last == 1 && num == 1 {
		return p
	}
	var kept []string
	for _, kv := range strings.Split(c.r.URL.RawQuery, "&") {
		if kv != "" && !strings.HasPrefix(kv, "page=") {
			kept = append(kept, kv)
		}
	}
	link := func(to int, rel string) string {
		query := strings.Join(append(slices.Clone(kept), "page="+strconv.Itoa(to)), "&")
		return "<" + c.base + "/repositories/" + strconv.FormatInt(c.repo.id, 10) + c.repoPath + "?" + query + `>; rel="` + rel + `"`
	}
	var links []string
	if num > 1 {
		links = append(links, link(num-1, "prev"))
	}
	if num < last {
		links = append(links, link(num+1, "next"), link(last, "last"))
	}
	if num > 1 {
		links = append(links, link(1, "first"))
	}
	c.a.header.Set("Link", strings.Join(links, ", "))
	return p
}

// addLabels is POST /repos/{owner}/{repo}/issues/{issue_number}/labels:
// the body is {"labels": [...]} or a bare array, of names or objects with
// a name; labels the repository lacks are made. It answers the issue's
// labels after the add.
func (c *call) addLabels(args []string) {
	i := c.issue(args, docAddLabels)
	if i == nil {
		return
	}
	raw := json.RawMessage(strings.TrimSpace(string(c.body)))
	var names []string
	if len(raw) > 0 {
		if !json.Valid(raw) {
			c.a.error(http.StatusBadRequest, "Problems parsing JSON", docAddLabels)
			return
		}
		if raw[0] == '{' {
			var obj struct {
				Labels json.RawMessage `json:"labels"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Labels == nil {
				c.a.invalidRequest(docAddLabels, `No subschema in "oneOf" matched.`)
				return
			}
			raw = obj.Labels
		}
		var ok bool
		// The description gives the object form minItems 1; an empty
		// bare array fits no branch either.
		if names, ok = labelNames(raw); !ok || len(names) == 0 {
			c.a.invalidRequest(docAddLabels, `No subschema in "oneOf" matched.`)
			return
		}
	}
	changed := false
	for _, name := range names {
		l, made := c.s.world.ensureLabel(c.repo, name, "")
		changed = i.addLabel(l) || made || changed
	}
	if changed {
		i.touch(c.now)
	}
	c.a.json(c.render().labels(c.repo, i.labels))
}

// removeLabel is DELETE .../issues/{issue_number}/labels/{name}: the
// remaining labels, or 404 "Label does not exist" when the label is not
// on the issue (GitHub's wording).
func (c *call) removeLabel(args []string) {
	i := c.issue(args, docRemoveLabel)
	if i == nil {
		return
	}
	if !i.removeLabel(args[2]) {
		c.a.error(http.StatusNotFound, "Label does not exist", docRemoveLabel)
		return
	}
	i.touch(c.now)
	c.a.json(c.render().labels(c.repo, i.labels))
}

// createLabel is POST /repos/{owner}/{repo}/labels: name required, color
// a six-digit hex code, a name taken in any case is already_exists.
func (c *call) createLabel(_ []string) {
	fields, ok := c.object(docCreateLabel)
	if !ok {
		return
	}
	var in struct {
		Name        *string `json:"name"`
		Color       string  `json:"color"`
		Description *string `json:"description"`
	}
	b, _ := json.Marshal(fields)
	if json.Unmarshal(b, &in) != nil {
		c.a.invalidRequest(docCreateLabel, "The label's name, color and description must be strings.")
		return
	}
	if in.Name == nil {
		c.a.invalidRequest(docCreateLabel, `"name" wasn't supplied.`)
		return
	}
	name := strings.TrimSpace(*in.Name)
	color := strings.ToLower(strings.TrimPrefix(in.Color, "#"))
	switch {
	case name == "":
		c.a.validationFailed(docCreateLabel, fieldError{Resource: "Label", Field: "name", Code: "missing_field"})
		return
	case in.Color != "" && !isHexColor(color):
		c.a.validationFailed(docCreateLabel, fieldError{Value: in.Color, Resource: "Label", Field: "color", Code: "invalid"})
		return
	case in.Description != nil && len([]rune(*in.Description)) > 100:
		c.a.validationFailed(docCreateLabel, fieldError{Resource: "Label", Field: "description", Code: "invalid"})
		return
	case c.repo.label(name) != nil:
		c.a.validationFailed(docCreateLabel, fieldError{Resource: "Label", Field: "name", Code: "already_exists"})
		return
	}
	l, _ := c.s.world.ensureLabel(c.repo, name, color)
	rd := c.render()
	out := rd.label(c.repo, l)
	c.a.status = http.StatusCreated
	c.a.header.Set("Location", out.URL)
	c.a.json(out)
}

func isHexColor(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// listComments is GET .../issues/{issue_number}/comments: ascending ID,
// since on updated_at, paginated.
func (c *call) listComments(args []string) {
	i := c.issue(args, docListComments)
	if i == nil {
		return
	}
	q := c.r.URL.Query()
	var picked []*comment
	if v := q.Get("since"); v != "" {
		since, ok := parseTimestamp(v)
		if !ok {
			c.a.validationFailed(docListComments, fieldError{Value: v, Resource: "IssueComment", Field: "since", Code: "invalid"})
			return
		}
		for _, cm := range i.comments {
			if !cm.updatedAt.Before(since) {
				picked = append(picked, cm)
			}
		}
	} else {
		picked = i.comments
	}
	p := c.paginate(q, len(picked))
	rd := c.render()
	out := make([]commentJSON, 0, p.hi-p.lo)
	for _, cm := range picked[p.lo:p.hi] {
		out = append(out, rd.comment(cm))
	}
	c.a.json(out)
}

// createComment is POST .../issues/{issue_number}/comments: body required
// and not blank; 201 with Location.
func (c *call) createComment(args []string) {
	i := c.issue(args, docCreateComment)
	if i == nil {
		return
	}
	fields, ok := c.object(docCreateComment)
	if !ok {
		return
	}
	raw, ok := c.required(docCreateComment, fields, "body")
	var body string
	if !ok || !c.decodeMember(docCreateComment, "body", raw, &body, "a string") {
		return
	}
	if strings.TrimSpace(body) == "" {
		c.a.validationFailed(docCreateComment, fieldError{Resource: "IssueComment", Field: "data", Code: "unprocessable", Message: "Body cannot be blank"})
		return
	}
	cm := c.s.world.addComment(i, c.s.world.me, "OWNER", body, c.now)
	out := c.render().comment(cm)
	c.a.status = http.StatusCreated
	c.a.header.Set("Location", out.URL)
	c.a.json(out)
}

// listBlockedBy is GET .../dependencies/blocked_by: every blocker, open or
// closed, in the order they were added.
func (c *call) listBlockedBy(args []string) {
	if i := c.issue(args, docListBlockedBy); i != nil {
		c.issuePage(i.blockedBy)
	}
}

// listBlocking is GET .../dependencies/blocking.
func (c *call) listBlocking(args []string) {
	if i := c.issue(args, docListBlocking); i != nil {
		c.issuePage(i.blocking)
	}
}

func (c *call) issuePage(is []*issue) {
	p := c.paginate(c.r.URL.Query(), len(is))
	c.issueList(is[p.lo:p.hi])
}

// issueList answers a JSON array of issues, reusing the page's last body
// and ETag when none of its issues changed, and each issue's last
// rendering otherwise.
func (c *call) issueList(is []*issue) {
	key := c.base + " " + c.rel + "?" + c.r.URL.RawQuery
	stamps := make([]issueStamp, len(is))
	for k, i := range is {
		stamps[k] = issueStamp{issue: i, rev: i.rev}
	}
	if p, ok := c.s.pages[key]; ok && slices.Equal(p.stamps, stamps) {
		c.a.raw(p.body)
		c.a.header.Set("ETag", p.etag)
		return
	}
	rd := c.render()
	var buf bytes.Buffer
	buf.WriteByte('[')
	for k, i := range is {
		if k > 0 {
			buf.WriteByte(',')
		}
		buf.Write(rd.issueBytes(i))
	}
	buf.WriteByte(']')
	body := buf.Bytes()
	tag := etagOf(body)
	if len(c.s.pages) >= 4096 {
		clear(c.s.pages) // a test walking many distinct queries; start again
	}
	c.s.pages[key] = pageAnswer{stamps: stamps, body: body, etag: tag}
	c.a.raw(body)
	c.a.header.Set("ETag", tag)
}

// addBlockedBy is POST .../dependencies/blocked_by with {"issue_id": N},
// N the blocking issue's id (not its number), in any repository. It
// answers 201 with the issue in the path.
func (c *call) addBlockedBy(args []string) {
	i := c.issue(args, docAddBlockedBy)
	if i == nil {
		return
	}
	fields, ok := c.object(docAddBlockedBy)
	if !ok {
		return
	}
	raw, ok := c.required(docAddBlockedBy, fields, "issue_id")
	var id int64
	if !ok || !c.decodeMember(docAddBlockedBy, "issue_id", raw, &id, "an integer") {
		return
	}
	b := c.s.world.issuesByID[id]
	refuse := func(code, message string) {
		c.a.validationFailed(docAddBlockedBy, fieldError{Value: id, Resource: "IssueDependency", Field: "issue_id", Code: code, Message: message})
	}
	switch {
	case b == nil:
		refuse("missing", "The blocking issue does not exist.")
		return
	case b == i:
		refuse("invalid", "An issue cannot be blocked by itself.")
		return
	case b.pull:
		refuse("invalid", "A pull request cannot block an issue.")
		return
	case !i.addBlockedBy(b):
		refuse("already_exists", "The dependency already exists.")
		return
	}
	rd := c.render()
	c.a.status = http.StatusCreated
	c.a.header.Set("Location", rd.repoAPI(c.repo)+"/issues/"+strconv.Itoa(i.number)+"/dependencies/blocked_by")
	c.a.raw(rd.issueBytes(i))
}

// removeBlockedBy is DELETE .../dependencies/blocked_by/{issue_id}: 200
// with the issue in the path, 404 when that issue is not a blocker.
func (c *call) removeBlockedBy(args []string) {
	i := c.issue(args, docRemoveBlocked)
	if i == nil {
		return
	}
	id, _ := strconv.ParseInt(args[3], 10, 64)
	b := c.s.world.issuesByID[id]
	if b == nil || !i.removeBlockedBy(b) {
		c.a.notFound(docRemoveBlocked)
		return
	}
	c.a.raw(c.render().issueBytes(i))
}
