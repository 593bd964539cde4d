// Package statehub talks to State Hub, the user's task tracker over HTTP.
package statehub

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Probe reports whether State Hub answers HTTP at apiBase at all; any HTTP
// response counts, since reachability is the question, not authorization.
func Probe(ctx context.Context, apiBase string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiBase, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("State Hub at %s is not reachable: %w", apiBase, unwrapURL(err))
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
