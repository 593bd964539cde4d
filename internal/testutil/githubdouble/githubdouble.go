package githubdouble

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options shape a double; zero values take the defaults noted.
type Options struct {
	Token  string   // the token every request must carry as "Authorization: Bearer T" or "token T"; "" → "ghp_double_token"
	Login  string   // the token's owner, answered by GET /user; "" → "octocat"
	Scopes []string // X-OAuth-Scopes on every authorized answer (classic token); nil → []string{"repo"}
	// PathPrefix is the API root's path: "" for api.github.com's form, "/api/v3" for a GitHub Enterprise Server.
	PathPrefix string
	// WebHost is the host of html_url values: "" → "github.com".
	WebHost string
	// RateLimit is the primary limit per hour; 0 → 5000. Now is the clock (nil → time.Now) for created_at/updated_at, the rate window and Retry-After windows.
	RateLimit int
	Now       func() time.Time
}

// apiVersion is the only REST API version the double speaks.
const apiVersion = "2022-11-28"

// watchBuffer is how many answered requests a Watch channel holds for a
// reader that has not caught up; requests beyond it are not sent on that
// channel (Requests still has them), so a stalled reader never stalls the
// server.
const watchBuffer = 1 << 14

// Server is one double: the world (repositories, issues, labels,
// comments, dependencies), the token, the rate-limit state and the record
// of requests, all behind one mutex so that the HTTP server's goroutines
// and the test's calls can run at once.
type Server struct {
	opts   Options
	prefix string

	mu    sync.Mutex
	token string
	world world
	pages map[string]pageAnswer

	rate      primaryLimit
	secondary secondaryLimit
	redirects map[string]string
	fails     map[string]int

	requests []Request
	watchers []chan Request
	reqSeq   uint64

	ts  *httptest.Server
	url string
}

// Request is one request as the double answered it.
type Request struct {
	Method, Path        string // Path with the query, after PathPrefix, as received
	Status              int
	Conditional         bool // it carried If-None-Match
	Authorized          bool // it carried the right token
	CountedAgainstLimit bool // it used up one of the primary limit (304s and /rate_limit do not)
	At                  time.Time
}

// New returns a double not yet listening: serve its Handler, or use Start.
func New(o Options) *Server {
	if o.Token == "" {
		o.Token = "ghp_double_token"
	}
	if o.Login == "" {
		o.Login = "octocat"
	}
	if o.Scopes == nil {
		o.Scopes = []string{"repo"}
	}
	if o.WebHost == "" {
		o.WebHost = "github.com"
	}
	if o.RateLimit <= 0 {
		o.RateLimit = 5000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Scopes = append([]string(nil), o.Scopes...)
	prefix := strings.TrimRight(o.PathPrefix, "/")
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	s := &Server{
		opts:      o,
		prefix:    prefix,
		token:     o.Token,
		pages:     map[string]pageAnswer{},
		redirects: map[string]string{},
		fails:     map[string]int{},
	}
	s.world.init(o.Login, s.now())
	return s
}

// Start serves s on a fresh 127.0.0.1 port until the test ends and returns
// it; URL() is then the API root, e.g. "http://127.0.0.1:41234" or
// ".../api/v3". A failed test logs the requests the double answered.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := New(o)
	s.ts = httptest.NewServer(s.Handler())
	s.url = s.ts.URL + s.prefix
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			for _, r := range s.Requests() {
				b.WriteString(r.Method + " " + r.Path + " " + strconv.Itoa(r.Status) + "\n")
			}
			t.Logf("github double requests:\n%s", b.String())
		}
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
	return s
}

// Handler serves the API under Options.PathPrefix.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// URL is the API root once Start has run ("" before).
func (s *Server) URL() string { return s.url }

// Token is the token requests must carry.
func (s *Server) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// SetToken changes the token, as when it is revoked and a new one made:
// the old one is answered 401 "Bad credentials" from now on.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

func (s *Server) now() time.Time { return s.opts.Now().UTC().Truncate(time.Second) }

// Requests returns every request answered so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests forgets the requests answered so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Watch returns a channel that receives each request as it is answered,
// from now on. It holds up to 16,384 requests a slow reader has not taken;
// later ones are dropped from that channel only (Requests keeps them all).
func (s *Server) Watch() <-chan Request {
	ch := make(chan Request, watchBuffer)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, ch)
	return ch
}

// Redirect answers requests whose path (after PathPrefix) starts with
// pathPrefix with 301 and Location: location + the rest of the path and
// query, as GitHub answers for a renamed or transferred repository (a
// client must not follow one to another host with its token).
// Redirect(pathPrefix, "") stops it.
func (s *Server) Redirect(pathPrefix, location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if location == "" {
		delete(s.redirects, pathPrefix)
		return
	}
	s.redirects[pathPrefix] = location
}

// Fail answers status (e.g. 500, 502) to requests whose path (after
// PathPrefix) starts with pathPrefix, until Fail(pathPrefix, 0).
func (s *Server) Fail(pathPrefix string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == 0 {
		delete(s.fails, pathPrefix)
		return
	}
	s.fails[pathPrefix] = status
}

// answer is a response worked out under the mutex and written after it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// pageAnswer is a list page as last answered: the issues it held at
// their revisions, its body and its ETag, so that a page none of whose
// issues changed is neither rendered nor hashed again.
type pageAnswer struct {
	stamps []issueStamp
	body   []byte
	etag   string
}

type issueStamp struct {
	issue *issue
	rev   uint64
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Read the body before taking the mutex: a slow client must not hold
	// up everyone else.
	var body []byte
	if r.Body != nil { // a request handed to ServeHTTP directly may have none
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, 10<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	a, rec := s.handle(r, body)
	s.record(rec)
	s.mu.Unlock()

	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	if len(a.body) > 0 {
		w.Write(a.body)
	}
}

// record keeps rec and hands it to the watchers. It runs before the
// answer is written, so a client that has its answer finds it in
// Requests.
func (s *Server) record(rec Request) {
	s.requests = append(s.requests, rec)
	for _, ch := range s.watchers {
		select {
		case ch <- rec:
		default:
		}
	}
}

// handle answers one request, in this order: authentication, the API
// version, the secondary and primary limits, the Fail and Redirect
// shapings, the route, then the conditional GET.
func (s *Server) handle(r *http.Request, body []byte) (answer, Request) {
	exact := s.opts.Now().UTC()
	now := exact.Truncate(time.Second)
	s.reqSeq++
	reqID := requestID(s.reqSeq, now)
	rel, inPrefix := strings.CutPrefix(r.URL.EscapedPath(), s.prefix)
	if !inPrefix || (rel != "" && rel[0] != '/') {
		rel = r.URL.EscapedPath()
		inPrefix = false
	}
	recPath := rel
	if r.URL.RawQuery != "" {
		recPath += "?" + r.URL.RawQuery
	}
	rec := Request{
		Method:      r.Method,
		Path:        recPath,
		Conditional: r.Header.Get("If-None-Match") != "",
		At:          now,
	}
	finish := func(a answer) (answer, Request) {
		a.header.Set("X-GitHub-Request-Id", reqID)
		rec.Status = a.status
		return a, rec
	}

	a := newAnswer()
	switch tok, ok := bearer(r.Header.Get("Authorization")); {
	case !ok:
		a.error(http.StatusUnauthorized, "Requires authentication", docsRoot)
		return finish(a)
	case tok == "" || tok != s.token:
		a.error(http.StatusUnauthorized, "Bad credentials", docsRoot)
		return finish(a)
	}
	rec.Authorized = true
	a.header.Set("X-OAuth-Scopes", strings.Join(s.opts.Scopes, ", "))
	a.header.Set("X-Accepted-OAuth-Scopes", acceptedScopes(rel))
	a.header.Set("X-GitHub-Api-Version-Selected", apiVersion)
	rateLimitRoute := inPrefix && rel == "/rate_limit"
	if s.refuse(r, &a, rel, rateLimitRoute, exact, reqID) {
		s.rate.setHeaders(a.header, now, s.opts.RateLimit)
		return finish(a)
	}

	counted := !rateLimitRoute
	if match, to, ok := longestPrefix(s.redirects, rel); ok {
		loc := to + rel[len(match):]
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		a.header.Set("Location", loc)
		a.status = http.StatusMovedPermanently
		a.json(errorBody{Message: "Moved Permanently", URL: loc, DocumentationURL: "https://docs.github.com/v3/#http-redirects", Status: "301"})
	} else if !inPrefix {
		a.notFound(docsRoot)
	} else {
		c := &call{s: s, r: r, rel: rel, body: body, now: now, base: apiBase(r, s.prefix), a: &a}
		c.route()
	}

	if r.Method == http.MethodGet && a.status == http.StatusOK && a.cache(r) {
		// GitHub's docs: a conditional request answered 304 does not
		// count against the primary limit.
		counted = false
	}
	if counted {
		s.rate.count(now)
		rec.CountedAgainstLimit = true
	}
	s.rate.setHeaders(a.header, now, s.opts.RateLimit)
	return finish(a)
}

// refuse answers a request GitHub would turn away before its route: an API
// version this double does not serve, the secondary or primary rate limit
// (never for /rate_limit itself), or a failure set on the path.
func (s *Server) refuse(r *http.Request, a *answer, rel string, rateLimitRoute bool, exact time.Time, reqID string) bool {
	now := exact.Truncate(time.Second)
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != apiVersion {
		a.error(http.StatusBadRequest, "API version "+v+" is not supported by this double; it serves "+apiVersion+".", docsRoot+"/about-the-rest-api/api-versions")
		return true
	}
	if s.secondary.refuses(exact) {
		s.secondary.early++
		s.secondary.refuse(a, exact, reqID)
		return true
	}
	s.rate.roll(now)
	if !rateLimitRoute && s.rate.spent(s.opts.RateLimit) {
		s.rate.refuse(a, now, s.opts.RateLimit, s.world.me.id, reqID)
		return true
	}
	if _, status, ok := longestPrefix(s.fails, rel); ok {
		a.error(status, failMessage(status), docsRoot)
		return true
	}
	return false
}

// cache gives a GET's 200 answer its ETag and cache headers, and turns it
// into 304 Not Modified when the request's If-None-Match holds that tag,
// which it reports.
func (a *answer) cache(r *http.Request) (notModified bool) {
	tag := a.header.Get("ETag")
	if tag == "" {
		tag = etagOf(a.body)
		a.header.Set("ETag", tag)
	}
	a.header.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	a.header.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, Accept, X-Requested-With")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, tag) {
		a.status = http.StatusNotModified
		a.body = nil
		a.header.Del("Content-Type")
		a.header.Del("Link")
		return true
	}
	return false
}

// bearer reads the token from an Authorization header of the forms GitHub
// accepts for a token: "Bearer T", "token T", and Basic with the token as
// the password. Any other header is no authentication at all.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return strings.TrimSpace(tok), true
	case "basic":
		pair, err := base64.StdEncoding.DecodeString(strings.TrimSpace(tok))
		if err != nil {
			return "", true // a malformed Basic header is bad credentials
		}
		_, password, _ := strings.Cut(string(pair), ":")
		return password, true
	}
	return "", false
}

// acceptedScopes is X-Accepted-OAuth-Scopes: the scopes GitHub checks for
// the route (repository routes need repo; /user and /rate_limit none).
func acceptedScopes(rel string) string {
	if strings.HasPrefix(rel, "/repos/") || strings.HasPrefix(rel, "/repositories/") {
		return "repo"
	}
	return ""
}

func failMessage(status int) string {
	if status >= 500 {
		return "Server Error"
	}
	return http.StatusText(status)
}

// longestPrefix finds the entry of m whose key is the longest prefix of
// path, so that a narrower Fail or Redirect wins over a wider one.
func longestPrefix[V any](m map[string]V, path string) (key string, v V, found bool) {
	for k, kv := range m {
		if strings.HasPrefix(path, k) && (!found || len(k) > len(key)) {
			key, v, found = k, kv, true
		}
	}
	return key, v, found
}

// requestID is an X-GitHub-Request-Id of GitHub's shape
// ("1C45:12F767:6C7E73:D8C627:6814705C"); GitHub quotes it in rate-limit
// messages.
func requestID(seq uint64, now time.Time) string {
	return strings.ToUpper(strconv.FormatUint(0x1000+seq%0xF000, 16) + ":" +
		strconv.FormatUint(0x100000+seq*7%0xF00000, 16) + ":" +
		strconv.FormatUint(0x100000+seq*13%0xF00000, 16) + ":" +
		strconv.FormatUint(0x1000000+seq*31%0xF000000, 16) + ":" +
		strconv.FormatInt(now.Unix(), 16))
}

// apiBase is the API root as the client reached it (scheme, host and
// PathPrefix), for the url fields and Link headers: a client following
// them stays on the double.
func apiBase(r *http.Request, prefix string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix
}

// etagOf is a weak ETag of GitHub's form (W/"<64 hex>"): the SHA-256 of
// the body sent.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `W/"` + hex.EncodeToString(sum[:]) + `"`
}

// etagMatches applies If-None-Match's weak comparison: W/"x" and "x" are
// the same tag, and the header may list several or be "*".
func etagMatches(header, tag string) bool {
	opaque := strings.TrimPrefix(tag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == opaque {
			return true
		}
	}
	return false
}

func newAnswer() answer {
	h := http.Header{}
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	return answer{status: http.StatusOK, header: h}
}

// json sets the body to v as GitHub writes it.
func (a *answer) json(v any) { a.raw(encode(v)) }

// raw sets the body to JSON already encoded.
func (a *answer) raw(body []byte) {
	a.body = body
	a.header.Set("Content-Type", "application/json; charset=utf-8")
}

// encode writes v as GitHub does: compact, and without escaping <, > and
// & (encoding/json's default escapes them).
func encode(v any) []byte {
	var buf bytes.Buffer
	enc := jsonEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		panic("githubdouble: encoding an answer: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
