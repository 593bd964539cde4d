package statehub

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // any answer means reachable
	}))
	defer srv.Close()
	if err := Probe(context.Background(), srv.URL, time.Second); err != nil {
		t.Errorf("reachable hub: %v", err)
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := Probe(context.Background(), "http://"+addr, time.Second); err == nil {
		t.Error("closed port reported reachable")
	}
}
