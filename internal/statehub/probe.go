// Package statehub talks to State Hub, the user's task tracker over HTTP.
package statehub

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Probe reports whether State Hub answers HTTP at apiBase at all; any HTTP
// response counts, since reachability is the question, not authorization.
// A listener that is not the user's is not State Hub: its refusal
// (permission_denied, naming the port or socket and its owner) is returned
// as the client's checks made it.
func Probe(ctx context.Context, apiBase string, timeout time.Duration) error {
	return (&Client{Base: apiBase}).Probe(ctx, timeout)
}

// Probe is the function Probe with c's address and checks.
func (c *Client) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	apiBase := c.Base
	tgt, hc, err := c.conn()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tgt.prefix+"/", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if e := refusal(err); e != nil {
			return e
		}
		return fmt.Errorf("State Hub at %s is not reachable: %w", textsafe.RedactURL(apiBase), unwrapURL(err))
	}
	resp.Body.Close()
	return nil
}

// unwrapURL drops net/http's "Get \"url\":" prefix; the message names the URL already.
func unwrapURL(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}
