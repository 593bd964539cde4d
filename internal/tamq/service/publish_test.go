package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// fastPublish keeps the publisher's waits short; the tests wait on what
// State Hub and status show, never on these.
var fastPublish = PublishTiming{Every: 100 * time.Millisecond, Gather: 5 * time.Millisecond,
	BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}

// testHub is a reference State Hub (devhub) that also counts how often each
// receipt id was posted and accepted, and can lose its answers: it stores a
// batch and then answers 500, as a crash after State Hub took it would.
type testHub struct {
	t     *testing.T
	hub   *devhub.Server
	url   string
	token string

	mu       sync.Mutex
	posted   map[string]int // ids in posts State Hub accepted
	auth     []string       // the Authorization header of every progress post
	loseNext int            // answers to lose after storing
}

func newTestHub(t *testing.T, token string) *testHub {
	t.Helper()
	return newTestHubAt(t, token, "127.0.0.1:0")
}

// newTestHubAt serves on addr ("host:0" for any free port).
func newTestHubAt(t *testing.T, token, addr string) *testHub {
	t.Helper()
	h := &testHub{t: t, hub: &devhub.Server{Token: token}, token: token, posted: map[string]int{}}
	if err := h.hub.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

func (h *testHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/progress" {
		h.hub.Handler().ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.hub.Handler().ServeHTTP(rec, r)
	var batch struct{ Receipts []struct{ ID string } }
	json.Unmarshal(body, &batch)
	h.mu.Lock()
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	lose := false
	if rec.Code == http.StatusOK {
		for _, rc := range batch.Receipts {
			h.posted[rc.ID]++
		}
		lose = h.loseNext > 0
		if lose {
			h.loseNext--
		}
	}
	h.mu.Unlock()
	if lose {
		http.Error(w, "the answer was lost", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// storedReceipt is what the tests read of a receipt State Hub keeps.
type storedReceipt struct {
	ID             string `json:"id"`
	Source         string `json:"source"`
	LocalMessageID string `json:"local_message_id"`
}

// progress is GET /v1/progress: the receipts State Hub keeps, oldest
// first, and the answer as it came.
func (h *testHub) progress() ([]storedReceipt, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/progress", nil)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var res struct {
		Receipts []storedReceipt `json:"receipts"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		h.t.Fatalf("GET /v1/progress: %v\n%s", err, raw)
	}
	for _, r := range res.Receipts {
		if r.Source != "tamq" {
			h.t.Errorf("receipt %s has source %q", r.ID, r.Source)
		}
	}
	return res.Receipts, raw
}

// storedIDs are the ids State Hub keeps, oldest first.
func (h *testHub) storedIDs() []string {
	rs, _ := h.progress()
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func (h *testHub) postedCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.posted {
		out[k] = v
	}
	return out
}

// closedAddr is a local address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// writeConfig writes tamq's config file for a service rooted at root (as
// setupIn resolves its paths).
func writeConfig(t *testing.T, root, toml string) {
	t.Helper()
	dir := filepath.Join(root, ".config", "tamq")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hubConfig(apiBase string, credential ...string) string {
	c := fmt.Sprintf("[statehub]\napi_base = %q\n", apiBase)
	if len(credential) > 0 {
		q := make([]string, len(credential))
		for i, a := range credential {
			q[i] = fmt.Sprintf("%q", a)
		}
		c += "credential_command = [" + strings.Join(q, ", ") + "]\n"
	}
	return c
}

// run runs svc until the test ends or the returned stop is called.
func run(t *testing.T, svc *Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// localIDs are the State Hub ids of every receipt in the database.
func localIDs(t *testing.T, svc *Service) []string {
	t.Helper()
	rows, err := svc.db.Reader.Query(`SELECT 'tamq:' || (SELECT value FROM meta WHERE key = 'instance') || ':' || id FROM receipts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

func publishing(t *testing.T, p paths.Paths) api.StateHubStatus {
	t.Helper()
	st, err := client.New(p).Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.StateHub.Publishing == nil {
		t.Fatalf("status has no publishing section: %+v", st.StateHub)
	}
	return st.StateHub
}

// drained: nothing pending, and State Hub has every receipt of the
// database, once each.
func drained(t *testing.T, svc *Service, p paths.Paths, h *testHub) bool {
	t.Helper()
	if publishing(t, p).UnpublishedReceipts != 0 {
		return false
	}
	return slices.Equal(h.storedIDs(), localIDs(t, svc))
}

func sendTo(t *testing.T, p paths.Paths, text string) api.Message {
	t.Helper()
	m, err := client.New(p).Send(context.Background(), api.SendArgs{Text: text})
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return m
}

// tamq alone, pointed at a State Hub: every receipt of the messages sent
// arrives once, and status shows nothing pending, sent directly.
func TestPublishReceiptsToStateHub(t *testing.T) {
	t.Parallel()
	h := newTestHub(t, "")
	root := t.TempDir()
	writeConfig(t, root, hubConfig(h.url))
	svc, p, _ := inProcessService(t, root, Options{Writer: discardWriter{}, Publish: fastPublish})
	var sent []api.Message
	for i := range 3 {
		sent = append(sent, sendTo(t, p, fmt.Sprintf("To:net-kingdom: secret body %d", i)))
	}
	testutil.WaitFor(t, "every receipt at State Hub", func() bool {
		if !drained(t, svc, p, h) {
			return false
		}
		rs, _ := h.progress()
		for _, m := range sent {
			if !slices.ContainsFunc(rs, func(r storedReceipt) bool { return r.LocalMessageID == m.ID }) {
				return false
			}
		}
		return true
	})
	for id, n := range h.postedCounts() {
		if n != 1 {
			t.Errorf("receipt %s was posted %d times", id, n)
		}
	}
	st := publishing(t, p)
	if pub := st.Publishing; pub.Via != api.ViaDirect || pub.LastSuccessAt == nil || pub.LastError != "" || pub.Paused {
		t.Errorf("publishing status %+v", pub)
	}
	if _, raw := h.progress(); strings.Contains(string(raw), "secret body") {
		t.Error("a message body reached State Hub")
	}
}

// While State Hub is down the receipts wait, status says why, and the log
// has one warning; once it is up they all arrive, each posted once, and the
// log says so once.
func TestPublishWaitsForStateHub(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	root := t.TempDir()
	writeConfig(t, root, hubConfig("http://"+addr))
	var logs syncBuffer
	svc, p, _ := inProcessService(t, root, Options{Writer: discardWriter{}, Publish: fastPublish,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sendTo(t, p, "To:net-kingdom: while State Hub is down")
	testutil.WaitFor(t, "the publisher to fail a few times", func() bool {
		return strings.Count(logs.String(), "still cannot publish") >= 3
	})
	st := publishing(t, p)
	if st.UnpublishedReceipts == 0 || st.Publishing.LastError == "" || st.Publishing.Paused || st.Publishing.LastSuccessAt != nil {
		t.Errorf("while down: %+v %+v", st, st.Publishing)
	}
	if rep, err := client.New(p).Status(context.Background()); err != nil || !rep.Healthy {
		t.Errorf("State Hub down made tamq unhealthy: %v", err)
	}

	h := newTestHubAt(t, "", addr)
	sendTo(t, p, "To:net-kingdom: once it is back")
	testutil.WaitFor(t, "the receipts to drain", func() bool { return drained(t, svc, p, h) })
	for id, n := range h.postedCounts() {
		if n != 1 {
			t.Errorf("receipt %s was posted %d times", id, n)
		}
	}
	if pub := publishing(t, p).Publishing; pub.LastError != "" || pub.LastSuccessAt == nil {
		t.Errorf("after recovery: %+v", pub)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN msg=\"cannot publish receipts"); n != 1 {
		t.Errorf("%d warnings about publishing, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "publishing receipts to State Hub again"); n != 1 {
		t.Errorf("%d recovery notes, want 1:\n%s", n, out)
	}
}

// State Hub stores a batch but its answer is lost, and tamq stops before it
// sends the batch again: the next start sends it again, State Hub keeps each
// receipt once, and nothing is left pending.
func TestPublishAcrossARestartDoublesNothing(t *testing.T) {
	t.Parallel()
	h := newTestHub(t, "")
	h.loseNext = 1
	root := t.TempDir()
	writeConfig(t, root, hubConfig(h.url))
	// A long backoff: after the lost answer it does not try again before
	// it is stopped.
	svc, p := setupIn(t, root, Options{Publish: PublishTiming{BackoffMin: time.Hour, BackoffMax: time.Hour}})
	stop := run(t, svc)
	testutil.WaitFor(t, "the lost answer", func() bool {
		st := publishing(t, p)
		return st.Publishing.LastError != "" && len(h.storedIDs()) > 0
	})
	first := h.storedIDs()
	stop()

	svc2, _ := startAt(t, p, Options{Publish: fastPublish})
	run(t, svc2)
	testutil.WaitFor(t, "the receipts to drain after the restart", func() bool { return drained(t, svc2, p, h) })
	posted := h.postedCounts()
	for _, id := range first {
		if posted[id] != 2 {
			t.Errorf("receipt %s of the lost answer was posted %d times, want 2", id, posted[id])
		}
	}
	ids := h.storedIDs()
	if len(ids) < len(first)+2 { // and the shutdown and the second start
		t.Errorf("State Hub has %v", ids)
	}
	instance := strings.Split(ids[0], ":")[1]
	for _, id := range ids {
		if strings.Split(id, ":")[1] != instance {
			t.Errorf("receipt %s has another instance than %s", id, ids[0])
		}
	}
}

// The credential command's token goes in the Authorization header and
// nowhere else: not in the database, its WAL or the log.
func TestPublishCarriesTheTokenAndNeverStoresIt(t *testing.T) {
	t.Parallel()
	const token = "tok-3c9f1e7a-never-stored"
	h := newTestHub(t, token)
	root := t.TempDir()
	writeConfig(t, root, hubConfig(h.url, "echo", token))
	var logs syncBuffer
	svc, p, _ := inProcessService(t, root, Options{Writer: discardWriter{}, Publish: fastPublish,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sendTo(t, p, "To:net-kingdom: with a token")
	testutil.WaitFor(t, "the receipts to drain", func() bool { return drained(t, svc, p, h) })
	h.mu.Lock()
	for _, a := range h.auth {
		if a != "Bearer "+token {
			t.Errorf("a progress post carried Authorization %q", a)
		}
	}
	h.mu.Unlock()
	// The service writes its files while it runs; read them as they are.
	st, _ := client.New(p).Status(context.Background())
	b, _ := json.Marshal(st)
	where := map[string][]byte{"status": b, "log": []byte(logs.String())}
	filepath.WalkDir(p.StateDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			where[path] = b
		}
		return nil
	})
	for name, b := range where {
		if bytes.Contains(b, []byte(token)) {
			t.Errorf("the token is in %s", name)
		}
	}
}

// Credentials State Hub refuses, or a credential command that fails,
// pause publishing: status says so and the receipts stay pending.
func TestPublishPausesOnRefusedCredentials(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		command []string
	}{
		{"refused token", []string{"echo", "not-the-token"}},
		{"failing command", []string{"false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHub(t, "the-token")
			root := t.TempDir()
			writeConfig(t, root, hubConfig(h.url, tt.command...))
			svc, p := setupIn(t, root, Options{Publish: fastPublish})
			run(t, svc)
			var st api.StateHubStatus
			testutil.WaitFor(t, "publishing to pause", func() bool {
				st = publishing(t, p)
				return st.Publishing.Paused
			})
			if st.UnpublishedReceipts == 0 || st.Publishing.LastError == "" || len(h.storedIDs()) != 0 {
				t.Errorf("paused: %+v %+v, State Hub has %v", st, st.Publishing, h.storedIDs())
			}
		})
	}
}
