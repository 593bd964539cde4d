package modelserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Step is one move of a script: a shell command the agent runs as a tool
// call, or a text reply. A step with a Command is a tool call (its Text, if
// any, is shown before it); a step with only Text is the final reply and
// ends the agent's turn, so steps after it are never reached.
type Step struct {
	Text    string
	Command string
	// Escalate asks to run Command outside the agent's sandbox, where the
	// agent's tool offers that (Codex's sandbox_permissions
	// "require_escalated"): the agent asks the user first. Claude Code asks
	// for any command its rules do not allow.
	Escalate bool
}

// Run is a step that runs command through the agent's shell tool.
func Run(command string) Step { return Step{Command: command} }

// Ask is a step that runs command through the agent's shell tool after
// asking the user (Escalate).
func Ask(command string) Step { return Step{Command: command, Escalate: true} }

// Say is the final text reply that ends the turn.
func Say(text string) Step { return Step{Text: text} }

// Rule scripts the answer to a user prompt: it matches when the prompt
// contains Contains (if set) and matches Regexp (if set); Steps computes
// the script from the prompt.
type Rule struct {
	Contains string
	Regexp   *regexp.Regexp
	Steps    func(prompt string) []Step
}

// On is a rule for prompts containing substr, answered with fixed steps.
func On(substr string, steps ...Step) Rule {
	return Rule{Contains: substr, Steps: func(string) []Step { return steps }}
}

func (r Rule) matches(prompt string) bool {
	if r.Contains == "" && r.Regexp == nil {
		return false
	}
	return strings.Contains(prompt, r.Contains) && (r.Regexp == nil || r.Regexp.MatchString(prompt))
}

// Agent names, as recorded in Request.Agent.
const (
	Claude = "claude" // the Anthropic Messages API
	Codex  = "codex"  // the OpenAI Responses API
	Gemini = "gemini" // the Gemini API
)

// Request is one request the server answered.
type Request struct {
	Time   time.Time
	Agent  string // Claude, Codex or Gemini (from the path), "" for other paths
	Method string
	Path   string
	Stream bool
	Model  string
	// Tools names the tools the request offered; Shell is the one the
	// server would call commands through ("" when none fits).
	Tools []string
	Shell string
	// Prompt is the newest user prompt in the conversation; Rule the index
	// of the rule it matched, -1 for none.
	Prompt string
	Rule   int
	// ToolResults are the tool results that follow the prompt, oldest
	// first: their count picks the next step.
	ToolResults []string
	Reply       string // what the server answered, in short
	Status      int
	Body        []byte // the raw request body
}

func (r Request) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Method, r.Path)
	if r.Agent != "" {
		fmt.Fprintf(&b, " [%s model=%q stream=%v tools=%d shell=%q]", r.Agent, r.Model, r.Stream, len(r.Tools), r.Shell)
	}
	if r.Prompt != "" {
		fmt.Fprintf(&b, " prompt=%q rule=%d", textsafe.Cut(r.Prompt, 120), r.Rule)
	}
	for i, res := range r.ToolResults {
		fmt.Fprintf(&b, "\n    result %d: %q", i+1, textsafe.Cut(res, 200))
	}
	fmt.Fprintf(&b, " -> %d %s", r.Status, r.Reply)
	return b.String()
}

// Server is a scripted model server: it answers the Anthropic Messages API
// (for Claude Code) and the OpenAI Responses API (for Codex) from its rules.
type Server struct {
	// URL is the base URL, http://127.0.0.1:PORT: ANTHROPIC_BASE_URL for
	// Claude Code; Codex's provider base_url is URL+"/v1".
	URL string
	// Unmatched is the text answered to a prompt no rule matches, and to
	// helper calls (titles, summaries) that offer no shell tool; set it
	// before the agents start.
	Unmatched string

	rules []Rule
	ts    *httptest.Server

	mu       sync.Mutex
	requests []Request
}

// New starts a server answering with rules (the first that matches wins);
// Close stops it.
func New(rules ...Rule) *Server {
	s := &Server{Unmatched: "OK.", rules: rules}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.ts.URL
	return s
}

// Start is New for one test: the server stops when the test ends, and a
// failed test logs every request it answered.
func Start(t testing.TB, rules ...Rule) *Server {
	t.Helper()
	s := New(rules...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("model server requests:\n%s", s.Log())
		}
		s.Close()
	})
	return s
}

// Close stops the server, cutting open connections.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// Requests returns a copy of every request answered so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Log is the requests answered so far, one a line, for a failed test.
func (s *Server) Log() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ToolCalls returns the commands the server asked agent to run (one per
// answered step, retries included), oldest first.
func (s *Server) ToolCalls(agent string) []string {
	var out []string
	for _, r := range s.Requests() {
		if r.Agent == agent {
			if c, ok := strings.CutPrefix(r.Reply, "run "); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

// script works out the answer to a conversation whose newest user prompt
// is prompt, followed by results tool results: the step to take, and the
// index of the rule that matched (-1 for none). A request that offers no
// shell tool is the agent's helper call (a title, a summary): the rules
// are not consulted and it gets the Unmatched text.
func (s *Server) script(prompt string, results int, canRun bool) (Step, int) {
	if !canRun {
		return Say(s.Unmatched), -1
	}
	for i, r := range s.rules {
		if !r.matches(prompt) {
			continue
		}
		steps := r.Steps(prompt)
		if results >= len(steps) {
			return Say(s.Unmatched), i
		}
		return steps[results], i
	}
	return Say(s.Unmatched), -1
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// callID is a stable id for the tool call at step n of prompt, so a
// retried request gets the same id.
func callID(prompt string, n int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s", n, prompt))
	return hex.EncodeToString(h[:12])
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Rule: -1, Body: body}
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		// Codex with the built-in OpenAI provider tries the Responses API
		// over a websocket first; 426 sends it to HTTP at once.
		http.Error(rec, "websockets are not served: use HTTP", http.StatusUpgradeRequired)
		req.Reply = "websocket refused"
	case r.Method == http.MethodPost && path == "/v1/messages":
		req.Agent = Claude
		s.messages(rec, body, &req)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		req.Agent = Claude
		writeJSON(rec, map[string]any{"input_tokens": tokens(body)})
		req.Reply = "count_tokens"
	case r.Method == http.MethodPost && path == "/v1/responses":
		req.Agent = Codex
		s.responses(rec, body, &req)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/"):
		req.Agent = Gemini
		s.gemini(rec, r, body, &req)
	case r.Method == http.MethodGet && (path == "/v1/models" || path == "/models"):
		writeJSON(rec, modelList())
		req.Reply = "models"
	case r.Method == http.MethodHead:
		req.Reply = "empty"
	case r.Method == http.MethodGet:
		writeJSON(rec, map[string]any{})
		req.Reply = "{}"
	default:
		http.Error(rec, "not scripted", http.StatusNotFound)
		req.Reply = "not scripted"
	}
	req.Status = rec.status
	s.record(req)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// tokens is a rough token count of a request body, for usage fields.
func tokens(body []byte) int { return len(body)/4 + 1 }

// sse writes server-sent events, flushing after each.
type sse struct{ w http.ResponseWriter }

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

func (e sse) event(name string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// data writes one unnamed event, as the Gemini API streams (alt=sse).
func (e sse) data(data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "data: %s\r\n\r\n", b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func modelList() map[string]any {
	var data []map[string]any
	for _, id := range []string{"claude-sonnet-4-5", "gpt-5-codex"} {
		data = append(data, map[string]any{"id": id, "object": "model", "type": "model", "created": 0, "owned_by": "modelserver", "display_name": id})
	}
	return map[string]any{"object": "list", "data": data, "has_more": false}
}

// schemaValue is a value that fits a JSON schema, for a helper call that
// asks for structured output (Codex's thread title is {"title": "..."}):
// every string is text, cut to its maxLength.
func schemaValue(schema json.RawMessage, text string) any {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Items      json.RawMessage            `json:"items"`
		Enum       []any                      `json:"enum"`
		MaxLength  int                        `json:"maxLength"`
	}
	json.Unmarshal(schema, &s)
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	typ, _ := s.Type.(string)
	if types, ok := s.Type.([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	typ = strings.ToLower(typ) // the Gemini API's schemas say "OBJECT", "STRING"
	switch {
	case typ == "object" || s.Properties != nil:
		obj := map[string]any{}
		for name, p := range s.Properties {
			obj[name] = schemaValue(p, text)
		}
		return obj
	case typ == "array":
		return []any{}
	case typ == "integer" || typ == "number":
		return 0
	case typ == "boolean":
		return false
	case typ == "null":
		return nil
	}
	if r := []rune(text); s.MaxLength > 0 && len(r) > s.MaxLength {
		text = string(r[:s.MaxLength]) // maxLength counts characters
	}
	return text
}

// structured is text as the JSON a json_schema output format asks for.
func structured(schema json.RawMessage, text string) string {
	b, _ := json.Marshal(schemaValue(schema, text))
	return string(b)
}
