// Package standin lets a test stand in for one of our services towards the
// other: it serves a socket as the service would, or sits between the two
// services, so each takes the test's requests as the other's.
package standin

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Serve serves socket in the test's own process, as one of our services
// would: it answers ping with the test's pid, so the other service takes
// the test's requests as that service's own (a test that acts as tamq
// towards the engine, or as the engine towards tamq). It stops when the
// test ends.
func Serve(t testing.TB, socket string) {
	t.Helper()
	ServeAs(t, socket, os.Getpid())
}

// ServeAs is Serve answering ping with pid: a service that is some other
// process, so the test's own requests are a stranger's.
func ServeAs(t testing.TB, socket string, pid int) {
	t.Helper()
	ServeOps(t, socket, pid, nil)
}

// ServeOps is ServeAs that also answers the operations of ops, each with
// the test's handler: the little of the other service a test needs (the
// engine's answer whether a lease's attempt is current, say).
func ServeOps(t testing.TB, socket string, pid int, ops map[string]unixrpc.Handler) {
	t.Helper()
	ln, err := unixrpc.Listen(socket, unixrpc.Names{Program: "stand-in"})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	hs := map[string]unixrpc.Handler{
		daemon.OpPing: func(context.Context, unixrpc.Peer, *unixrpc.Request) (any, error) {
			return daemon.PingResult{PID: pid, StartedAt: started}, nil
		},
	}
	for op, h := range ops {
		hs[op] = h
	}
	srv := &unixrpc.Server{Handlers: hs, IdleTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ln.Close()
		srv.Shutdown(context.Background())
		<-done
	})
}

// Mediate puts the test between tamq's service and coordination-engine:
// each reaches the other through a relay in the test's process that passes
// every request on and answers pings with the test's pid. Each service
// knows the other by that pid, so the test may act as either (send a wake
// as the engine would, attach as tamq would) while both run for real.
// Call it before either service starts. lose, when not nil, sees every
// answer tamq gives the engine and may keep it from the engine (a crash
// between a request and its answer).
func Mediate(t testing.TB, e *testutil.Env, lose func(op string, answer []byte) bool) {
	t.Helper()
	toEngine, toTamq := filepath.Join(e.Runtime, "relay-engine.sock"), filepath.Join(e.Runtime, "relay-tamq.sock")
	relay(t, toEngine, filepath.Join(e.Runtime, "coordination-engine.sock"), nil)
	relay(t, toTamq, e.Socket(), lose)
	if e.ProgramVars == nil {
		e.ProgramVars = map[string][]string{}
	}
	e.ProgramVars["tamq"] = append(e.ProgramVars["tamq"], "COORDINATION_ENGINE_SOCKET="+toEngine)
	e.ProgramVars["coordination-engine"] = append(e.ProgramVars["coordination-engine"], "TAMQ_SOCKET="+toTamq)
}

// relay listens on listen and passes each connection's one request on to
// upstream and its answer back, answering pings with the test's pid (see
// Mediate). lose, when not nil, may keep an answer from the caller.
func relay(t testing.TB, listen, upstream string, lose func(op string, answer []byte) bool) {
	t.Helper()
	os.MkdirAll(filepath.Dir(listen), 0o700)
	ln, err := net.Listen("unix", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayOne(c, upstream, lose)
		}
	}()
}

func relayOne(c net.Conn, upstream string, lose func(op string, answer []byte) bool) {
	defer c.Close()
	req, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return
	}
	up, err := net.Dial("unix", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(req); err != nil {
		return
	}
	res, err := bufio.NewReader(up).ReadBytes('\n')
	if err != nil {
		return
	}
	var frame struct{ Op string }
	json.Unmarshal(req, &frame)
	if frame.Op == daemon.OpPing {
		var answer map[string]any
		if json.Unmarshal(res, &answer) == nil {
			if result, ok := answer["result"].(map[string]any); ok {
				result["pid"] = os.Getpid()
				b, _ := json.Marshal(answer)
				res = append(b, '\n')
			}
		}
	}
	if lose != nil && lose(frame.Op, res) {
		return
	}
	c.Write(res)
}
