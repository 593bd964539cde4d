package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"

	"github.com/tmux-amq/tamq/internal/statehub"
)

// hubConn is the reference State Hub the demo runs, and the client that
// sends the demo's own requests to it.
type hubConn struct {
	// hub is the reference State Hub the demo runs; hubURL its address.
	hub    *exec.Cmd
	hubURL string
	// hubClient and hubPrefix send the demo's own requests to the hub: one
	// client for the demo's life, so its connections are reused (a client a
	// request left idle connections behind, and the hub refuses past its cap).
	hubClient *http.Client
	hubPrefix string
}

// useHub makes the demo talk to the State Hub at url, with the client the
// programs use: over the socket, checked as they check it.
func (h *hubConn) useHub(url string) error {
	hc, prefix, err := statehub.HTTPClient(url)
	if err != nil {
		return err
	}
	h.hubURL, h.hubClient, h.hubPrefix = url, hc, prefix
	return nil
}

// hubDo sends one request to the demo's State Hub and decodes its answer
// into into (when not nil).
func (h *hubConn) hubDo(ctx context.Context, method, path string, body, into any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.hubPrefix+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hubClient.Do(req)
	if err != nil {
		return fmt.Errorf("State Hub: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("State Hub: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}
