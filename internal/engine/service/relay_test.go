package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// relayHub is a reference State Hub that can lose the routes an agent
// reaches through the engine, as another tracker may not have them.
type relayHub struct {
	url string
	// missing is the status the relayed routes answer in place of the
	// reference server (404 or 405); 0 serves them.
	missing atomic.Int32
	stop    func()
	t       *testing.T
}

func newRelayHub(t *testing.T, token string) *relayHub {
	s := &devhub.Server{Token: token}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	h := &relayHub{t: t}
	inner := s.Handler()
	ts, stop := testutil.HTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayed := r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/v1/tasks/") ||
			r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/read") ||
			r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/messages/")
		if code := h.missing.Load(); relayed && code != 0 && (code != 404 || r.Method != http.MethodGet) {
			// A tracker without the write routes; with 405, without the
			// message route too.
			w.WriteHeader(int(code))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	h.url, h.stop = ts.URL, stop
	return h
}

// do sends one request to the hub, as a person or the test's setup would.
func (h *relayHub) do(method, path, body string) string {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer engine-token")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		h.t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return string(b)
}

// What an agent asks of State Hub through the engine, end to end with the
// real programs: `message show` prints a body (escaped, whole however
// large), withholds one holding secret material (exit 14, nothing of it
// anywhere), `message read` and `task set` relay the agent's word and
// leave receipts without notes or bodies; bad input is a usage error,
// unknown ids not_found, a tracker without the routes unsupported, State
// Hub or the engine down unavailable.
func TestAgentRelaysThroughTheEngine(t *testing.T) {
	t.Parallel()
	hub := newRelayHub(t, "engine-token")
	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, fmt.Sprintf("[statehub]\napi_base = %q\ncredential_command = [\"echo\", \"engine-token\"]\n", hub.url))
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })

	hub.do("PUT", "/v1/workplans/W1", `{"id":"W1","repo":"alpha","status":"active","tasks":[
		{"id":"T-1","title":"first","status":"in_progress","repo":"alpha","depends_on":[]}]}`)
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	big := strings.Repeat("<é&\n", contract.MaxMessageBody/5) // 5 bytes each, 16 in JSON: several frames
	for _, m := range []contract.MessageWithBody{
		{Message: contract.Message{ID: "m-1", ToRepo: "alpha", From: "beta", Subject: "the API is merged", RequestsAction: true},
			Body: "BODY-MARKER rebase on main\n\x1b]52;c;aGk=\x07 then run the tests\n"},
		{Message: contract.Message{ID: "m-secret", ToRepo: "alpha", From: "beta", Subject: "the key"}, Body: "use " + token + " for the deploy"},
		{Message: contract.Message{ID: "m-subject", ToRepo: "alpha", From: "beta", Subject: "key " + token}, Body: "see the subject"},
		{Message: contract.Message{ID: "m-big", ToRepo: "alpha", From: "beta", Subject: "big"}, Body: big},
	} {
		b, _ := json.Marshal(m)
		hub.do("POST", "/v1/messages", string(b))
	}
	e.Engine(t, "start", "--detach")
	c := client.New(e.Paths(t, paths.Engine))
	ctx := context.Background()
	testutil.WaitFor(t, "the engine to observe T-1", func() bool {
		res, err := c.Explain(ctx, "T-1")
		return err == nil && res.Observed
	})

	run := func(status int, args ...string) testutil.Result {
		t.Helper()
		r := e.Run(t, "coordination-engine", args...)
		if r.Status != status {
			t.Fatalf("coordination-engine %s: %s\nwant exit %d", strings.Join(args, " "), r, status)
		}
		return r
	}

	// explain of a task State Hub does not have (a mistyped id) is
	// not_found, exit 12, once the engine has looked.
	r := run(12, "explain", "T-99")
	if !strings.Contains(r.Stderr, "task T-99: State Hub has no such task (last observed ") || r.Stdout != "" {
		t.Errorf("explain T-99: %s", r)
	}

	// message show
	r = run(0, "message", "show", "m-1")
	for _, want := range []string{
		"message m-1 from beta to alpha, requests action, unread, ", "subject: the API is merged\n",
		"\nBODY-MARKER rebase on main\n\\x1b]52;c;aGk=\\x07 then run the tests\n",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("message show: no %q in\n%s", want, r.Stdout)
		}
	}
	var shown api.MessageShowResult
	r = run(0, "message", "show", "m-big", "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &shown); err != nil || shown.Body != big || shown.BodyBytes != len(big) || shown.Next != 0 {
		t.Errorf("a body of %d bytes came back as %d (%d said), next %d: %v", len(big), len(shown.Body), shown.BodyBytes, shown.Next, err)
	}
	for id, field := range map[string]string{"m-secret": "body", "m-subject": "subject"} {
		r = run(14, "message", "show", id)
		if strings.Contains(r.Stdout+r.Stderr, token[:12]) || !strings.Contains(r.Stdout, "body: withheld") ||
			!strings.Contains(r.Stderr, "the "+field+" of message "+id+" is withheld: it holds secret material (github-pat at byte ") ||
			!strings.Contains(r.Stderr, "the secret gate applies") {
			t.Errorf("message show %s:\n%s", id, r)
		}
		r = run(14, "message", "show", id, "--json")
		if strings.Contains(r.Stdout+r.Stderr, token[:12]) || !strings.Contains(r.Stdout, `"gate": "secret"`) || !strings.Contains(r.Stderr, `"exit_status":14`) {
			t.Errorf("message show %s --json:\n%s", id, r)
		}
	}
	run(12, "message", "show", "nope")
	run(2, "message", "show", "bad\x1bid")

	// message read
	if r = run(0, "message", "read", "m-1"); r.Stdout != "message m-1 marked read in State Hub\n" {
		t.Errorf("message read: %s", r)
	}
	if got := hub.do("GET", "/v1/messages/m-1", ""); !strings.Contains(got, `"read":true`) {
		t.Errorf("m-1 after message read: %s", got)
	}
	run(12, "message", "read", "nope")

	// task set
	if r = run(0, "task", "set", "T-1", "--status", "done", "--note", "NOTE-MARKER merged in #12"); r.Stdout != "task T-1 set to done in State Hub\n" {
		t.Errorf("task set: %s", r)
	}
	if got := hub.do("GET", "/v1/workplans", ""); !strings.Contains(got, `"status":"done"`) || !strings.Contains(got, `"note":"NOTE-MARKER merged in #12"`) {
		t.Errorf("State Hub after task set: %s", got)
	}
	run(2, "task", "set", "T-1", "--status", "todo")
	run(2, "task", "set", "T-1", "--status", "done", "--note", "two\nlines")
	run(2, "task", "set", "T-1", "--status", "done", "--note", strings.Repeat("x", api.MaxTaskNote+1))
	run(2, "task", "set", "T-1")
	if r = run(14, "task", "set", "T-1", "--status", "blocked", "--note", "use "+token); strings.Contains(r.Stderr, token[:12]) {
		t.Errorf("the refused note is quoted: %s", r)
	}
	if got := hub.do("GET", "/v1/workplans", ""); strings.Contains(got, token[:12]) || strings.Contains(got, `"blocked"`) {
		t.Errorf("a note with a secret reached State Hub: %s", got)
	}
	run(12, "task", "set", "NOPE", "--status", "done")

	// A tracker without the write routes: 404 for a task it lists or a
	// message it has, 405 everywhere.
	hub.missing.Store(404)
	run(24, "task", "set", "T-1", "--status", "in_progress")
	r = run(24, "message", "read", "m-secret")
	if !strings.Contains(r.Stderr, "State Hub has message m-secret but answered 404 to POST /v1/messages/{id}/read") {
		t.Errorf("unsupported read: %s", r)
	}
	hub.missing.Store(405)
	run(24, "task", "set", "T-1", "--status", "in_progress")
	run(24, "message", "read", "m-1")
	run(24, "message", "show", "m-1")
	hub.missing.Store(0)

	// Receipts: ids and statuses, never a note or a body; published to
	// State Hub like every other.
	var rs api.ReceiptsResult
	json.Unmarshal([]byte(run(0, "receipts", "--json").Stdout), &rs)
	got := map[string]int{}
	for _, rc := range rs.Receipts {
		if strings.HasPrefix(rc.Kind, "task.") || strings.HasPrefix(rc.Kind, "message.") {
			got[fmt.Sprintf("%s %s %s %v%v", rc.Kind, rc.Status, rc.Reason, rc.Detail["task_id"], rc.Detail["message_id"])]++
		}
	}
	for _, want := range []string{
		"task.set done  T-1<nil>", "task.set failed not_found NOPE<nil>", "task.set failed unsupported T-1<nil>",
		"message.read read  <nil>m-1", "message.read failed not_found <nil>nope", "message.read failed unsupported <nil>m-secret",
		"message.withheld stopped secret: the body holds secret material (github-pat) <nil>m-secret",
		"message.withheld stopped secret: the subject holds secret material (github-pat) <nil>m-subject",
	} {
		if got[want] == 0 {
			t.Errorf("no receipt %q in %v", want, got)
		}
	}
	testutil.WaitFor(t, "the receipts in State Hub", func() bool { return strings.Contains(hub.do("GET", "/v1/progress", ""), `"task.set"`) })
	// Nothing the engine keeps holds a body or a note: its database, its
	// log, what it published.
	stored := hub.do("GET", "/v1/progress", "")
	for _, f := range []string{"coordination.sqlite3", "coordination.sqlite3-wal", "coordination-engine.log"} {
		b, _ := os.ReadFile(filepath.Join(e.EngineState(), f))
		stored += string(b)
	}
	for _, secret := range []string{"BODY-MARKER", "NOTE-MARKER", token[:12], "<é&"} {
		if strings.Contains(stored, secret) {
			t.Errorf("the engine kept %q", secret)
		}
	}

	// State Hub down, then the engine.
	hub.stop()
	run(8, "message", "show", "m-1")
	run(8, "task", "set", "T-1", "--status", "done")
	e.Engine(t, "stop")
	if r = run(8, "task", "set", "T-1", "--status", "done"); !strings.Contains(r.Stderr, "not running") {
		t.Errorf("the engine down: %s", r)
	}
}
