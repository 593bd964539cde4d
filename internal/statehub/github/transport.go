package github

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/statehub"
)

// transport is what every request to GitHub goes through, below go-github:
//
//   - the rate gate: while GitHub has asked for no requests (its primary
//     limit spent until its reset, or a secondary limit's Retry-After), a
//     request fails at once with statehub.RetryLater and nothing is sent:
//     retrying early only makes a secondary limit longer;
//   - the token, on requests to the API's own scheme and host only;
//   - If-None-Match, when the caller's context carries the ETag it holds
//     (withETag), so that an unchanged answer is a free 304;
//   - a bound on what an answer may hold, and the counts status shows.
//
// go-github's own rate checks are off (they keep time by the wall clock);
// this one keeps it by the engine's injected clock.
type transport struct {
	base   http.RoundTripper
	api    *url.URL
	clock  clock.Clock
	token  func(context.Context) (string, error)
	agent  string
	budget rateState

	requests, notModified atomic.Int64
}

// maxAnswer bounds one answer: a page of 100 issues with the longest
// bodies GitHub allows is under 30 MB.
const maxAnswer = 32 << 20

type etagKey struct{}

// withETag makes the request sent with ctx conditional on etag.
func withETag(ctx context.Context, etag string) context.Context {
	if etag == "" {
		return ctx
	}
	return context.WithValue(ctx, etagKey{}, etag)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.budget.gate(t.clock.Now()); err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	if req.URL.Scheme == t.api.Scheme && req.URL.Host == t.api.Host {
		token, err := t.token(req.Context())
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	if etag, ok := req.Context().Value(etagKey{}).(string); ok {
		req.Header.Set("If-None-Match", etag)
	}
	req.Header.Set("User-Agent", t.agent)
	t.requests.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified {
		t.notModified.Add(1)
	}
	t.budget.note(resp, t.clock.Now())
	resp.Body = &boundedBody{rc: resp.Body, left: maxAnswer}
	return resp, nil
}

// boundedBody fails a read past its bound rather than hand on a
// truncated document.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("GitHub's answer is over %d MiB; refusing the rest", maxAnswer>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// rateState is GitHub's request budget as its answers last said it, and the
// pause it asked for.
type rateState struct {
	mu          sync.Mutex
	budget      *statehub.Budget
	pausedUntil time.Time
	why         string
}

// minSecondaryWait is how long a secondary limit that names no wait pauses
// the requests: GitHub's docs say to wait at least a minute then.
const minSecondaryWait = time.Minute

// gate refuses a request while GitHub asked for none.
func (r *rateState) gate(now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Before(r.pausedUntil) {
		return &statehub.RetryLater{Until: r.pausedUntil, Reason: r.why}
	}
	return nil
}

// note reads the budget an answer carries and, for a limit's refusal, the
// pause it asks for: Retry-After (a secondary limit), else the reset of a
// spent primary limit, else, for a secondary limit that names no time, a
// minute.
func (r *rateState) note(resp *http.Response, now time.Time) {
	h := resp.Header
	var budget *statehub.Budget
	if limit, err := strconv.Atoi(h.Get("X-RateLimit-Limit")); err == nil {
		remaining, _ := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
		reset, _ := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
		budget = &statehub.Budget{Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0).UTC()}
	}
	var until time.Time
	var why string
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		secs, retryErr := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
		switch {
		case retryErr == nil && secs >= 0:
			until, why = now.Add(time.Duration(secs)*time.Second), "GitHub's secondary rate limit: it asked to wait"
		case h.Get("X-RateLimit-Remaining") == "0" && budget != nil:
			until, why = budget.Reset, "GitHub's rate limit is spent (0 of "+strconv.Itoa(budget.Limit)+" requests left)"
		case secondaryLimit(resp):
			until, why = now.Add(minSecondaryWait), "GitHub's secondary rate limit (no wait named: a minute)"
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if budget != nil {
		r.budget = budget
	}
	if until.After(r.pausedUntil) {
		r.pausedUntil, r.why = until, why
	}
}

// secondaryLimit tells a refusal for a secondary limit that came without a
// Retry-After by what its body says; the body is put back for the caller.
func secondaryLimit(resp *http.Response) bool {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return err == nil && bytes.Contains(bytes.ToLower(b), []byte("secondary rate limit"))
}

// report is the budget and pause for status.
func (r *rateState) report(now time.Time, rep *statehub.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budget != nil {
		b := *r.budget
		rep.Budget = &b
	}
	if now.Before(r.pausedUntil) {
		until := r.pausedUntil.UTC()
		rep.PausedUntil, rep.PauseReason = &until, r.why
	}
}

// redirectPolicy follows GitHub's redirects within the API's own scheme
// and host (a renamed or moved repository answers 301) and no others: the
// token goes to statehub.api_base's host alone.
func redirectPolicy(api *url.URL) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != api.Scheme || req.URL.Host != api.Host || len(via) >= 5 {
			return http.ErrUseLastResponse
		}
		return nil
	}
}
