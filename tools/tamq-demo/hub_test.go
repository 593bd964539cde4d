package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub/devhub"
)

// The demo polls State Hub all along; the hub refuses connections past its
// cap, so the demo must reuse its connections rather than leave one idle
// behind each request (CI's TestDemo ran into the hub's 503 that way).
func TestTheDemoReusesItsConnectionsToTheHub(t *testing.T) {
	dir, err := os.MkdirTemp("", "hub") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	hub := &devhub.Server{MaxConns: 2}
	if err := hub.Open(); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "statehub.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := hub.HTTPServer()
	go srv.Serve(hub.Listener(ln))
	t.Cleanup(func() { srv.Close() })

	d := &demo{}
	if err := d.useHub("unix://" + sock); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		var plans any
		if err := d.hubDo(context.Background(), "GET", "/v1/workplans", nil, &plans); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
}
