package statehub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// The routes an agent reaches State Hub by through the engine
// (docs/statehub-contract.md): it reads a message's body, states its
// task's status, marks a message read. The engine relays; it never decides.
const (
	RouteMessage  = "GET /v1/messages/{id}"
	RouteTaskSet  = "PATCH /v1/tasks/{id}"
	RouteMarkRead = "POST /v1/messages/{id}/read"
)

// Message reads one message with its body. A body the contract does not
// allow (missing, over contract.MaxMessageBody) is an error, never cut or
// guessed at. Errors: not_found (404), unsupported (405, 501), and those of
// every request (unavailable, permission_denied).
func (c *Client) Message(ctx context.Context, id string) (contract.MessageWithBody, error) {
	var raw json.RawMessage
	status, _, err := c.get(ctx, "/v1/messages/"+url.PathEscape(id), "", &raw)
	if err != nil {
		return contract.MessageWithBody{}, routeError(err, status, RouteMessage)
	}
	return decodeMessageWithBody(raw, id)
}

// decodeMessageWithBody keeps the message the contract allows, as
// answered for id.
func decodeMessageWithBody(raw json.RawMessage, id string) (contract.MessageWithBody, error) {
	var m struct {
		contract.Message
		Body *string `json:"body"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return contract.MessageWithBody{}, errs.Wrap(errs.BadRequest, err, "State Hub's answer to %s is not a message", RouteMessage)
	}
	problem := ""
	switch {
	case m.ID != id:
		problem = "it is about another message"
	case m.Revision == "" || m.ToRepo == "":
		problem = "no revision or to_repo"
	case m.Body == nil:
		problem = "no body"
	case len(*m.Body) > contract.MaxMessageBody:
		problem = "its body is over 64 KiB"
	}
	if problem != "" {
		return contract.MessageWithBody{}, errs.New(errs.BadRequest, "State Hub's answer to GET /v1/messages/%s is not the contract's message: %s", url.PathEscape(id), problem)
	}
	return contract.MessageWithBody{Message: m.Message, Body: *m.Body}, nil
}

// SetTask states a task's status (and a note) for the agent that works on
// it. Errors: not_found for 404, which is also what a tracker without the
// route answers (the caller tells the two apart), unsupported for 405 and
// 501, bad_request when the tracker refuses what was stated.
func (c *Client) SetTask(ctx context.Context, id string, u contract.TaskUpdate) error {
	body, err := json.Marshal(u)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode the task update")
	}
	status, _, err := c.do(ctx, http.MethodPatch, "/v1/tasks/"+url.PathEscape(id), "", body, nil)
	return routeError(err, status, RouteTaskSet)
}

// MarkRead marks a message read for the agent it was for. Errors as
// SetTask's.
func (c *Client) MarkRead(ctx context.Context, id string) error {
	status, _, err := c.do(ctx, http.MethodPost, "/v1/messages/"+url.PathEscape(id)+"/read", "", nil, nil)
	return routeError(err, status, RouteMarkRead)
}

// routeError gives a failed request on one of these routes the code its
// HTTP status means; failures without an answer keep theirs.
func routeError(err error, status int, route string) error {
	if err == nil {
		return nil
	}
	var code errs.Code
	switch status {
	case http.StatusNotFound:
		code = errs.NotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return errs.New(errs.Unsupported, "State Hub does not offer %s (it answered %d)", route, status).
			WithHint("use the tracker's own tools for this")
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = errs.BadRequest
	case http.StatusConflict:
		code = errs.Conflict
	default:
		return err
	}
	return &errs.Error{Code: code, Message: err.Error(), Err: err}
}
