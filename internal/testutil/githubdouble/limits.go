package githubdouble

import (
	"net/http"
	"strconv"
	"time"
)

// The documentation_url values of GitHub's rate-limit refusals, as seen in
// real answers (the description has no example of either): clients such
// as go-github recognise a secondary limit by the URL's
// "secondary-rate-limits" suffix.
const (
	primaryLimitDocs   = "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
	secondaryLimitDocs = "https://docs.github.com/en/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// primaryLimit is the hourly "core" budget of the token's user. GitHub's
// window starts with the first request that counts and lasts an hour;
// X-RateLimit-Reset is its end in epoch seconds.
type primaryLimit struct {
	start time.Time // zero: no window open
	used  int
}

// roll closes a window whose hour is over, so the next counted request
// opens a fresh one.
func (p *primaryLimit) roll(now time.Time) {
	if !p.start.IsZero() && !now.Before(p.start.Add(time.Hour)) {
		p.start, p.used = time.Time{}, 0
	}
}

func (p *primaryLimit) resetAt(now time.Time) time.Time {
	if p.start.IsZero() {
		return now.Add(time.Hour)
	}
	return p.start.Add(time.Hour)
}

func (p *primaryLimit) spent(limit int) bool { return p.used >= limit }

func (p *primaryLimit) count(now time.Time) {
	if p.start.IsZero() {
		p.start = now
	}
	p.used++
}

// setHeaders writes the X-RateLimit-* headers GitHub puts on every
// authorized answer, as they stand after this request.
func (p *primaryLimit) setHeaders(h http.Header, now time.Time, limit int) {
	p.roll(now)
	used := min(p.used, limit)
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(limit-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(p.resetAt(now).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// refuse is GitHub's answer once the budget is used up: 403 with
// X-RateLimit-Remaining: 0 (set by setHeaders) and this message.
func (p *primaryLimit) refuse(a *answer, now time.Time, limit int, userID int64, reqID string) {
	a.status = http.StatusForbidden
	a.json(rateLimitBody{
		Message: "API rate limit exceeded for user ID " + strconv.FormatInt(userID, 10) +
			". If you reach out to GitHub Support for help, please include the request ID " + reqID +
			" and timestamp " + now.Format("2006-01-02 15:04:05") + " UTC.",
		DocumentationURL: primaryLimitDocs,
	})
}

// secondaryLimit is a refusal window set by SecondaryLimit.
type secondaryLimit struct {
	until  time.Time
	status int
	early  int // requests that came inside the window
}

func (l *secondaryLimit) refuses(now time.Time) bool { return now.Before(l.until) }

// refuse is GitHub's secondary-limit answer: 403 or 429, Retry-After in
// whole seconds (rounded up, so a client that waits that long is past the
// window), and the message GitHub sends.
func (l *secondaryLimit) refuse(a *answer, now time.Time, reqID string) {
	left := l.until.Sub(now)
	secs := int64((left + time.Second - 1) / time.Second)
	a.status = l.status
	a.header.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	a.json(rateLimitBody{
		Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again." +
			" If you reach out to GitHub Support for help, please include the request ID " + reqID + ".",
		DocumentationURL: secondaryLimitDocs,
	})
}

// rateLimitBody is the body of both refusals: GitHub sends them without
// the "status" member its other errors now carry.
type rateLimitBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
}

// SecondaryLimit refuses every request from now for retryAfter with
// status (403 or 429), Retry-After in whole seconds (what remains) and
// GitHub's secondary-limit body. EarlyRetries counts the requests that
// come inside the window; a new SecondaryLimit starts the count again.
func (s *Server) SecondaryLimit(retryAfter time.Duration, status int) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		panic("githubdouble: a secondary limit answers 403 or 429, not " + strconv.Itoa(status))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary = secondaryLimit{until: s.opts.Now().UTC().Add(retryAfter), status: status}
}

// EarlyRetries is how many requests came inside the current or last
// SecondaryLimit window (each was refused).
func (s *Server) EarlyRetries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.secondary.early
}

// SpendPrimary uses up the primary limit until its window resets (opening
// a window now if none is open): requests are then answered 403 with
// X-RateLimit-Remaining: 0 and GitHub's primary-limit body.
func (s *Server) SpendPrimary() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.rate.roll(now)
	if s.rate.start.IsZero() {
		s.rate.start = now
	}
	s.rate.used = s.opts.RateLimit
}
