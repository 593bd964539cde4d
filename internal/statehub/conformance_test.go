package statehub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// The contract's driver (Client) passes the conformance suite against the
// reference server.
func TestConformance(t *testing.T) {
	hubtest.Run(t, hubtest.Harness{Open: openContract})
}

// contractTracker is the reference State Hub in the hands of its people:
// they write whole workplans (PUT), messages and checkpoints.
type contractTracker struct {
	ts    *httptest.Server
	token atomic.Pointer[string]
	// charged counts the workplan reads answered in full: a look at an
	// unchanged State Hub is a 304.
	charged atomic.Int64
	secret  string

	mu        sync.Mutex
	workplans map[string]*contract.Workplan // by repo
	ids       int
}

func openContract(t *testing.T, repos ...string) (statehub.Hub, hubtest.Tracker) {
	s := &devhub.Server{}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	tr := &contractTracker{secret: "contract-token-7f3a", workplans: map[string]*contract.Workplan{}}
	tr.token.Store(&tr.secret)
	inner := s.Handler()
	tr.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+*tr.token.Load() {
			http.Error(w, `{"error":"a bearer token is required"}`, http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/v1/workplans" {
			rec := &statusRecorder{ResponseWriter: w}
			inner.ServeHTTP(rec, r)
			if rec.status == http.StatusOK {
				tr.charged.Add(1)
			}
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.ts.Close)
	for _, repo := range repos {
		tr.workplans[repo] = &contract.Workplan{ID: "wp-" + repo, Repo: repo, Status: "active", Tasks: []contract.Task{}}
		tr.put(t, repo)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tr.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &statehub.Client{Base: tr.ts.URL, Credential: []string{"cat", file}}, tr
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// do sends one request as a person with the server's token would.
func (tr *contractTracker) do(t testing.TB, method, path string, body any) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, tr.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+*tr.token.Load())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return b
}

func (tr *contractTracker) put(t testing.TB, repo string) {
	wp := tr.workplans[repo]
	tr.do(t, http.MethodPut, "/v1/workplans/"+wp.ID, wp)
}

func taskOf(id, repo string, spec hubtest.Task) contract.Task {
	task := contract.Task{ID: id, Repo: repo, Title: spec.Title, Status: spec.Status, DependsOn: append([]string{}, spec.DependsOn...),
		Priority: spec.Priority, NeedsHuman: spec.NeedsHuman, SecretsRequired: spec.SecretsRequired}
	if spec.Destructive {
		task.ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "drops the table"}}
	}
	return task
}

func (tr *contractTracker) AddTask(t testing.TB, repo string, spec hubtest.Task) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.ids++
	id := "T-" + strconv.Itoa(tr.ids)
	wp := tr.workplans[repo]
	wp.Tasks = append(wp.Tasks, taskOf(id, repo, spec))
	tr.put(t, repo)
	return id
}

func (tr *contractTracker) Change(t testing.TB, id string, spec hubtest.Task) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for repo, wp := range tr.workplans {
		for i, task := range wp.Tasks {
			if task.ID == id {
				wp.Tasks[i] = taskOf(id, repo, spec)
				tr.put(t, repo)
				return
			}
		}
	}
	t.Fatalf("no task %s", id)
}

func (tr *contractTracker) Read(t testing.TB, id string) hubtest.Task {
	var res struct {
		Workplans []struct {
			Tasks []struct {
				contract.Task
				Note string `json:"note"`
			} `json:"tasks"`
		} `json:"workplans"`
	}
	if err := json.Unmarshal(tr.do(t, http.MethodGet, "/v1/workplans", nil), &res); err != nil {
		t.Fatal(err)
	}
	for _, wp := range res.Workplans {
		for _, task := range wp.Tasks {
			if task.ID == id {
				return hubtest.Task{Title: task.Title, Status: task.Status, DependsOn: task.DependsOn, Priority: task.Priority,
					NeedsHuman: task.NeedsHuman, SecretsRequired: task.SecretsRequired, Note: task.Note}
			}
		}
	}
	t.Fatalf("no task %s", id)
	return hubtest.Task{}
}

func (tr *contractTracker) Unknown(string) string { return "T-999" }

func (tr *contractTracker) Refuse(testing.TB) {
	other := "another-token"
	tr.token.Store(&other)
}

func (tr *contractTracker) Down(testing.TB) { tr.ts.Close() }
func (tr *contractTracker) Secret() string  { return tr.secret }
func (tr *contractTracker) Charged() int    { return int(tr.charged.Load()) }

func (tr *contractTracker) Kept(t testing.TB) int {
	var res struct{ Receipts []json.RawMessage }
	if err := json.Unmarshal(tr.do(t, http.MethodGet, "/v1/progress", nil), &res); err != nil {
		t.Fatal(err)
	}
	return len(res.Receipts)
}

func (tr *contractTracker) AddMessage(t testing.TB, m contract.MessageWithBody) string {
	var got contract.Message
	if err := json.Unmarshal(tr.do(t, http.MethodPost, "/v1/messages", m), &got); err != nil {
		t.Fatal(err)
	}
	return got.ID
}

func (tr *contractTracker) AddCheckpoint(t testing.TB, c contract.Checkpoint) {
	tr.do(t, http.MethodPost, "/v1/checkpoints", c)
}
