// Package github is GitHub Issues as a State Hub: the driver of the Hub
// port (internal/statehub) for [statehub] kind = "github". Each gita repo
// whose origin is a GitHub repository is watched as a workplan; its issues
// that carry the agent label are its tasks (mapping.go). Looks cost nothing
// when nothing changed: every read is conditional on the ETag GitHub gave
// (a 304 does not count against its rate limit), pages follow its Link
// headers, and its primary and secondary limits pause the requests until
// the time GitHub names (transport.go). Writes are what an agent states:
// a status as a label or a closing, a note as a comment. Receipts stay
// local unless [statehub.github] comment_on names some.
//
// It talks to GitHub through go-github (types, routes, Link pagination),
// over the checked HTTP client of internal/statehub: the token goes to
// statehub.api_base's host alone, over https (or to a loopback address, in
// tests), and never into a log, a receipt, a prompt or status.
package github

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Kind is the kind of State Hub this driver is.
const Kind = config.KindGitHub

// Options make a driver.
type Options struct {
	// APIBase is GitHub's API root: https://api.github.com, or a GitHub
	// Enterprise Server's https://HOST/api/v3 (http:// on a loopback
	// address in tests).
	APIBase string
	// Credential is statehub.credential_command, as ["gh", "auth",
	// "token"]; empty: requests go without a token (public repositories,
	// at GitHub's low anonymous limit).
	Credential []string
	Settings   config.GitHub
	// Registry is gita's registry: its repos are what may be watched.
	Registry func() (*gita.Registry, error)
	Clock    clock.Clock
	// Remote is the origin URL of the repository at path (nil: git's
	// answer, gita.Remote).
	Remote func(ctx context.Context, path string) (string, error)
	// OwnerOf stands in for the system's word on who owns a loopback
	// port (tests only; see statehub.OwnerFunc).
	OwnerOf statehub.OwnerFunc
	// Timeout bounds each request; zero means 10 seconds.
	Timeout time.Duration
}

// Driver reads and writes GitHub Issues for the engine.
type Driver struct {
	// Messages and checkpoints: GitHub has none (a task's discussion is
	// its issue's comments).
	statehub.NoMessages
	o       Options
	api     *url.URL
	web     string   // scheme://host of GitHub's pages for people
	hosts   []string // the hosts whose remotes name repositories here
	gh      *gogh.Client
	tr      *transport
	probe   *http.Client
	remotes remotes

	tokens statehub.TokenCache

	// lookMu makes looks one at a time; the look's caches are its own.
	lookMu sync.Mutex
	look   lookState

	// mu guards what the writes and status read of the last look.
	mu         sync.Mutex
	watched    map[string]string // "owner/name" → gita slug
	report     []statehub.Watched
	notWatched []statehub.Watched

	// posted are the receipt comments posted (receipt.go).
	postMu sync.Mutex
	posted map[string]bool
}

var _ statehub.Hub = (*Driver)(nil)

// New makes a driver; it sends nothing until it is used.
func New(o Options) (*Driver, error) {
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Remote == nil {
		o.Remote = func(ctx context.Context, path string) (string, error) { return gita.Remote(ctx, path, "origin") }
	}
	api, err := url.Parse(strings.TrimRight(o.APIBase, "/") + "/")
	if err != nil || api.Host == "" {
		return nil, errs.New(errs.ConfigInvalid, "statehub.api_base %q is not GitHub's API root", textsafe.RedactURL(o.APIBase))
	}
	if len(o.Credential) > 0 {
		if err := statehub.TokenAllowed(o.APIBase); err != nil {
			return nil, err
		}
	}
	checked, _, err := statehub.CheckedHTTPClient(o.APIBase, o.OwnerOf)
	if err != nil {
		return nil, err
	}
	d := &Driver{NoMessages: statehub.NoMessages{Tracker: "GitHub Issues"}, o: o, api: api, posted: map[string]bool{}}
	d.web, d.hosts = webOf(api)
	d.remotes = remotes{lookup: o.Remote, now: o.Clock.Now}
	d.tr = &transport{base: checked.Transport, api: api, clock: o.Clock, token: d.bearer,
		agent: "coordination-engine/" + buildinfo.Get().Version}
	d.probe = &http.Client{Transport: checked.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	hc := &http.Client{Transport: d.tr, CheckRedirect: redirectPolicy(api)}
	base := api.String()
	d.gh, err = gogh.NewClient(gogh.WithHTTPClient(hc), gogh.WithURLs(&base, &base), gogh.WithDisableRateLimitCheck())
	if err != nil {
		return nil, errs.Wrap(errs.ConfigInvalid, err, "GitHub's API root %s", textsafe.RedactURL(o.APIBase))
	}
	return d, nil
}

// webOf is where GitHub's pages are for an API root, and the hosts whose
// git remotes name repositories of it: github.com for api.github.com, the
// server itself for GitHub Enterprise (https://HOST/api/v3). A loopback
// root (a double, in tests) serves github.com's remotes too, so that a
// test can follow the docs' steps as written.
func webOf(api *url.URL) (web string, hosts []string) {
	host := api.Hostname()
	switch {
	case strings.EqualFold(host, "api.github.com"):
		return "https://github.com", []string{"github.com"}
	case loopback(host):
		return api.Scheme + "://" + api.Host, []string{host, "github.com"}
	}
	return api.Scheme + "://" + api.Host, []string{host}
}

func loopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// Kind is "github".
func (d *Driver) Kind() string { return Kind }

// Offers is what GitHub Issues has: task descriptions and status writes;
// no coordination messages, no checkpoints, no change hints (webhooks may
// come later, as hints); receipts stay local.
func (d *Driver) Offers() statehub.Offers {
	return statehub.Offers{TaskBodies: true, TaskSet: true, Receipts: "local"}
}

// Link is the page of a task (or of a repository, "owner/name") for people.
func (d *Driver) Link(id string) string {
	if repo, n, err := ParseTaskID(id); err == nil {
		return d.web + "/" + repo + "/issues/" + strconv.Itoa(n)
	}
	return d.web + "/" + id
}

// Report is what status shows: the repositories watched and not, the
// budget GitHub last named, a pause it asked for, the requests made.
func (d *Driver) Report() statehub.Report {
	r := statehub.Report{Kind: Kind, Requests: d.tr.requests.Load(), NotModified: d.tr.notModified.Load()}
	d.mu.Lock()
	r.Watched = append([]statehub.Watched(nil), d.report...)
	r.NotWatched = append([]statehub.Watched(nil), d.notWatched...)
	d.mu.Unlock()
	d.tr.budget.report(d.o.Clock.Now(), &r)
	return r
}

// Probe says whether GitHub's API answers at all.
func (d *Driver) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.api.String(), nil)
	if err != nil {
		return err
	}
	resp, err := d.probe.Do(req)
	if err != nil {
		return d.unreachable(err)
	}
	resp.Body.Close()
	return nil
}

// CheckAccess asks GitHub who the token belongs to.
func (d *Driver) CheckAccess(ctx context.Context) error {
	_, err := d.Whoami(ctx)
	return err
}

// bearer is the token, from the credential command when none is kept.
// Its output is never put in an error: it may be the secret.
func (d *Driver) bearer(ctx context.Context) (string, error) {
	return d.tokens.Get(ctx, d.o.Credential)
}

// call runs one request of go-github's with the driver's timeout; a 401
// drops the token and runs it once more with a fresh one (the token may
// have been renewed since it was read). Its error is the code's (failed).
func (d *Driver) call(ctx context.Context, what string, do func(ctx context.Context) (*gogh.Response, error)) (*gogh.Response, error) {
	for try := 0; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
		resp, err := do(rctx)
		cancel()
		if err == nil || notModified(err) {
			return resp, err
		}
		if statusOf(err) == http.StatusUnauthorized && len(d.o.Credential) > 0 && try == 0 {
			d.tokens.Drop()
			continue
		}
		return resp, d.failed(ctx, err, what)
	}
}

// errForbidden marks a 403 that is no rate limit: GitHub refused what was
// asked of one repository or issue, not the token as a whole (a 401).
var errForbidden = errors.New("forbidden")

// notModified says GitHub answered 304: what the caller holds is current.
func notModified(err error) bool { return statusOf(err) == http.StatusNotModified }

// responseOf is the answer a go-github error was made of, nil when it got
// none. go-github gives GitHub's refusals several types: its rate limits
// and its redirects have their own.
func responseOf(err error) *http.Response {
	var er *gogh.ErrorResponse
	var rl *gogh.RateLimitError
	var al *gogh.AbuseRateLimitError
	var re *gogh.RedirectionError
	switch {
	case errors.As(err, &er):
		return er.Response
	case errors.As(err, &rl):
		return rl.Response
	case errors.As(err, &al):
		return al.Response
	case errors.As(err, &re):
		return re.Response
	}
	return nil
}

// statusOf is the HTTP status of a go-github error, 0 when it got none.
func statusOf(err error) int {
	if resp := responseOf(err); resp != nil {
		return resp.StatusCode
	}
	return 0
}

// failed gives a failed request its code: GitHub's pause (unavailable,
// with the time to ask again), a refused token, a missing repository or
// issue, a refusal of what was asked, an outage. GitHub's own message is
// kept short and escaped: it is the server's text.
func (d *Driver) failed(ctx context.Context, err error, what string) error {
	rl, paused := pauseOf(err)
	if !paused && statusOf(err) != 0 {
		// A limit's refusal as go-github types it: the transport noted
		// the pause its answer asked for.
		var rle *gogh.RateLimitError
		var ale *gogh.AbuseRateLimitError
		if errors.As(err, &rle) || errors.As(err, &ale) {
			if gate := d.tr.budget.gate(d.o.Clock.Now()); gate != nil {
				rl, paused = pauseOf(gate)
			}
		}
	}
	if paused {
		return errs.Wrap(errs.Unavailable, rl, "GitHub: %s", what).
			WithHint("the engine asks again at %s by itself", rl.Until.UTC().Format(time.RFC3339))
	}
	if e := refusalOf(err); e != nil {
		return e
	}
	resp := responseOf(err)
	if resp == nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return errs.Wrap(errs.Timeout, err, "GitHub did not answer %s within %s", what, d.o.Timeout)
		}
		return d.unreachable(err)
	}
	var er *gogh.ErrorResponse
	said := ""
	if errors.As(err, &er) {
		said = serverSaid(er.Message)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized:
		return errs.New(errs.PermissionDeny, "GitHub refused the token (%d%s) to %s", code, said, what).
			WithHint("check statehub.credential_command (`gh auth status` says whether gh's token is valid)")
	case code == http.StatusForbidden:
		e := errs.New(errs.PermissionDeny, "GitHub refused %s (%d%s)", what, code, said).
			WithHint("the token needs read and write access to the repository's issues (a classic token's repo scope, or a fine-grained token's Issues: write)")
		e.Err = errForbidden
		return e
	case code == http.StatusNotFound:
		return errs.New(errs.NotFound, "GitHub has no %s (404%s)", strings.TrimPrefix(what, "read "), said)
	case code == http.StatusGone:
		return errs.New(errs.Unsupported, "GitHub: issues are disabled for %s (410)", what).
			WithHint("enable issues in the repository's settings, or map the repo elsewhere in [statehub.github] repos")
	case code == http.StatusUnprocessableEntity || code == http.StatusBadRequest:
		return errs.New(errs.BadRequest, "GitHub refused %s (%d%s)", what, code, said)
	case code >= 300 && code < 400:
		return errs.New(errs.Unavailable, "GitHub answered %d to %s, a redirect to %s; it is not followed off %s (the token goes there only)",
			code, what, redactedURL(resp.Header.Get("Location")), d.api.Host).
			WithHint("point statehub.api_base at the API root that answers")
	}
	return errs.New(errs.Unavailable, "GitHub answered %d to %s%s", resp.StatusCode, what, said)
}

// pauseOf is the pause GitHub asked for that err carries.
func pauseOf(err error) (*statehub.RetryLater, bool) {
	var rl *statehub.RetryLater
	return rl, errors.As(err, &rl)
}

// redactedURL is a URL as a message may show it: its scheme, host and
// path, without user information or query (either may hold a secret).
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an address that is not a URL"
	}
	return textsafe.Escape((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String())
}

// unreachable is the error of a request that got no answer.
func (d *Driver) unreachable(err error) error {
	if e := refusalOf(err); e != nil {
		return e
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return errs.Wrap(errs.Unavailable, err, "GitHub's API at %s is not reachable", textsafe.RedactURL(d.o.APIBase))
}

// refusalOf is a check's own refusal (the credential command, a listener
// of another user) inside what net/http returns, as it was made.
func refusalOf(err error) *errs.Error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// serverSaid is GitHub's message, short and inert: ": message".
func serverSaid(msg string) string {
	if msg == "" {
		return ""
	}
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	return ": " + textsafe.Escape(msg)
}

// The routes GitHub has no equivalent for: no coordination messages and
// no checkpoints (statehub.NoMessages, embedded), no change hints.

// Events: none; polling with conditional requests is the truth.
func (d *Driver) Events(context.Context, func(), func()) error { return statehub.ErrNoEvents }
