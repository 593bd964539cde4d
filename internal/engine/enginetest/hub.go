package enginetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Hub is the reference State Hub, served in the test on a port of its own
// that survives going down and coming back. Token, when set, is required;
// it can change while the hub runs.
type Hub struct {
	t    testing.TB
	srv  *devhub.Server
	addr string
	// Token is the bearer token the hub requires; "" requires none.
	Token atomic.Pointer[string]
	// Authorized counts requests that carried the right token.
	Authorized atomic.Int64
	// NoEvents makes the hub answer 404 to its event stream, as a server
	// without one does.
	NoEvents atomic.Bool

	mu   sync.Mutex
	http *http.Server
}

// StartHub serves a new hub requiring token ("" for none), stopped by
// t.Cleanup.
func StartHub(t testing.TB, token string) *Hub {
	t.Helper()
	h := &Hub{t: t, srv: &devhub.Server{}}
	h.Token.Store(&token)
	if err := h.srv.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.serve(ln)
	t.Cleanup(h.Down)
	return h
}

// URL is the hub's API base.
func (h *Hub) URL() string { return "http://" + h.addr }

func (h *Hub) serve(ln net.Listener) {
	inner := h.srv.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want := *h.Token.Load(); want != "" {
			if r.Header.Get("Authorization") != "Bearer "+want {
				http.Error(w, `{"error":"a bearer token is required"}`, http.StatusUnauthorized)
				return
			}
			h.Authorized.Add(1)
		}
		if h.NoEvents.Load() && r.URL.Path == "/v1/events" {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	h.mu.Lock()
	h.http = srv
	h.mu.Unlock()
	go srv.Serve(ln)
}

// Down stops the hub: connections refused, event streams cut.
func (h *Hub) Down() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.http != nil {
		h.http.Close()
		h.http = nil
	}
}

// Up serves again on the same address.
func (h *Hub) Up() {
	h.t.Helper()
	var ln net.Listener
	testutil.WaitFor(h.t, "the hub's port to be free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", h.addr)
		return err == nil
	})
	h.serve(ln)
}

// Do sends one request as a State Hub user would (with the token).
func (h *Hub) Do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, h.URL()+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if tok := *h.Token.Load(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Put puts the workplan wp.
func (h *Hub) Put(wp contract.Workplan) {
	h.t.Helper()
	if status, b := h.Do(http.MethodPut, "/v1/workplans/"+wp.ID, wp); status != http.StatusOK {
		h.t.Fatalf("put workplan %s: %d %s", wp.ID, status, b)
	}
}

// Patch changes task's fields.
func (h *Hub) Patch(task string, fields map[string]any) {
	h.t.Helper()
	if status, b := h.Do(http.MethodPatch, "/v1/tasks/"+task, fields); status != http.StatusOK {
		h.t.Fatalf("patch task %s: %d %s", task, status, b)
	}
}

// Task is the task id as the hub holds it.
func (h *Hub) Task(id string) contract.Task {
	h.t.Helper()
	_, b := h.Do(http.MethodGet, "/v1/workplans", nil)
	var res struct{ Workplans []contract.Workplan }
	if err := json.Unmarshal(b, &res); err != nil {
		h.t.Fatalf("workplans: %v", err)
	}
	for _, wp := range res.Workplans {
		for _, t := range wp.Tasks {
			if t.ID == id {
				return t
			}
		}
	}
	h.t.Fatalf("no task %s", id)
	return contract.Task{}
}

// Progress is what State Hub received: the receipts, and their raw text.
func (h *Hub) Progress() ([]contract.Receipt, string) {
	h.t.Helper()
	_, b := h.Do(http.MethodGet, "/v1/progress", nil)
	var res struct{ Receipts []contract.Receipt }
	if err := json.Unmarshal(b, &res); err != nil {
		h.t.Fatalf("progress: %v\n%s", err, b)
	}
	return res.Receipts, string(b)
}

// HubConfig is an engine configuration observing h every interval seconds,
// with more [coordination] keys.
func HubConfig(h *Hub, interval int, coordination string, more ...string) string {
	return fmt.Sprintf("[statehub]\napi_base = %q\n%s\n[coordination]\nstatehub_poll_interval_seconds = %d\n%s",
		h.URL(), strings.Join(more, "\n"), interval, coordination)
}

// Workplan is an active workplan of repo with tasks.
func Workplan(id, repo string, tasks ...contract.Task) contract.Workplan {
	return contract.Workplan{ID: id, Repo: repo, Status: "active", Tasks: tasks}
}

// Todo is a task of repo to do, after deps.
func Todo(id, repo string, deps ...string) contract.Task {
	return contract.Task{ID: id, Title: "task " + id, Status: "todo", Repo: repo, DependsOn: deps}
}

// StandingOf is task id's standing in res, zero when res does not list it.
func StandingOf(res api.TasksResult, id string) api.TaskStanding {
	for _, t := range res.Tasks {
		if t.ID == id {
			return t
		}
	}
	return api.TaskStanding{}
}
