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
	// With a token, connections that have not presented it yet are capped
	// apart (listen.go): as many again as the authenticated, for long
	// enough for any client's first request, which a client sends the
	// moment it connects.
	DefaultMaxPending     = 64
	DefaultPendingTimeout = 5 * time.Second
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

// Server is a reference State Hub. It keeps the document, its lock and its
// file; each resource's routes are a type of their own over it
// (workplans.go, messages.go, checkpoints.go, progress.go, events.go).
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
	// answered 503 and closed. With a Token only the connections that have
	// presented it count. 0: DefaultMaxConns.
	MaxConns int
	// With a Token, MaxPending caps the connections that have not
	// presented it yet (a new one over the cap closes the oldest of them),
	// and PendingTimeout closes one that has not by then. 0: the defaults.
	MaxPending     int
	PendingTimeout time.Duration

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
	wps, msgs, cps, prog := workplanRoutes{s}, messageRoutes{s}, checkpointRoutes{s}, progressRoutes{s}
	mux.HandleFunc("GET /v1/workplans", wps.getWorkplans)
	mux.HandleFunc("PUT /v1/workplans/{id}", wps.putWorkplan)
	mux.HandleFunc("PATCH /v1/tasks/{id}", wps.patchTask)
	mux.HandleFunc("GET /v1/messages", msgs.getMessages)
	mux.HandleFunc("POST /v1/messages", msgs.postMessage)
	mux.HandleFunc("GET /v1/messages/{id}", msgs.getMessage)
	mux.HandleFunc("POST /v1/messages/{id}/read", msgs.readMessage)
	mux.HandleFunc("GET /v1/checkpoints", cps.getCheckpoints)
	mux.HandleFunc("POST /v1/checkpoints", cps.postCheckpoint)
	mux.HandleFunc("POST /v1/progress", prog.postProgress)
	mux.HandleFunc("GET /v1/progress", prog.getProgress)
	mux.HandleFunc("GET /v1/events", eventRoutes{s}.stream)
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
			// The connection counts toward the cap from now on (listen.go).
			if c, ok := r.Context().Value(connKey{}).(*limitConn); ok && !c.authenticated() {
				w.Header().Set("Connection", "close")
				fail(w, http.StatusServiceUnavailable, "too many connections; try again")
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
