package githubdouble

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// listIssues is GET /repos/{owner}/{repo}/issues (and its
// /repositories/{id} form): the filters, sort and pagination of the
// description's issues/list-for-repo, pull requests included.
func (c *call) listIssues(_ []string) {
	q := c.r.URL.Query()
	state := cmp.Or(q.Get("state"), "open")
	sortBy := cmp.Or(q.Get("sort"), "created")
	direction := cmp.Or(q.Get("direction"), "desc")
	bad := func(field, value string) {
		c.a.validationFailed(docListIssues, fieldError{Value: value, Resource: "Issue", Field: field, Code: "invalid"})
	}
	switch {
	case state != "open" && state != "closed" && state != "all":
		bad("state", state)
		return
	case sortBy != "created" && sortBy != "updated" && sortBy != "comments":
		bad("sort", sortBy)
		return
	case direction != "asc" && direction != "desc":
		bad("direction", direction)
		return
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, ok := parseTimestamp(v)
		if !ok {
			bad("since", v)
			return
		}
		since = t
	}
	var labels []string
	for _, l := range strings.Split(q.Get("labels"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			labels = append(labels, l)
		}
	}

	people := peopleFilter(q)
	var picked []*issue
	for _, i := range c.repo.issues {
		if (state != "all" && i.state != state) || i.updatedAt.Before(since) || !people(i) {
			continue
		}
		if !slices.ContainsFunc(labels, func(l string) bool { return !i.hasLabel(l) }) {
			picked = append(picked, i)
		}
	}
	key := func(i *issue) int64 {
		switch sortBy {
		case "updated":
			return i.updatedAt.Unix()
		case "comments":
			return int64(len(i.comments))
		}
		return i.createdAt.Unix()
	}
	// The number breaks ties, so the order is total and the same on
	// every request.
	slices.SortFunc(picked, func(a, b *issue) int {
		d := cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.number, b.number))
		if direction == "desc" {
			return -d
		}
		return d
	})
	page := c.paginate(q, len(picked))
	c.issueList(picked[page.lo:page.hi])
}

// peopleFilter is the list's creator, assignee, milestone, type and
// mentioned filters. The double has no assignees, milestones or issue
// types, so "none" keeps every issue and any other value keeps none.
func peopleFilter(q url.Values) func(*issue) bool {
	creator, mentioned := q.Get("creator"), q.Get("mentioned")
	none := false
	for _, name := range []string{"assignee", "milestone", "type"} {
		if v := q.Get(name); v != "" && v != "none" {
			none = true
		}
	}
	return func(i *issue) bool {
		return !none &&
			(creator == "" || strings.EqualFold(creator, i.author.login)) &&
			(mentioned == "" || mentions(i, mentioned))
	}
}

// mentions reports whether @login appears in the issue's body or comments.
func mentions(i *issue, login string) bool {
	texts := []string{i.body}
	for _, c := range i.comments {
		texts = append(texts, c.body)
	}
	at := "@" + strings.ToLower(login)
	for _, t := range texts {
		t = strings.ToLower(t)
		for k := strings.Index(t, at); k >= 0; {
			end := k + len(at)
			if end == len(t) || !(unicode.IsLetter(rune(t[end])) || unicode.IsDigit(rune(t[end])) || t[end] == '-') {
				return true
			}
			next := strings.Index(t[end:], at)
			if next < 0 {
				break
			}
			k = end + next
		}
	}
	return false
}

// parseTimestamp reads an ISO 8601 time as GitHub's since takes it:
// YYYY-MM-DDTHH:MM:SSZ (any offset, fractions allowed) or a date.
func parseTimestamp(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// createIssue is POST /repos/{owner}/{repo}/issues: title required,
// labels made in the repository when missing; 201 with Location.
func (c *call) createIssue(_ []string) {
	fields, ok := c.object(docCreateIssue)
	if !ok {
		return
	}
	raw, ok := c.required(docCreateIssue, fields, "title")
	if !ok {
		return
	}
	title, ok := stringOrInteger(raw)
	if !ok {
		c.a.invalidRequest(docCreateIssue, "For 'properties/title', "+string(raw)+" is not a string or integer.")
		return
	}
	if strings.TrimSpace(title) == "" {
		c.a.validationFailed(docCreateIssue, fieldError{Resource: "Issue", Field: "title", Code: "missing_field"})
		return
	}
	var body string
	if raw, ok := fields["body"]; ok && !isNull(raw) && !c.decodeMember(docCreateIssue, "body", raw, &body, "a string") {
		return
	}
	var labels []string
	if raw, ok := fields["labels"]; ok && !isNull(raw) {
		if labels, ok = labelNames(raw); !ok {
			c.a.invalidRequest(docCreateIssue, "For 'properties/labels', "+string(raw)+" is not an array of label names.")
			return
		}
	}
	i := c.s.world.createIssue(c.repo, title, body, labels, c.s.world.me, "OWNER", false, c.now)
	rd := c.render()
	c.a.status = http.StatusCreated
	c.a.header.Set("Location", rd.repoAPI(c.repo)+"/issues/"+strconv.Itoa(i.number))
	c.a.raw(rd.issueBytes(i))
}

// updateIssue is PATCH /repos/{owner}/{repo}/issues/{issue_number}. The
// whole body is checked before anything changes. state_reason is
// "ignored unless state is changed" (the description): closing takes it
// (completed by default), reopening makes it "reopened".
func (c *call) updateIssue(args []string) {
	i := c.issue(args, docUpdateIssue)
	if i == nil {
		return
	}
	fields, ok := c.object(docUpdateIssue)
	if !ok {
		return
	}
	invalid := func(field string, value any) {
		c.a.validationFailed(docUpdateIssue, fieldError{Value: value, Resource: "Issue", Field: field, Code: "invalid"})
	}

	title, setTitle := "", false
	if raw, ok := fields["title"]; ok && !isNull(raw) {
		if title, ok = stringOrInteger(raw); !ok {
			c.a.invalidRequest(docUpdateIssue, "For 'properties/title', "+string(raw)+" is not a string or integer.")
			return
		}
		if strings.TrimSpace(title) == "" {
			c.a.validationFailed(docUpdateIssue, fieldError{Resource: "Issue", Field: "title", Code: "missing_field"})
			return
		}
		setTitle = true
	}
	body, setBody := "", false
	if raw, ok := fields["body"]; ok {
		if !isNull(raw) && json.Unmarshal(raw, &body) != nil {
			c.a.invalidRequest(docUpdateIssue, "For 'properties/body', "+string(raw)+" is not a string or null.")
			return
		}
		setBody = true
	}
	state := ""
	if raw, ok := fields["state"]; ok {
		if json.Unmarshal(raw, &state) != nil || (state != "open" && state != "closed") {
			invalid("state", jsonValue(raw))
			return
		}
	}
	reason := ""
	if raw, ok := fields["state_reason"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &reason) != nil {
			invalid("state_reason", jsonValue(raw))
			return
		}
		switch reason {
		case "completed", "not_planned", "duplicate":
			if state == "open" {
				invalid("state_reason", reason)
				return
			}
		case "reopened":
			if state == "closed" {
				invalid("state_reason", reason)
				return
			}
		default:
			invalid("state_reason", reason)
			return
		}
	}
	if raw, ok := fields["duplicate_issue_id"]; ok && reason == "duplicate" && !isNull(raw) {
		var id int64
		if json.Unmarshal(raw, &id) != nil || c.s.world.issuesByID[id] == nil {
			c.a.validationFailed(docUpdateIssue, fieldError{Value: jsonValue(raw), Resource: "Issue", Field: "duplicate_issue_id", Code: "missing"})
			return
		}
	}
	var labels []string
	setLabels := false
	if raw, ok := fields["labels"]; ok && !isNull(raw) {
		if labels, ok = labelNames(raw); !ok {
			c.a.invalidRequest(docUpdateIssue, "For 'properties/labels', "+string(raw)+" is not an array of label names.")
			return
		}
		setLabels = true
	}

	changed := false
	if setTitle && title != i.title {
		i.title, changed = title, true
	}
	if setBody && body != i.body {
		i.body, changed = body, true
	}
	if setLabels {
		var want []*label
		for _, name := range labels {
			l, made := c.s.world.ensureLabel(c.repo, name, "")
			want = append(want, l)
			changed = changed || made
		}
		for _, l := range slices.Clone(i.labels) {
			if !slices.Contains(want, l) {
				i.removeLabel(l.name)
				changed = true
			}
		}
		for _, l := range want {
			changed = i.addLabel(l) || changed
		}
	}
	switch {
	case state == "closed" && i.state == "open":
		i.close(cmp.Or(reason, "completed"), c.s.world.me, c.now)
		changed = true
	case state == "open" && i.state == "closed":
		i.reopen(c.now)
		changed = true
	}
	if changed {
		i.touch(c.now)
	}
	c.a.raw(c.render().issueBytes(i))
}

// object reads the request body as a JSON object, answering GitHub's 400s
// when it is not one. An empty body is an empty object.
func (c *call) object(doc string) (map[string]json.RawMessage, bool) {
	fields := map[string]json.RawMessage{}
	b := bytes.TrimSpace(c.body)
	if len(b) == 0 {
		return fields, true
	}
	if !json.Valid(b) {
		c.a.error(http.StatusBadRequest, "Problems parsing JSON", doc)
		return nil, false
	}
	if b[0] != '{' {
		c.a.error(http.StatusBadRequest, "Body should be a JSON object", doc)
		return nil, false
	}
	if err := json.Unmarshal(b, &fields); err != nil {
		c.a.error(http.StatusBadRequest, "Problems parsing JSON", doc)
		return nil, false
	}
	return fields, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// required is a member the request body must carry, not null; without it
// the answer is GitHub's "wasn't supplied".
func (c *call) required(doc string, fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		c.a.invalidRequest(doc, `"`+name+`" wasn't supplied.`)
		return nil, false
	}
	return raw, true
}

// decodeMember reads a member of the request body into into; a value of
// another type is GitHub's "For 'properties/NAME', VALUE is not a KIND."
func (c *call) decodeMember(doc, name string, raw json.RawMessage, into any, kind string) bool {
	if json.Unmarshal(raw, into) != nil {
		c.a.invalidRequest(doc, "For 'properties/"+name+"', "+string(raw)+" is not "+kind+".")
		return false
	}
	return true
}

// jsonValue is a request value as the errors' value member echoes it.
func jsonValue(raw json.RawMessage) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
}

// stringOrInteger reads a title, which the description allows as a
// string or an integer.
func stringOrInteger(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&n) == nil {
		if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return n.String(), true
		}
	}
	return "", false
}

// labelNames reads a labels array whose items are names or objects with a
// name, as the description allows on create, update and add-labels.
func labelNames(raw json.RawMessage) ([]string, bool) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		var name string
		if json.Unmarshal(item, &name) != nil {
			var obj struct {
				Name *string `json:"name"`
			}
			if json.Unmarshal(item, &obj) != nil || obj.Name == nil {
				return nil, false
			}
			name = *obj.Name
		}
		if name = strings.TrimSpace(name); name == "" {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}
