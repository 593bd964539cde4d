// Package devhub is the reference State Hub (`coordination-engine
// dev-statehub`): the contract's routes (docs/statehub-contract.md) over one
// in-memory document, persisted by atomic replace after every change. It is
// what the tests and the demo run, and what a new user runs before pointing
// the engine at their own tracker. It is careful as a server must be: a bad
// request is a 400 with a reason, never a crash; writes are serialized.
//
// It is safe by default (docs/statehub-contract.md): it listens on a Unix
// socket of the user's (listen.go), or on TCP with a token; on TCP it takes
// only a loopback Host (no DNS rebinding); a body must be JSON and say so
// (a web page cannot send that without asking first) and no browser may
// write across origins; bodies, the document and connections are capped,
// and slow or idle connections are closed.
package devhub

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// maxBody bounds a request body: a workplan with its tasks fits many times.
const maxBody = 1 << 20

// The defaults of Server's caps: generous for one person's work, small
// enough that a runaway client cannot fill the disk or the process table.
const (
	DefaultMaxDocument = 64 << 20
	DefaultMaxConns    = 64
)

// maxNote bounds the note a task's status comes with: one line, for people.
const maxNote = 1 << 10

// document is everything the server keeps, as it is saved.
type document struct {
	Rev         int64                   `json:"rev"` // the last revision handed out
	Workplans   []workplan              `json:"workplans"`
	Messages    []message               `json:"messages"`
	Checkpoints []contract.Checkpoint   `json:"checkpoints"`
	Progress    []json.RawMessage       `json:"progress"`
	progressIDs map[string]bool         // receipt ids received
	events      map[chan event]struct{} // open event streams
}

// workplan is a contract workplan as the server keeps and serves it: its
// tasks carry their notes.
type workplan struct {
	contract.Workplan
	Tasks []task `json:"tasks"` // in place of the contract's: the notes travel with them
}

// task is a contract task with the note an agent last gave with its status
// (PATCH /v1/tasks/{id}). It is served with the task; readers that do not
// know it ignore it, as the contract says.
type task struct {
	contract.Task
	Note string `json:"note,omitempty"`
}

// message is a contract message with its body, which only GET
// /v1/messages/{id} serves.
type message struct {
	contract.Message
	Body string `json:"body"`
}

type event struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// Server is a reference State Hub.
type Server struct {
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string
	// Data is the file the document is kept in; "" keeps it in memory.
	Data string
	Now  func() time.Time
	// MaxDocument caps the document, in bytes of JSON (about what --data
	// holds); a write that would pass it is refused (507). 0: DefaultMaxDocument.
	MaxDocument int64
	// MaxConns caps the open connections of Listener; one over it is
	// answered 503 and closed. 0: DefaultMaxConns.
	MaxConns int

	mu   sync.Mutex
	doc  document
	size int64 // the document's size as JSON, kept up to date by each write
}

// Open loads the document from s.Data when the file exists.
func (s *Server) Open() error {
	if s.Now == nil {
		s.Now = func() time.Time { return time.Now().UTC() }
	}
	s.doc.progressIDs = map[string]bool{}
	s.doc.events = map[chan event]struct{}{}
	if s.Data == "" {
		return nil
	}
	b, err := os.ReadFile(s.Data)
	if errors.Is(err, fs.ErrNotExist) {
		// A first run's place (~/.local/state/statehub.json on a new
		// machine) may not exist yet; made private, as the data may be.
		if err := os.MkdirAll(filepath.Dir(s.Data), 0o700); err != nil {
			return err
		}
		// Written at once, so a data file that cannot be written is known
		// now, not at the first change.
		return s.save()
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &s.doc); err != nil {
		return fmt.Errorf("%s is not a State Hub data file: %w", s.Data, err)
	}
	s.size = jsonSize(&s.doc)
	s.doc.progressIDs = map[string]bool{}
	for _, r := range s.doc.Progress {
		var id struct{ ID string }
		json.Unmarshal(r, &id)
		s.doc.progressIDs[id.ID] = true
	}
	return nil
}

// Handler serves the contract's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workplans", s.getWorkplans)
	mux.HandleFunc("PUT /v1/workplans/{id}", s.putWorkplan)
	mux.HandleFunc("PATCH /v1/tasks/{id}", s.patchTask)
	mux.HandleFunc("GET /v1/messages", s.getMessages)
	mux.HandleFunc("POST /v1/messages", s.postMessage)
	mux.HandleFunc("GET /v1/messages/{id}", s.getMessage)
	mux.HandleFunc("POST /v1/messages/{id}/read", s.readMessage)
	mux.HandleFunc("GET /v1/checkpoints", s.getCheckpoints)
	mux.HandleFunc("POST /v1/checkpoints", s.postCheckpoint)
	mux.HandleFunc("POST /v1/progress", s.postProgress)
	mux.HandleFunc("GET /v1/progress", s.getProgress)
	mux.HandleFunc("GET /v1/events", s.events)
	// No browser writes across origins (Sec-Fetch-Site, Origin): a
	// bodyless POST needs no content type a page could not send.
	cop := http.NewCrossOriginProtection()
	return s.guarded(cop.Handler(s.authorized(mux)))
}

// guarded refuses, before anything else looks at a request, what only an
// attacker sends: a Host that is not this machine on TCP (a DNS rebinding
// page's), a body that is not declared JSON (a page's form or text/plain
// POST, which needs no CORS preflight), a body over maxBody.
func (s *Server) guarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && !hostAllowed(r.Host, local) {
			fail(w, http.StatusMisdirectedRequest, "Host %q is not this State Hub's address; use 127.0.0.1, [::1] or localhost", textsafe.Escape(r.Host))
			return
		}
		if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				fail(w, http.StatusUnsupportedMediaType, "a body must be sent as Content-Type: application/json")
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

// hostAllowed accepts a Host header naming the loopback interface, or the
// very address the connection came in on (a server on a LAN address with a
// token); a name that resolves here is what DNS rebinding sends.
func hostAllowed(host string, local *net.TCPAddr) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	l, _ := netip.AddrFromSlice(local.IP)
	return a.IsLoopback() || a == l.Unmap()
}

// jsonSize is v's size as JSON.
func jsonSize(v any) int64 {
	b, _ := json.Marshal(v)
	return int64(len(b))
}

// room takes grow bytes of the document's cap for a write, or refuses the
// write (507) when they are not left; mu is held.
func (s *Server) room(w http.ResponseWriter, grow int64) bool {
	limit := s.MaxDocument
	if limit == 0 {
		limit = DefaultMaxDocument
	}
	if s.size+grow > limit {
		fail(w, http.StatusInsufficientStorage, "the State Hub document would be over its cap of %d bytes; nothing changed", limit)
		return false
	}
	s.size += grow
	return true
}

func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
				fail(w, http.StatusUnauthorized, "a bearer token is required")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly: one object, known fields, bounded size
// (guarded limits the body).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			fail(w, http.StatusRequestEntityTooLarge, "a body over %d bytes; at most %d", maxBody, maxBody)
			return false
		}
		fail(w, http.StatusBadRequest, "malformed JSON: %s", textsafe.Escape(err.Error()))
		return false
	}
	if dec.More() {
		fail(w, http.StatusBadRequest, "malformed JSON: more than one value")
		return false
	}
	return true
}

// nextRev hands out a revision; mu is held.
func (s *Server) nextRev() string {
	s.doc.Rev++
	return "r" + strconv.FormatInt(s.doc.Rev, 10)
}

// commit saves the document and tells the event streams; mu is held. A
// failed save leaves the file as it was and answers 500.
func (s *Server) commit(w http.ResponseWriter, kind, id string) bool {
	if err := s.save(); err != nil {
		fail(w, http.StatusInternalServerError, "cannot save: %s", textsafe.Escape(err.Error()))
		return false
	}
	for ch := range s.doc.events {
		select {
		case ch <- event{Kind: kind, ID: id}:
		default: // a slow reader misses a hint; polling stays the truth
		}
	}
	return true
}

// save replaces the data file atomically: a temporary file beside it,
// synced, renamed over it.
func (s *Server) save() error {
	if s.Data == "" {
		return nil
	}
	b, err := json.MarshalIndent(&s.doc, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Data), ".statehub-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.Data)
}

// checkID refuses an id that is empty, long, or not plain text.
func checkID(what, id string) error {
	if p := textsafe.NameProblem(id); p != "" {
		return fmt.Errorf("%s %q: %s", what, textsafe.Escape(id), p)
	}
	return nil
}

func (s *Server) getWorkplans(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	etag := `"` + strconv.FormatInt(s.doc.Rev, 10) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	wps := s.doc.Workplans
	if wps == nil {
		wps = []workplan{}
	}
	reply(w, map[string]any{"workplans": wps})
}

func checkWorkplan(wp workplan) error {
	if err := checkID("workplan id", wp.ID); err != nil {
		return err
	}
	if err := checkID("repo", wp.Repo); err != nil {
		return err
	}
	if !slices.Contains(contract.WorkplanStatuses, wp.Status) {
		return fmt.Errorf("workplan status %q is not one of %s", textsafe.Escape(wp.Status), strings.Join(contract.WorkplanStatuses, ", "))
	}
	seen := map[string]bool{}
	for _, t := range wp.Tasks {
		if err := checkID("task id", t.ID); err != nil {
			return err
		}
		if seen[t.ID] {
			return fmt.Errorf("task %s is listed twice", t.ID)
		}
		seen[t.ID] = true
		if err := checkID("repo of task "+t.ID, t.Repo); err != nil {
			return err
		}
		if !slices.Contains(contract.TaskStatuses, t.Status) {
			return fmt.Errorf("task %s: status %q is not one of %s", t.ID, textsafe.Escape(t.Status), strings.Join(contract.TaskStatuses, ", "))
		}
		if err := checkNote(t.Note); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	return nil
}

// checkNote refuses a note that is long or not one line of plain text.
func checkNote(note string) error {
	if len(note) > maxNote {
		return fmt.Errorf("a note of %d bytes; at most %d", len(note), maxNote)
	}
	if p := textsafe.ControlProblem(note); p != "" {
		return fmt.Errorf("the note %s", p)
	}
	return nil
}

// putWorkplan creates or replaces a workplan whole. A task that is the same
// as before keeps its revision; the workplan gets a new one.
func (s *Server) putWorkplan(w http.ResponseWriter, r *http.Request) {
	var wp workplan
	if !decode(w, r, &wp) {
		return
	}
	if wp.ID == "" {
		wp.ID = r.PathValue("id")
	}
	if wp.ID != r.PathValue("id") {
		fail(w, http.StatusBadRequest, "the body's id %q is not the path's %q", textsafe.Escape(wp.ID), textsafe.Escape(r.PathValue("id")))
		return
	}
	if err := checkWorkplan(wp); err != nil {
		fail(w, http.StatusBadRequest, "%s", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]task{}
	i := slices.IndexFunc(s.doc.Workplans, func(x workplan) bool { return x.ID == wp.ID })
	grow := jsonSize(wp)
	if i >= 0 {
		grow -= jsonSize(s.doc.Workplans[i])
		for _, t := range s.doc.Workplans[i].Tasks {
			old[t.ID] = t
		}
	}
	if !s.room(w, grow) {
		return
	}
	for j := range wp.Tasks {
		t := &wp.Tasks[j]
		prev, ok := old[t.ID]
		t.Revision = prev.Revision
		if !ok || !sameTask(prev, *t) {
			t.Revision = s.nextRev()
		}
	}
	wp.Revision = s.nextRev()
	if i >= 0 {
		s.doc.Workplans[i] = wp
	} else {
		s.doc.Workplans = append(s.doc.Workplans, wp)
	}
	if s.commit(w, "workplan", wp.ID) {
		reply(w, wp)
	}
}

func sameTask(a, b task) bool {
	a.Revision, b.Revision = "", ""
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// taskPatch is what PATCH /v1/tasks/{id} may change.
type taskPatch struct {
	Status            *string                    `json:"status"`
	NeedsHuman        *bool                      `json:"needs_human"`
	InterventionNotes *[]contract.Note           `json:"intervention_notes"`
	ProposedActions   *[]contract.ProposedAction `json:"proposed_actions"`
	SecretsRequired   *bool                      `json:"secrets_required"`
	// Note comes with a status an agent states (coordination-engine task
	// set); the task keeps the last one.
	Note *string `json:"note"`
}

func (s *Server) patchTask(w http.ResponseWriter, r *http.Request) {
	var p taskPatch
	if !decode(w, r, &p) {
		return
	}
	if p.Status != nil && !slices.Contains(contract.TaskStatuses, *p.Status) {
		fail(w, http.StatusBadRequest, "status %q is not one of %s", textsafe.Escape(*p.Status), strings.Join(contract.TaskStatuses, ", "))
		return
	}
	if p.Note != nil {
		if err := checkNote(*p.Note); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.doc.Workplans {
		wp := &s.doc.Workplans[i]
		for j := range wp.Tasks {
			if wp.Tasks[j].ID != id {
				continue
			}
			// Changed on a copy, so a change over the document's cap changes nothing.
			t := new(wp.Tasks[j])
			if p.Status != nil {
				t.Status = *p.Status
			}
			if p.NeedsHuman != nil {
				t.NeedsHuman = *p.NeedsHuman
			}
			if p.InterventionNotes != nil {
				t.InterventionNotes = *p.InterventionNotes
			}
			if p.ProposedActions != nil {
				t.ProposedActions = *p.ProposedActions
			}
			if p.SecretsRequired != nil {
				t.SecretsRequired = *p.SecretsRequired
			}
			if p.Note != nil {
				t.Note = *p.Note
			}
			if !s.room(w, jsonSize(t)-jsonSize(wp.Tasks[j])) {
				return
			}
			wp.Tasks[j] = *t
			t = &wp.Tasks[j]
			t.Revision = s.nextRev()
			wp.Revision = s.nextRev()
			if s.commit(w, "workplan", wp.ID) {
				reply(w, *t)
			}
			return
		}
	}
	fail(w, http.StatusNotFound, "no task %s", textsafe.Escape(id))
}

func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) {
	unread := r.URL.Query().Get("unread") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []contract.Message{}
	for _, m := range s.doc.Messages {
		if !unread || !m.Read {
			out = append(out, m.Message) // bodies only one at a time
		}
	}
	reply(w, map[string]any{"messages": out})
}

// getMessage serves one message with its body.
func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.messageOf(w, r); ok {
		reply(w, s.doc.Messages[i])
	}
}

// messageOf is the index of the message the request's path names, or
// false once it answered 404. The caller holds s.mu.
func (s *Server) messageOf(w http.ResponseWriter, r *http.Request) (int, bool) {
	id := r.PathValue("id")
	i := slices.IndexFunc(s.doc.Messages, func(x message) bool { return x.ID == id })
	if i < 0 {
		fail(w, http.StatusNotFound, "no message %s", textsafe.Escape(id))
	}
	return i, i >= 0
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	var m message
	if !decode(w, r, &m) {
		return
	}
	if len(m.Body) > contract.MaxMessageBody {
		fail(w, http.StatusBadRequest, "a body of %d bytes; at most %d", len(m.Body), contract.MaxMessageBody)
		return
	}
	for what, v := range map[string]string{"to_repo": m.ToRepo, "from": m.From} {
		if err := checkID(what, v); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == "" {
		m.ID = "m" + strconv.FormatInt(s.doc.Rev+1, 10)
	} else if err := checkID("message id", m.ID); err != nil {
		fail(w, http.StatusBadRequest, "%s", err)
		return
	}
	if slices.ContainsFunc(s.doc.Messages, func(x message) bool { return x.ID == m.ID }) {
		fail(w, http.StatusConflict, "message %s exists", m.ID)
		return
	}
	if !s.room(w, jsonSize(m)) {
		return
	}
	m.Revision = s.nextRev()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.Now()
	}
	s.doc.Messages = append(s.doc.Messages, m)
	if s.commit(w, "message", m.ID) {
		reply(w, m.Message)
	}
}

func (s *Server) readMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.messageOf(w, r)
	if !ok {
		return
	}
	if !s.doc.Messages[i].Read {
		s.doc.Messages[i].Read = true
		s.doc.Messages[i].Revision = s.nextRev()
		if !s.commit(w, "message", s.doc.Messages[i].ID) {
			return
		}
	}
	reply(w, s.doc.Messages[i].Message)
}

// getCheckpoints lists the checkpoints after the cursor, which is the count
// already seen.
func (s *Server) getCheckpoints(w http.ResponseWriter, r *http.Request) {
	since := 0
	if c := r.URL.Query().Get("since"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "cursor %q is not one this server gave", textsafe.Escape(c))
			return
		}
		since = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since = min(since, len(s.doc.Checkpoints))
	out := append([]contract.Checkpoint{}, s.doc.Checkpoints[since:]...)
	reply(w, map[string]any{"checkpoints": out, "cursor": strconv.Itoa(len(s.doc.Checkpoints))})
}

func (s *Server) postCheckpoint(w http.ResponseWriter, r *http.Request) {
	var c contract.Checkpoint
	if !decode(w, r, &c) {
		return
	}
	for what, v := range map[string]string{"repo": c.Repo, "lease_id": c.LeaseID} {
		if err := checkID(what, v); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	if strings.TrimSpace(c.Summary) == "" {
		fail(w, http.StatusBadRequest, "a checkpoint needs a summary")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.room(w, jsonSize(c)) {
		return
	}
	c.ID = "c" + strconv.Itoa(len(s.doc.Checkpoints)+1)
	if c.RecordedAt.IsZero() {
		c.RecordedAt = s.Now()
	}
	s.doc.Checkpoints = append(s.doc.Checkpoints, c)
	if s.commit(w, "checkpoint", c.ID) {
		reply(w, c)
	}
}

// postProgress stores receipts, once each by id.
func (s *Server) postProgress(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Receipts []json.RawMessage `json:"receipts"`
	}
	if !decode(w, r, &body) {
		return
	}
	if len(body.Receipts) > contract.MaxProgressBatch {
		fail(w, http.StatusBadRequest, "%d receipts in one batch; at most %d", len(body.Receipts), contract.MaxProgressBatch)
		return
	}
	ids := make([]string, len(body.Receipts))
	for i, raw := range body.Receipts {
		var rc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &rc); err != nil || rc.ID == "" {
			fail(w, http.StatusBadRequest, "receipt %d has no id", i+1)
			return
		}
		ids[i] = rc.ID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var grow int64
	for i, raw := range body.Receipts {
		if !s.doc.progressIDs[ids[i]] {
			grow += int64(len(raw)) + 1
		}
	}
	if !s.room(w, grow) {
		return
	}
	accepted := 0
	for i, raw := range body.Receipts {
		if !s.doc.progressIDs[ids[i]] {
			s.doc.progressIDs[ids[i]] = true
			s.doc.Progress = append(s.doc.Progress, raw)
			accepted++
		}
	}
	if accepted > 0 && !s.commit(w, "progress", "") {
		return
	}
	reply(w, map[string]int{"accepted": accepted})
}

func (s *Server) getProgress(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.doc.Progress
	if out == nil {
		out = []json.RawMessage{}
	}
	reply(w, map[string]any{"receipts": out})
}

// events streams a hint per change until the client goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		fail(w, http.StatusNotFound, "no event stream here")
		return
	}
	ch := make(chan event, 64)
	s.mu.Lock()
	s.doc.events[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.doc.events, ch)
		s.mu.Unlock()
	}()
	// A stream lasts as long as its client: the server's read and write
	// deadlines, which end slow requests, must not end it.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
