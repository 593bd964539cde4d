package devhub

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

type hub struct {
	t     *testing.T
	url   string
	token string
}

func start(t *testing.T, s *Server) *hub {
	t.Helper()
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &hub{t: t, url: ts.URL, token: s.Token}
}

// do sends a request and returns the status and body.
func (h *hub) do(method, path, body string, header ...string) (int, string, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

const planA = `{"id":"wp1","repo":"net-kingdom","status":"active","tasks":[
 {"id":"A","title":"first","status":"todo","repo":"net-kingdom","depends_on":[],"priority":1},
 {"id":"B","title":"second","status":"todo","repo":"railiance","depends_on":["A"],"priority":2}]}`

func workplans(t *testing.T, body string) []contract.Workplan {
	t.Helper()
	var res struct{ Workplans []contract.Workplan }
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return res.Workplans
}

// Workplans: put, read with an ETag (304 when nothing changed), patch a task
// (its revision and its workplan's change, the other task's stays).
func TestWorkplansRevisionsAndETags(t *testing.T) {
	h := start(t, &Server{})
	if code, body, _ := h.do("PUT", "/v1/workplans/wp1", planA); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	code, body, hdr := h.do("GET", "/v1/workplans", "")
	wp := workplans(t, body)
	if code != 200 || len(wp) != 1 || len(wp[0].Tasks) != 2 || wp[0].Revision == "" {
		t.Fatalf("get: %d %s", code, body)
	}
	etag := hdr.Get("ETag")
	if code, _, _ := h.do("GET", "/v1/workplans", "", "If-None-Match", etag); code != http.StatusNotModified {
		t.Errorf("unchanged: %d, want 304", code)
	}
	if code, body, _ := h.do("PATCH", "/v1/tasks/A", `{"status":"done"}`); code != 200 {
		t.Fatalf("patch: %d %s", code, body)
	}
	code, body, _ = h.do("GET", "/v1/workplans", "", "If-None-Match", etag)
	after := workplans(t, body)
	if code != 200 || after[0].Tasks[0].Status != "done" || after[0].Tasks[0].Revision == wp[0].Tasks[0].Revision ||
		after[0].Revision == wp[0].Revision || after[0].Tasks[1].Revision != wp[0].Tasks[1].Revision {
		t.Errorf("after the patch: %d %s", code, body)
	}
	// The same plan put again keeps unchanged tasks' revisions.
	h.do("PUT", "/v1/workplans/wp1", planA)
	_, body, _ = h.do("GET", "/v1/workplans", "")
	if again := workplans(t, body); again[0].Tasks[1].Revision != wp[0].Tasks[1].Revision {
		t.Errorf("an unchanged task got a new revision: %s", body)
	}
}

// Bad requests get a 400 with a reason, never a crash or a half change.
func TestBadRequestsAreRefusedWithAReason(t *testing.T) {
	h := start(t, &Server{})
	for _, c := range []struct{ method, path, body, want string }{
		{"PUT", "/v1/workplans/wp1", `{"id":"wp1",`, "malformed JSON"},
		{"PUT", "/v1/workplans/wp1", `{"id":"wp1","repo":"r","status":"sleeping","tasks":[]}`, "workplan status"},
		{"PUT", "/v1/workplans/wp1", `{"id":"wp2","repo":"r","status":"active","tasks":[]}`, "not the path's"},
		{"PUT", "/v1/workplans/wp1", `{"id":"wp1","repo":"r","status":"active","tasks":[],"colour":"red"}`, "unknown field"},
		{"PUT", "/v1/workplans/wp1", `{"id":"wp1","repo":"r\u001b[2J","status":"active","tasks":[]}`, "repo"},
		{"PATCH", "/v1/tasks/A", `{"status":"finished"}`, "not one of"},
		{"POST", "/v1/messages", `{"to_repo":"","from":"x"}`, "to_repo"},
		{"POST", "/v1/checkpoints", `{"repo":"r","lease_id":"L","summary":"  "}`, "summary"},
		{"POST", "/v1/progress", `{"receipts":[{"kind":"x"}]}`, "no id"},
		{"GET", "/v1/checkpoints?since=abc", ``, "cursor"},
	} {
		code, body, _ := h.do(c.method, c.path, c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %s (want 400 with %q)", c.method, c.path, c.body, code, body, c.want)
		}
	}
	if code, _, _ := h.do("PATCH", "/v1/tasks/nope", `{"status":"done"}`); code != 404 {
		t.Errorf("patch of an unknown task: %d", code)
	}
	if _, body, _ := h.do("GET", "/v1/workplans", ""); len(workplans(t, body)) != 0 {
		t.Errorf("a refused request left something: %s", body)
	}
}

// Messages, checkpoints and progress: unread filtering, reading, cursors,
// receipts stored once by id.
func TestMessagesCheckpointsAndProgress(t *testing.T) {
	h := start(t, &Server{})
	h.do("POST", "/v1/messages", `{"id":"m1","to_repo":"net-kingdom","from":"railiance","subject":"look","requests_action":true}`)
	h.do("POST", "/v1/messages", `{"to_repo":"net-kingdom","from":"railiance","subject":"fyi"}`)
	if code, _, _ := h.do("POST", "/v1/messages", `{"id":"m1","to_repo":"x","from":"y"}`); code != http.StatusConflict {
		t.Errorf("a second message m1: %d", code)
	}
	h.do("POST", "/v1/messages/m1/read", "")
	_, body, _ := h.do("GET", "/v1/messages?unread=true", "")
	if strings.Contains(body, `"m1"`) || !strings.Contains(body, `"fyi"`) {
		t.Errorf("unread messages: %s", body)
	}
	h.do("POST", "/v1/checkpoints", `{"repo":"net-kingdom","lease_id":"L1","summary":"half"}`)
	_, body, _ = h.do("GET", "/v1/checkpoints", "")
	var cps struct {
		Checkpoints []contract.Checkpoint
		Cursor      string
	}
	json.Unmarshal([]byte(body), &cps)
	if len(cps.Checkpoints) != 1 || cps.Cursor != "1" {
		t.Fatalf("checkpoints: %s", body)
	}
	if _, body, _ = h.do("GET", "/v1/checkpoints?since="+cps.Cursor, ""); !strings.Contains(body, `"checkpoints":[]`) {
		t.Errorf("after the cursor: %s", body)
	}
	for range 2 {
		if _, body, _ := h.do("POST", "/v1/progress", `{"receipts":[{"id":"r1","kind":"lease.offered"},{"id":"r2","kind":"wake.sent"}]}`); !strings.Contains(body, `"accepted"`) {
			t.Errorf("progress: %s", body)
		}
	}
	_, body, _ = h.do("GET", "/v1/progress", "")
	if strings.Count(body, `"id"`) != 2 {
		t.Errorf("receipts stored more than once: %s", body)
	}
}

// With a token, every route needs it.
func TestTokenIsRequired(t *testing.T) {
	h := start(t, &Server{Token: "s3cret"})
	if code, _, _ := h.do("GET", "/v1/workplans", ""); code != 200 {
		t.Errorf("with the token: %d", code)
	}
	h.token = "wrong"
	if code, _, _ := h.do("GET", "/v1/workplans", ""); code != http.StatusUnauthorized {
		t.Errorf("with another token: %d", code)
	}
	h.token = ""
	if code, _, _ := h.do("POST", "/v1/progress", `{"receipts":[]}`); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
}

// The data file survives a restart; concurrent writers lose nothing.
func TestPersistenceAndConcurrentWrites(t *testing.T) {
	data := filepath.Join(t.TempDir(), "hub.json")
	h := start(t, &Server{Data: data})
	h.do("PUT", "/v1/workplans/wp1", planA)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.do("POST", "/v1/messages", fmt.Sprintf(`{"id":"m%d","to_repo":"net-kingdom","from":"railiance"}`, i))
			h.do("PATCH", "/v1/tasks/B", `{"needs_human":true}`)
		}()
	}
	wg.Wait()
	again := start(t, &Server{Data: data})
	_, body, _ := again.do("GET", "/v1/messages", "")
	if n := strings.Count(body, `"to_repo"`); n != 20 {
		t.Errorf("%d messages after a restart, want 20", n)
	}
	_, body, _ = again.do("GET", "/v1/workplans", "")
	if wp := workplans(t, body); len(wp) != 1 || !wp[0].Tasks[1].NeedsHuman {
		t.Errorf("workplans after a restart: %s", body)
	}
	if err := os.WriteFile(data, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Server{Data: data}).Open(); err == nil || !strings.Contains(err.Error(), "not a State Hub data file") {
		t.Errorf("a broken data file: %v", err)
	}
}

// The event stream hints at each change.
func TestEventsHintAtChanges(t *testing.T) {
	h := start(t, &Server{})
	resp, err := http.Get(h.url + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.do("PUT", "/v1/workplans/wp1", planA)
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"kind":"workplan"`) || !strings.Contains(line, `"id":"wp1"`) {
				t.Errorf("event %q", line)
			}
			return
		}
	}
}

// A message's body is served by GET /v1/messages/{id} only, never in the
// list; a body over 64 KiB is refused, and one of 64 KiB is kept whole.
func TestMessageBodies(t *testing.T) {
	h := start(t, &Server{})
	if code, body, _ := h.do("POST", "/v1/messages", `{"id":"m1","to_repo":"net-kingdom","from":"railiance","subject":"look","body":"line one\nline two"}`); code != 200 || strings.Contains(body, "line one") {
		t.Fatalf("post: %d %s", code, body)
	}
	code, body, _ := h.do("GET", "/v1/messages/m1", "")
	var m struct {
		contract.Message
		Body *string `json:"body"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || code != 200 || m.Body == nil || *m.Body != "line one\nline two" || m.Subject != "look" || m.Revision == "" {
		t.Errorf("get m1: %d %s", code, body)
	}
	if _, body, _ := h.do("GET", "/v1/messages", ""); strings.Contains(body, "line one") || strings.Contains(body, `"body"`) {
		t.Errorf("the list carries bodies: %s", body)
	}
	if code, _, _ := h.do("GET", "/v1/messages/nope", ""); code != http.StatusNotFound {
		t.Errorf("an unknown message: %d", code)
	}
	full := strings.Repeat("é", contract.MaxMessageBody/2)
	if code, body, _ := h.do("POST", "/v1/messages", `{"id":"big","to_repo":"a","from":"b","body":"`+full+`"}`); code != 200 {
		t.Errorf("a body of 64 KiB: %d %s", code, body)
	}
	if code, body, _ := h.do("POST", "/v1/messages", `{"id":"bigger","to_repo":"a","from":"b","body":"`+full+`x"}`); code != 400 || !strings.Contains(body, "at most 65536") {
		t.Errorf("a body over 64 KiB: %d %s", code, body)
	}
	if code, _, _ := h.do("GET", "/v1/messages/bigger", ""); code != http.StatusNotFound {
		t.Errorf("the refused message was kept: %d", code)
	}
	// A message without a body has an empty one.
	h.do("POST", "/v1/messages", `{"id":"m2","to_repo":"a","from":"b"}`)
	if _, body, _ := h.do("GET", "/v1/messages/m2", ""); !strings.Contains(body, `"body":""`) {
		t.Errorf("no body: %s", body)
	}
}

// PATCH /v1/tasks/{id} takes a note with the status: the task keeps the
// last one and serves it (readers ignore it); a note that is not one line
// of plain text, or too long, is refused and changes nothing. Notes and
// bodies survive a restart.
func TestTaskNotes(t *testing.T) {
	data := filepath.Join(t.TempDir(), "hub.json")
	h := start(t, &Server{Data: data})
	h.do("PUT", "/v1/workplans/wp1", planA)
	if code, body, _ := h.do("PATCH", "/v1/tasks/A", `{"status":"blocked","note":"waiting for the deploy key"}`); code != 200 || !strings.Contains(body, `"note":"waiting for the deploy key"`) {
		t.Fatalf("patch: %d %s", code, body)
	}
	h.do("PATCH", "/v1/tasks/A", `{"status":"done","note":"merged"}`)
	for _, bad := range []string{`{"note":"two\nlines"}`, `{"note":"` + strings.Repeat("x", 1025) + `"}`, `{"note":"esc \u001b[2J"}`} {
		if code, body, _ := h.do("PATCH", "/v1/tasks/A", bad); code != 400 || !strings.Contains(body, "note") {
			t.Errorf("%.40s: %d %s", bad, code, body)
		}
	}
	h.do("POST", "/v1/messages", `{"id":"m1","to_repo":"net-kingdom","from":"railiance","body":"kept"}`)
	again := start(t, &Server{Data: data})
	_, body, _ := again.do("GET", "/v1/workplans", "")
	if !strings.Contains(body, `"note":"merged"`) || workplans(t, body)[0].Tasks[0].Status != "done" {
		t.Errorf("after a restart: %s", body)
	}
	// A workplan read back, note and all, can be put again as it is.
	var res struct {
		Workplans []json.RawMessage `json:"workplans"`
	}
	json.Unmarshal([]byte(body), &res)
	if code, body, _ := again.do("PUT", "/v1/workplans/wp1", string(res.Workplans[0])); code != 200 || !strings.Contains(body, `"note":"merged"`) {
		t.Errorf("put back: %d %s", code, body)
	}
	if _, body, _ := again.do("GET", "/v1/messages/m1", ""); !strings.Contains(body, `"body":"kept"`) {
		t.Errorf("the body after a restart: %s", body)
	}
}

// defaultPolicy is the built-in policy profile as the observation asks it.
type defaultPolicy struct{}

func (defaultPolicy) Known(c string) bool { return slices.Contains(policy.Known, policy.Category(c)) }
func (defaultPolicy) RequiresHuman(c string) bool {
	return policy.Default().RequiresHuman(policy.Category(c))
}

// examples/workplan.json, which the docs load into the reference server,
// stays valid and says what they say: two repos, T-2 waits on T-1, T-3 stops
// at the destructive gate under the default policy.
func TestExampleWorkplan(t *testing.T) {
	b, err := os.ReadFile("../../../examples/workplan.json")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, &Server{})
	if code, body, _ := h.do("PUT", "/v1/workplans/WP-parser", string(b)); code != 200 {
		t.Fatalf("the example is refused: %d %s", code, body)
	}
	_, body, _ := h.do("GET", "/v1/workplans", "")
	obs := observe.Tasks(workplans(t, body), nil, defaultPolicy{})
	repos := map[string]bool{}
	for _, v := range obs.Tasks {
		repos[v.Repo] = true
	}
	t1, t2, t3 := obs.Tasks["T-1"], obs.Tasks["T-2"], obs.Tasks["T-3"]
	if len(repos) != 2 || !t1.Actionable || t1.Gate != "" || t2.Actionable || t2.Waiting != "dependency T-1 is todo" ||
		!t3.Actionable || t3.Gate != "destructive" {
		t.Errorf("the example's tasks: %+v", obs.Tasks)
	}
}

// A data file in a directory that does not exist yet (a first run's
// ~/.local/state) is made there, the directory private; one that cannot be
// made is an error at start.
func TestDataFileDirectoryIsMade(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "state", "deeper", "statehub.json")
	h := start(t, &Server{Data: data})
	h.do("PUT", "/v1/workplans/wp1", planA)
	if fi, err := os.Stat(filepath.Dir(data)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the data file's directory: %v %v", fi, err)
	}
	if b, err := os.ReadFile(data); err != nil || !strings.Contains(string(b), `"wp1"`) {
		t.Errorf("the data file: %s %v", b, err)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o600)
	if err := (&Server{Data: filepath.Join(dir, "file", "statehub.json")}).Open(); err == nil {
		t.Error("a data file under a regular file opened")
	}
}
