package statehub

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Client reads State Hub as the contract says (docs/statehub-contract.md):
// conditional GETs of the workplans, bounded requests, a bearer token from
// the credential command kept in memory only, and objects that lack what
// the contract requires skipped with the reason rather than guessed at.
// Its methods are one per route of the contract plus the request path they
// all share (conn, do, once, bearer, failed): the route list is the
// contract's, and split over types it would be harder to check against it.
type Client struct {
	Base string
	// Credential is statehub.credential_command: an argv whose stdout is
	// the token. Empty: no Authorization header.
	Credential []string
	// Timeout bounds each request; zero means 10 seconds.
	Timeout time.Duration
	// OwnerOf stands in for the system's word on who owns a socket (tests
	// only; see OwnerFunc).
	OwnerOf OwnerFunc

	setup sync.Once
	tgt   target
	hc    *http.Client
	bad   error // Base is not an address

	counters
	tokens TokenCache

	mu        sync.Mutex
	etag      string
	workplans []contract.Workplan
	invalid   []Invalid
}

// Invalid is an object the client skipped, and why.
type Invalid struct {
	Kind, ID, Reason string
}

// maxResponse bounds what one answer may hold.
const maxResponse = 32 << 20

// conn is where requests go and the checked HTTP client that takes them
// there (transport.go), made at the first request.
func (c *Client) conn() (target, *http.Client, error) {
	c.setup.Do(func() {
		c.tgt, c.bad = parseTarget(c.Base)
		if c.bad == nil {
			c.hc = newHTTPClient(c.tgt, c.OwnerOf)
		}
	})
	return c.tgt, c.hc, c.bad
}

// failed is the error of a request that got no answer: the checks' refusal
// as they made it, else unavailable.
func (c *Client) failed(err error) error {
	if e := refusal(err); e != nil {
		return e
	}
	return errs.Wrap(errs.Unavailable, unwrapURL(err), "State Hub at %s is not reachable", textsafe.RedactURL(c.Base))
}

// redirected is the error for a 3xx answer: a redirect is never followed,
// so that a token goes nowhere but statehub.api_base.
func redirected(resp *http.Response, method, path string) error {
	return errs.New(errs.Unavailable, "State Hub answered %s to %s %s, a redirect to %q; redirects are not followed (the token goes to statehub.api_base only)",
		resp.Status, method, path, textsafe.Escape(resp.Header.Get("Location"))).
		WithHint("point statehub.api_base at where State Hub answers")
}

// Workplans returns the workplans and whether they changed since the last
// call (a 304 answers with the ones kept from before), with the objects
// skipped as invalid.
func (c *Client) Workplans(ctx context.Context) ([]contract.Workplan, bool, []Invalid, error) {
	c.mu.Lock()
	etag := c.etag
	c.mu.Unlock()
	var raw struct {
		Workplans []json.RawMessage `json:"workplans"`
	}
	status, newTag, err := c.get(ctx, "/v1/workplans", etag, &raw)
	if err != nil {
		return nil, false, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if status == http.StatusNotModified {
		return c.workplans, false, c.invalid, nil
	}
	wps, bad := decodeWorkplans(raw.Workplans)
	c.etag, c.workplans, c.invalid = newTag, wps, bad
	return wps, true, bad, nil
}

// decodeWorkplans keeps the workplans the contract allows and says why
// each other one was skipped. It and its siblings are apart from the
// requests so the fuzz targets feed them what a server could answer.
func decodeWorkplans(raw []json.RawMessage) ([]contract.Workplan, []Invalid) {
	var wps []contract.Workplan
	var bad []Invalid
	for _, r := range raw {
		var wp contract.Workplan
		if err := json.Unmarshal(r, &wp); err != nil {
			bad = append(bad, Invalid{Kind: "workplan", Reason: "not a workplan: " + err.Error()})
			continue
		}
		if reason := workplanProblem(wp); reason != "" {
			bad = append(bad, Invalid{Kind: "workplan", ID: wp.ID, Reason: reason})
			continue
		}
		wps = append(wps, wp)
	}
	return wps, bad
}

// workplanProblem says what a workplan lacks that the contract requires.
func workplanProblem(wp contract.Workplan) string {
	switch {
	case wp.ID == "":
		return "no id"
	case wp.Repo == "":
		return "no repo"
	case wp.Revision == "":
		return "no revision"
	case !slices.Contains(contract.WorkplanStatuses, wp.Status):
		return fmt.Sprintf("status %q is not one of the contract's", wp.Status)
	}
	for _, t := range wp.Tasks {
		switch {
		case t.ID == "":
			return "a task has no id"
		case t.Repo == "" || t.Revision == "":
			return "task " + t.ID + " has no repo or revision"
		case !slices.Contains(contract.TaskStatuses, t.Status):
			return fmt.Sprintf("task %s: status %q is not one of the contract's", t.ID, t.Status)
		}
	}
	return ""
}

// UnreadMessages returns the unread messages, with the ones skipped.
func (c *Client) UnreadMessages(ctx context.Context) ([]contract.Message, []Invalid, error) {
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if _, _, err := c.get(ctx, "/v1/messages?unread=true", "", &raw); err != nil {
		return nil, nil, err
	}
	out, bad := decodeMessages(raw.Messages)
	return out, bad, nil
}

// decodeMessages keeps the messages the contract allows.
func decodeMessages(raw []json.RawMessage) ([]contract.Message, []Invalid) {
	var out []contract.Message
	var bad []Invalid
	for _, r := range raw {
		var m contract.Message
		err := json.Unmarshal(r, &m)
		switch {
		case err != nil:
			bad = append(bad, Invalid{Kind: "message", Reason: "not a message: " + err.Error()})
		case m.ID == "" || m.Revision == "" || m.ToRepo == "":
			bad = append(bad, Invalid{Kind: "message", ID: m.ID, Reason: "no id, revision or to_repo"})
		default:
			out = append(out, m)
		}
	}
	return out, bad
}

// Checkpoints returns the checkpoints posted after cursor ("" for all) and
// the cursor to ask from next time, with the ones skipped.
func (c *Client) Checkpoints(ctx context.Context, cursor string) ([]contract.Checkpoint, string, []Invalid, error) {
	var raw struct {
		Checkpoints []json.RawMessage `json:"checkpoints"`
		Cursor      string            `json:"cursor"`
	}
	if _, _, err := c.get(ctx, "/v1/checkpoints?since="+url.QueryEscape(cursor), "", &raw); err != nil {
		return nil, cursor, nil, err
	}
	out, bad := decodeCheckpoints(raw.Checkpoints)
	if raw.Cursor == "" {
		raw.Cursor = cursor
	}
	return out, raw.Cursor, bad, nil
}

// decodeCheckpoints keeps the checkpoints the contract allows.
func decodeCheckpoints(raw []json.RawMessage) ([]contract.Checkpoint, []Invalid) {
	var out []contract.Checkpoint
	var bad []Invalid
	for _, r := range raw {
		var cp contract.Checkpoint
		err := json.Unmarshal(r, &cp)
		switch {
		case err != nil:
			bad = append(bad, Invalid{Kind: "checkpoint", Reason: "not a checkpoint: " + err.Error()})
		case cp.ID == "" || cp.Repo == "" || cp.Summary == "":
			bad = append(bad, Invalid{Kind: "checkpoint", ID: cp.ID, Reason: "no id, repo or summary"})
		default:
			out = append(out, cp)
		}
	}
	return out, bad
}

// ErrNoEvents is Events' answer when the server has no event stream.
var ErrNoEvents = errs.New(errs.NotFound, "State Hub offers no event stream")

// Events follows State Hub's event stream, calling onEvent for each event
// (a hint that something changed), until ctx ends or the stream breaks. A
// server without the stream answers 404: ErrNoEvents. onConnected is
// called once the stream is open.
func (c *Client) Events(ctx context.Context, onConnected, onEvent func()) error {
	token, err := c.bearer(ctx)
	if err != nil {
		return err
	}
	tgt, hc, _ := c.conn()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tgt.prefix+"/v1/events", nil)
	if err != nil {
		return errs.Wrap(errs.ConfigInvalid, err, "State Hub address %s", textsafe.RedactURL(c.Base))
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return c.failed(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return redirected(resp, http.MethodGet, "/v1/events")
	case resp.StatusCode == http.StatusNotFound:
		return ErrNoEvents
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		c.tokens.Drop()
		return errs.New(errs.PermissionDeny, "State Hub refused the credentials (%s)", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return errs.New(errs.Unavailable, "State Hub answered %s to its event stream", resp.Status)
	}
	onConnected()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		// Only "data:" lines are events; what they say does not matter:
		// every event means "look now".
		if strings.HasPrefix(sc.Text(), "data:") {
			onEvent()
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errs.New(errs.Unavailable, "State Hub's event stream ended")
}

// PostProgress publishes receipts (each with an "id"); the server stores
// each id once, so a batch may be sent again after a failure.
func (c *Client) PostProgress(ctx context.Context, receipts []contract.Receipt) (int, error) {
	if len(receipts) > contract.MaxProgressBatch {
		return 0, errs.New(errs.BadRequest, "%d receipts in one batch; at most %d", len(receipts), contract.MaxProgressBatch)
	}
	body, err := json.Marshal(map[string]any{"receipts": receipts})
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "encode receipts")
	}
	var res struct {
		Accepted int `json:"accepted"`
	}
	_, _, err = c.do(ctx, http.MethodPost, "/v1/progress", "", body, &res)
	return res.Accepted, err
}

func (c *Client) get(ctx context.Context, path, etag string, into any) (int, string, error) {
	return c.do(ctx, http.MethodGet, path, etag, nil, into)
}

// do sends one request, with the token when there is a credential command;
// a 401 or 403 drops the token and tries once more with a fresh one.
func (c *Client) do(ctx context.Context, method, path, etag string, body []byte, into any) (int, string, error) {
	for try := 0; ; try++ {
		token, err := c.bearer(ctx)
		if err != nil {
			return 0, "", err
		}
		status, tag, err := c.once(ctx, method, path, etag, token, body, into)
		if (status == http.StatusUnauthorized || status == http.StatusForbidden) && len(c.Credential) > 0 && try == 0 {
			c.tokens.Drop()
			continue
		}
		return status, tag, err
	}
}

func (c *Client) once(ctx context.Context, method, path, etag, token string, body []byte, into any) (int, string, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tgt, hc, err := c.conn()
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, tgt.prefix+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", errs.Wrap(errs.ConfigInvalid, err, "State Hub address %s", textsafe.RedactURL(c.Base))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c.requests.Add(1)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", c.failed(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		c.notModified.Add(1)
	}
	// A write may be answered without a document (201, 204); a read may not.
	done := resp.StatusCode == http.StatusOK ||
		method != http.MethodGet && (resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusNoContent)
	switch {
	case resp.StatusCode == http.StatusNotModified:
		return resp.StatusCode, etag, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, "", redirected(resp, method, path)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return resp.StatusCode, "", errs.New(errs.PermissionDeny, "State Hub refused the credentials (%s)", resp.Status).
			WithHint("check statehub.credential_command")
	case !done:
		return resp.StatusCode, "", errs.New(errs.Unavailable, "State Hub answered %s to %s %s%s", resp.Status, method, path, refusalReason(resp))
	}
	if into == nil {
		return resp.StatusCode, resp.Header.Get("ETag"), nil
	}
	if err := decodeBody(resp.Body, into); err != nil {
		return resp.StatusCode, "", errs.Wrap(errs.BadRequest, err, "State Hub's answer to %s %s is not the contract's JSON", method, path)
	}
	return resp.StatusCode, resp.Header.Get("ETag"), nil
}

// refusalReason is what a 4xx answer says about itself, when it says it as
// the reference server does ({"error": "..."}) or as many web frameworks do
// ({"detail": "..."}): ": reason", escaped and cut short, or "". A request
// the server refused is easier to fix with its reason.
func refusalReason(resp *http.Response) string {
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		return ""
	}
	var said struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&said) != nil {
		return ""
	}
	reason := cmp.Or(said.Error, said.Detail)
	if reason == "" {
		return ""
	}
	if len(reason) > 200 {
		reason = strings.ToValidUTF8(reason[:200], "") + "…"
	}
	return ": " + textsafe.Escape(reason)
}

// decodeBody reads one answer, at most maxResponse bytes of it, into into.
func decodeBody(body io.Reader, into any) error {
	return json.NewDecoder(io.LimitReader(body, maxResponse)).Decode(into)
}

// bearer is the token, from the credential command when none is kept. The
// command's output is never put in an error: it may be the secret. A token
// is refused to a Base it must not go to (in clear to another host).
func (c *Client) bearer(ctx context.Context) (string, error) {
	tgt, _, err := c.conn()
	if err != nil {
		return "", err
	}
	if len(c.Credential) == 0 {
		return "", nil
	}
	if err := tgt.tokenAllowed(c.Base); err != nil {
		return "", err
	}
	return c.tokens.Get(ctx, c.Credential)
}

// TokenCache keeps the token of a credential command in memory, for every
// driver of a tracker that wants one: fetched when first needed, at most
// one command at a time, dropped when the tracker refuses it.
type TokenCache struct {
	mu    sync.Mutex
	token string
}

// Get is the token kept, else the one the command argv prints now; ""
// when argv is empty (no token). The command's output is never put in an
// error: it may be the secret.
func (tc *TokenCache) Get(ctx context.Context, argv []string) (string, error) {
	if len(argv) == 0 {
		return "", nil
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.token != "" {
		return tc.token, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	token, err := Token(ctx, argv)
	if err != nil {
		return "", err
	}
	tc.token = token
	return token, nil
}

// Drop forgets the token: the tracker refused it, and the next Get asks
// the command again.
func (tc *TokenCache) Drop() {
	tc.mu.Lock()
	tc.token = ""
	tc.mu.Unlock()
}

// Token runs the credential command (statehub.credential_command) until ctx
// ends and returns the one token it prints. The output is never put in an
// error: it may be the secret.
func Token(ctx context.Context, argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errs.New(errs.ConfigInvalid, "statehub.credential_command is empty")
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		return "", errs.Wrap(errs.PermissionDeny, err, "statehub.credential_command %q failed", argv[0])
	}
	token := strings.TrimSpace(string(out))
	if token == "" || strings.ContainsAny(token, "\r\n") {
		return "", errs.New(errs.PermissionDeny, "statehub.credential_command %q did not print one token", argv[0])
	}
	return token, nil
}

// CheckAccess asks State Hub for the workplans once, for a check that it
// answers as the contract says and takes the credentials: nil, or the
// error of the request (errs.PermissionDeny when refused).
func (c *Client) CheckAccess(ctx context.Context) error {
	var raw json.RawMessage
	_, _, err := c.get(ctx, "/v1/workplans", "", &raw)
	return err
}
