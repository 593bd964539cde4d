package statehub_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

func post(t *testing.T, ts *httptest.Server, path, body string) {
	t.Helper()
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %v %v", path, err, resp)
	}
	resp.Body.Close()
}

// Against the reference server: a message is read with its body, a task's
// status is stated with a note, a message is marked read; unknown ids are
// not_found, a refused note is bad_request with the server's reason.
func TestRelayRoutes(t *testing.T) {
	ts := hub(t, "")
	put(t, ts, "", "/v1/workplans/wp1", `{"id":"wp1","repo":"a","status":"active","tasks":[{"id":"T1","title":"x","status":"todo","repo":"a","depends_on":[],"priority":1}]}`)
	post(t, ts, "/v1/messages", `{"id":"m 1","to_repo":"a","from":"b","subject":"look","requests_action":true,"body":"first\nsecond"}`)
	c := &statehub.Client{Base: ts.URL}
	ctx := context.Background()

	m, err := c.Message(ctx, "m 1")
	if err != nil || m.Body != "first\nsecond" || m.Subject != "look" || m.Read {
		t.Errorf("message: %+v %v", m, err)
	}
	if _, err := c.Message(ctx, "nope"); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown message: %v", err)
	}
	if err := c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done", Note: "merged"}); err != nil {
		t.Errorf("set: %v", err)
	}
	wps, _, _, _ := c.Workplans(ctx)
	if wps[0].Tasks[0].Status != "done" {
		t.Errorf("after set: %+v", wps[0].Tasks[0])
	}
	if err := c.SetTask(ctx, "nope", contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown task: %v", err)
	}
	err = c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done", Note: "two\nlines"})
	if !errs.Is(err, errs.BadRequest) || !strings.Contains(err.Error(), "400 Bad Request to PATCH /v1/tasks/T1: the note") {
		t.Errorf("a refused note: %v", err)
	}
	if err := c.MarkRead(ctx, "m 1"); err != nil {
		t.Errorf("read: %v", err)
	}
	if m, _ := c.Message(ctx, "m 1"); !m.Read {
		t.Errorf("not marked read: %+v", m)
	}
	if err := c.MarkRead(ctx, "nope"); !errs.Is(err, errs.NotFound) {
		t.Errorf("read an unknown message: %v", err)
	}
}

// A tracker without the routes (405, 501) is unsupported; one that answers
// a write with 204 and no document has done it; an answer that is not the
// contract's message (no body, another id, a body over 64 KiB) is refused,
// never cut or guessed at; an unreachable one is unavailable.
func TestRelayRoutesOfOtherTrackers(t *testing.T) {
	answer := map[string]func(w http.ResponseWriter){}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f, ok := answer[r.Method+" "+r.URL.EscapedPath()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f(w)
	}))
	defer ts.Close()
	status := func(code int) func(http.ResponseWriter) { return func(w http.ResponseWriter) { w.WriteHeader(code) } }
	body := func(s string) func(http.ResponseWriter) { return func(w http.ResponseWriter) { io.WriteString(w, s) } }
	c := &statehub.Client{Base: ts.URL}
	ctx := context.Background()

	answer["PATCH /v1/tasks/T1"] = status(http.StatusMethodNotAllowed)
	answer["POST /v1/messages/m1/read"] = status(http.StatusNotImplemented)
	answer["GET /v1/messages/m1"] = status(http.StatusMethodNotAllowed)
	if err := c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "PATCH /v1/tasks/{id}") {
		t.Errorf("405 on PATCH: %v", err)
	}
	if err := c.MarkRead(ctx, "m1"); !errs.Is(err, errs.Unsupported) {
		t.Errorf("501 on read: %v", err)
	}
	if _, err := c.Message(ctx, "m1"); !errs.Is(err, errs.Unsupported) {
		t.Errorf("405 on GET: %v", err)
	}

	answer["PATCH /v1/tasks/T1"] = status(http.StatusNoContent)
	answer["POST /v1/messages/m1/read"] = body("")
	if err := c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done"}); err != nil {
		t.Errorf("204 on PATCH: %v", err)
	}
	if err := c.MarkRead(ctx, "m1"); err != nil {
		t.Errorf("an empty 200 on read: %v", err)
	}
	answer["PATCH /v1/tasks/T1"] = status(http.StatusInternalServerError)
	if err := c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("500 on PATCH: %v", err)
	}

	for name, doc := range map[string]string{
		"no body":    `{"id":"m1","revision":"r1","to_repo":"a","from":"b"}`,
		"another id": `{"id":"m2","revision":"r1","to_repo":"a","from":"b","body":""}`,
		"too long":   `{"id":"m1","revision":"r1","to_repo":"a","from":"b","body":"` + strings.Repeat("x", contract.MaxMessageBody+1) + `"}`,
		"not JSON":   `<html>`,
	} {
		answer["GET /v1/messages/m1"] = body(doc)
		if m, err := c.Message(ctx, "m1"); !errs.Is(err, errs.BadRequest) || m.Body != "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	answer["GET /v1/messages/m1"] = body(`{"id":"m1","revision":"r1","to_repo":"a","from":"b","body":"` + strings.Repeat("x", contract.MaxMessageBody) + `","colour":"red"}`)
	if m, err := c.Message(ctx, "m1"); err != nil || len(m.Body) != contract.MaxMessageBody {
		t.Errorf("a body of 64 KiB: %d %v", len(m.Body), err)
	}

	down := &statehub.Client{Base: "http://127.0.0.1:1"}
	if _, err := down.Message(ctx, "m1"); !errs.Is(err, errs.Unavailable) {
		t.Errorf("unreachable: %v", err)
	}
	if err := down.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done"}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("unreachable: %v", err)
	}
}
