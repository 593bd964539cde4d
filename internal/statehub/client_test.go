package statehub_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
)

func hub(t *testing.T, token string) *httptest.Server {
	t.Helper()
	s := &devhub.Server{Token: token}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func put(t *testing.T, ts *httptest.Server, token, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, ts.URL+path, strings.NewReader(body))
	if path[:9] == "/v1/tasks" {
		req.Method = http.MethodPatch
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %v %v", path, err, resp)
	}
	resp.Body.Close()
}

// The client reads workplans conditionally: unchanged is reported as such
// (the server answered 304), a change is seen at the next call.
func TestWorkplansAreReadConditionally(t *testing.T) {
	ts := hub(t, "")
	put(t, ts, "", "/v1/workplans/wp1", `{"id":"wp1","repo":"a","status":"active","tasks":[{"id":"T1","title":"x","status":"todo","repo":"a","depends_on":[],"priority":1}]}`)
	c := &statehub.Client{Base: ts.URL}
	ctx := context.Background()
	wps, changed, bad, err := c.Workplans(ctx)
	if err != nil || !changed || len(wps) != 1 || len(bad) != 0 {
		t.Fatalf("first read: %v %v %v %v", wps, changed, bad, err)
	}
	if wps, changed, _, err = c.Workplans(ctx); err != nil || changed || len(wps) != 1 {
		t.Errorf("unchanged read: %v %v %v", wps, changed, err)
	}
	put(t, ts, "", "/v1/tasks/T1", `{"status":"done"}`)
	if wps, changed, _, err = c.Workplans(ctx); err != nil || !changed || wps[0].Tasks[0].Status != "done" {
		t.Errorf("after a change: %v %v %v", wps, changed, err)
	}
}

// Objects that lack what the contract requires are skipped with the reason;
// unknown fields are ignored.
func TestInvalidObjectsAreSkipped(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"workplans":[
			{"id":"ok","repo":"a","status":"active","revision":"r1","tasks":[],"colour":"red"},
			{"id":"norev","repo":"a","status":"active","tasks":[]},
			{"id":"badtask","repo":"a","status":"active","revision":"r2","tasks":[{"id":"T","status":"later","repo":"a","revision":"r"}]},
			"not an object"]}`))
	}))
	defer ts.Close()
	wps, _, bad, err := (&statehub.Client{Base: ts.URL}).Workplans(context.Background())
	if err != nil || len(wps) != 1 || wps[0].ID != "ok" || len(bad) != 3 {
		t.Fatalf("got %v, skipped %v, %v", wps, bad, err)
	}
}

// The token comes from the credential command, is kept, and is fetched
// once more after a refusal; a server that still refuses is an error, and
// the command's output never appears in it.
func TestCredentialCommandAndRefusal(t *testing.T) {
	ts := hub(t, "right")
	dir := t.TempDir()
	// The first run prints a stale token, the later ones the right one.
	script := filepath.Join(dir, "cred")
	os.WriteFile(script, []byte("#!/bin/sh\nif [ -e "+dir+"/ran ]; then echo right; else touch "+dir+"/ran; echo stale; fi\n"), 0o700)
	c := &statehub.Client{Base: ts.URL, Credential: []string{script}}
	if _, _, _, err := c.Workplans(context.Background()); err != nil {
		t.Fatalf("with a stale token first: %v", err)
	}
	bad := &statehub.Client{Base: ts.URL, Credential: []string{"sh", "-c", "echo wrong-secret"}}
	_, _, _, err := bad.Workplans(context.Background())
	if !errs.Is(err, errs.PermissionDeny) || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("refused token: %v", err)
	}
	failing := &statehub.Client{Base: ts.URL, Credential: []string{"sh", "-c", "echo leaked; exit 3"}}
	if _, _, _, err := failing.Workplans(context.Background()); !errs.Is(err, errs.PermissionDeny) || strings.Contains(err.Error(), "leaked") {
		t.Errorf("failing credential command: %v", err)
	}
}

// An unreachable State Hub is `unavailable`; receipts are published once
// each however often they are sent.
func TestUnreachableAndProgress(t *testing.T) {
	c := &statehub.Client{Base: "http://127.0.0.1:1"}
	if _, _, _, err := c.Workplans(context.Background()); !errs.Is(err, errs.Unavailable) {
		t.Errorf("unreachable: %v", err)
	}
	ts := hub(t, "")
	c = &statehub.Client{Base: ts.URL}
	rs := []contract.Receipt{{ID: "r1", Kind: "lease.offered"}, {ID: "r2", Kind: "wake.sent"}}
	if n, err := c.PostProgress(context.Background(), rs); err != nil || n != 2 {
		t.Errorf("first post: %d %v", n, err)
	}
	if n, err := c.PostProgress(context.Background(), rs); err != nil || n != 0 {
		t.Errorf("second post: %d %v", n, err)
	}
}

// Unread messages: read ones are left out, ones lacking what the contract
// requires are skipped.
func TestUnreadMessages(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("unread") != "true" {
			t.Errorf("asked %s", r.URL)
		}
		w.Write([]byte(`{"messages":[
			{"id":"m1","revision":"r1","to_repo":"a","from":"b","subject":"look","requests_action":true,"read":false},
			{"id":"m2","to_repo":"a","from":"b"}]}`))
	}))
	defer ts.Close()
	ms, bad, err := (&statehub.Client{Base: ts.URL}).UnreadMessages(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ID != "m1" || !ms[0].RequestsAction || len(bad) != 1 || bad[0].ID != "m2" {
		t.Errorf("got %+v, skipped %+v, %v", ms, bad, err)
	}
}
