package unixrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// setup starts an in-process server with the given handlers on a private
// socket and returns its path.
// testNames name the service of these tests in messages.
var testNames = Names{Program: "test", SocketVar: "TEST_SOCKET"}

func setup(t *testing.T, handlers map[string]Handler) (*Server, *Listener) {
	t.Helper()
	srv := &Server{Handlers: handlers, IdleTimeout: 10 * time.Second}
	return srv, serve(t, srv)
}

// serve runs srv on a private socket until the test ends.
func serve(t *testing.T, srv *Server) *Listener {
	t.Helper()
	dir, err := os.MkdirTemp("", "proto-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := Listen(filepath.Join(dir, "s.sock"), testNames)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ln.Close()
		srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}

func echo(_ context.Context, _ Peer, req *Request) (any, error) {
	var args map[string]any
	if err := DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	return args, nil
}

// raw sends frames and reads one response per frame.
func raw(t *testing.T, path string, frames ...string) []Response {
	t.Helper()
	out, err := exchange(path, frames...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exchange is raw without the test: safe to call from other goroutines.
func exchange(path string, frames ...string) ([]Response, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	var out []Response
	for _, f := range frames {
		if _, err := c.Write([]byte(f)); err != nil {
			return out, err
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			return out, fmt.Errorf("after %q: %w", f, err)
		}
		var resp Response
		if err := json.Unmarshal(line, &resp); err != nil {
			return out, fmt.Errorf("response %q: %w", line, err)
		}
		out = append(out, resp)
	}
	return out, nil
}

func TestErrorsGetTheirCodesAndTheServiceGoesOn(t *testing.T) {
	t.Parallel()
	_, ln := setup(t, map[string]Handler{"echo": echo, "boom": func(context.Context, Peer, *Request) (any, error) { panic("bug") }})
	tests := []struct {
		frame string
		code  errs.Code
	}{
		{"not json\n", errs.BadRequest},
		{`{"proto":"0.1","op":"echo","id":"1","args":[1]}` + "\n", errs.BadRequest},
		{`{"op":"echo","id":"1"}` + "\n", errs.BadRequest},
		{`{"proto":"0.1","id":"1"}` + "\n", errs.BadRequest},
		{`{"proto":"zero","op":"echo","id":"1"}` + "\n", errs.BadRequest},
		{`{"proto":"1.0","op":"echo","id":"1"}` + "\n", errs.Incompatible},
		{`{"proto":"0.1","op":"teleport","id":"1"}` + "\n", errs.UnknownOp},
		{`{"proto":"0.1","op":"boom","id":"1"}` + "\n", errs.Internal},
		{`{"proto":"0.1","op":"echo","id":"` + strings.Repeat("x", 200) + `"}` + "\n", errs.BadRequest},
	}
	frames := make([]string, len(tests))
	for i, tt := range tests {
		frames[i] = tt.frame
	}
	// All on one connection: a bad request does not end the conversation.
	resps := raw(t, ln.Path, append(frames, `{"proto":"0.1","op":"echo","id":"last","args":{"a":1}}`+"\n")...)
	for i, tt := range tests {
		if resps[i].OK || resps[i].Error == nil || resps[i].Error.Code != tt.code {
			t.Errorf("%q: got %+v, want %s", tt.frame, resps[i], tt.code)
		}
	}
	last := resps[len(resps)-1]
	if !last.OK || last.ID != "last" || string(last.Result) != `{"a":1}` {
		t.Errorf("good request after bad ones: %+v", last)
	}
}

// TestFramesThatAreNotUTF8AreRefused sends raw bytes a Go client never would:
// the request is refused before decoding, which would have replaced them.
func TestFramesThatAreNotUTF8AreRefused(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, ln := setup(t, map[string]Handler{"echo": func(ctx context.Context, p Peer, req *Request) (any, error) {
		calls.Add(1)
		return echo(ctx, p, req)
	}})
	resps := raw(t, ln.Path,
		`{"proto":"0.1","op":"echo","id":"1","args":{"text":"To:x: caf`+"\xe9"+`"}}`+"\n",
		`{"proto":"0.1","op":"echo","id":"2","args":{"text":"To:x: café"}}`+"\n")
	if bad := resps[0]; bad.OK || bad.Error == nil || bad.Error.Code != errs.BadRequest ||
		bad.Error.Message != "request is not valid UTF-8 (invalid byte at offset 61)" {
		t.Errorf("frame with a raw 0xe9: %+v", bad)
	}
	// The connection goes on, and valid UTF-8 passes untouched.
	if good := resps[1]; !good.OK || string(good.Result) != `{"text":"To:x: café"}` {
		t.Errorf("valid frame after the bad one: %+v", good)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once (for the valid request)", n)
	}
}

func TestMinorVersionsInteroperate(t *testing.T) {
	t.Parallel()
	_, ln := setup(t, map[string]Handler{"echo": echo})
	resps := raw(t, ln.Path, `{"proto":"0.7","op":"echo","id":"a"}`+"\n", `{"proto":"0.0","op":"echo","id":"b"}`+"\n")
	if !resps[0].OK || resps[0].Proto != "0.1" {
		t.Errorf("newer minor: %+v", resps[0])
	}
	if !resps[1].OK || resps[1].Proto != "0.0" {
		t.Errorf("older minor: %+v", resps[1])
	}
}

func TestOversizedFrameIsRefusedAndClosed(t *testing.T) {
	t.Parallel()
	_, ln := setup(t, map[string]Handler{"echo": echo})
	c, err := net.Dial("unix", ln.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(`{"proto":"0.1","op":"echo","id":"1","args":{"a":"` + strings.Repeat("x", MaxFrame) + `"}}` + "\n"))
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil || resp.Error == nil || resp.Error.Code != errs.FrameTooLarge {
		t.Fatalf("response %s (%v)", line, err)
	}
	if _, err := r.ReadBytes('\n'); err == nil {
		t.Error("connection stayed open after an oversized frame")
	}
	// The service still answers others.
	if got := raw(t, ln.Path, `{"proto":"0.1","op":"echo","id":"2"}`+"\n"); !got[0].OK {
		t.Errorf("after oversized frame: %+v", got[0])
	}
}

func TestClientRoundTripAndErrors(t *testing.T) {
	t.Parallel()
	_, ln := setup(t, map[string]Handler{
		"echo": echo,
		"fail": func(context.Context, Peer, *Request) (any, error) {
			return nil, errs.New(errs.UnknownTarget, "unknown target 'x'").WithHint("see gita ls")
		},
	})
	c := &Client{Socket: ln.Path, Names: testNames}
	var out map[string]string
	if err := c.Call(context.Background(), "echo", map[string]string{"k": "v"}, &out); err != nil || out["k"] != "v" {
		t.Fatalf("echo: %v %v", out, err)
	}
	err := c.Call(context.Background(), "fail", nil, nil)
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.UnknownTarget || e.Hint != "see gita ls" {
		t.Errorf("fail: %#v", err)
	}
	if err := c.Call(context.Background(), "nope", nil, nil); !errs.Is(err, errs.UnknownOp) {
		t.Errorf("unknown op: %v", err)
	}
	down := &Client{Socket: filepath.Join(t.TempDir(), "none.sock"), Names: testNames}
	if err := down.Call(context.Background(), "echo", nil, nil); !errs.Is(err, errs.Unavailable) {
		t.Errorf("no service: %v", err)
	}
}

func TestShutdownWaitsForRunningRequestsWithinGrace(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	srv, ln := setup(t, map[string]Handler{
		"slow": func(context.Context, Peer, *Request) (any, error) {
			close(entered)
			<-release
			return "done", nil
		},
		"echo": echo,
	})
	result := make(chan error, 1)
	go func() {
		_, err := exchange(ln.Path, `{"proto":"0.1","op":"slow","id":"s"}`+"\n")
		result <- err
	}()
	<-entered
	ln.Close()
	// A grace period that ends while the request runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Shutdown(ctx); !errs.Is(err, errs.Timeout) {
		t.Errorf("Shutdown with expired grace: %v", err)
	}
	// Shutdown closed the connection although the handler still runs.
	if err := <-result; err == nil {
		t.Error("the connection survived a shutdown past its grace period")
	}
	close(release)

	// With grace, the running request finishes and its reply is delivered.
	entered2 := make(chan struct{})
	release2 := make(chan struct{})
	srv2, ln2 := setup(t, map[string]Handler{"slow": func(context.Context, Peer, *Request) (any, error) {
		close(entered2)
		<-release2
		return "done", nil
	}})
	var wg sync.WaitGroup
	wg.Add(1)
	var got []Response
	var gotErr error
	go func() {
		defer wg.Done()
		got, gotErr = exchange(ln2.Path, `{"proto":"0.1","op":"slow","id":"s"}`+"\n")
	}()
	<-entered2
	ln2.Close()
	shut := make(chan error, 1)
	go func() { shut <- srv2.Shutdown(context.Background()) }()
	close(release2)
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	wg.Wait()
	if gotErr != nil {
		t.Fatal(gotErr)
	}
	if len(got) != 1 || !got[0].OK || string(got[0].Result) != `"done"` {
		t.Errorf("reply of the request running at shutdown: %+v", got)
	}
}

func TestListenRefusesUnsafeParents(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "proto-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := Listen(filepath.Join(open, "s.sock"), testNames); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("world-writable parent: %v", err)
	}
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	ln, err := Listen(filepath.Join(sticky, "s.sock"), testNames)
	if err != nil {
		t.Fatalf("sticky parent (like /tmp): %v", err)
	}
	fi, _ := os.Stat(ln.Path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(sticky)
	if len(entries) != 1 {
		t.Errorf("bind directory left behind: %v", entries)
	}
	ln.Close()
	if err := ln.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ln.Path); !os.IsNotExist(err) {
		t.Error("Remove left the socket")
	}
	missing := filepath.Join(dir, "new", "deeper")
	ln, err = Listen(filepath.Join(missing, "s.sock"), testNames)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, _ := os.Stat(missing); fi.Mode().Perm() != 0o700 {
		t.Errorf("created parent mode %v", fi.Mode())
	}
}

func TestRemoveSparesASuccessorsSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	first, err := Listen(path, testNames)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	os.Remove(path)
	second, err := Listen(path, testNames)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := first.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the first listener removed the second's socket: %v", err)
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		theirs, want string
		code         errs.Code
	}{
		{"0.1", "0.1", ""}, {"0.9", "0.1", ""}, {"0.0", "0.0", ""},
		{"1.1", "", errs.Incompatible}, {"", "", errs.BadRequest}, {"0", "", errs.BadRequest}, {"0.-1", "", errs.BadRequest},
	}
	for _, tt := range tests {
		got, err := Negotiate("0.1", tt.theirs)
		if tt.code != "" {
			if !errs.Is(err, tt.code) {
				t.Errorf("Negotiate(%q) err %v, want %s", tt.theirs, err, tt.code)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Negotiate(%q) = %q, %v", tt.theirs, got, err)
		}
	}
}

// A call that may wait for a restart lands when the service comes back; one
// that may not says at once that the service is not running. A service that
// died left its socket behind; one stopped on purpose removed it, and a call
// does not wait for that one.
func TestACallWaitsForARestartingService(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "proto-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	stopped := &Client{Socket: path, Names: testNames, Timeout: 30 * time.Second, WaitRestart: 30 * time.Second}
	if err := stopped.Call(context.Background(), "echo", nil, nil); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("no socket: %v, want unavailable", err)
	}
	// What a killed service leaves: its socket, nobody accepting.
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	dead.Close()
	impatient := &Client{Socket: path, Names: testNames, Timeout: 5 * time.Second}
	if err := impatient.Call(context.Background(), "echo", nil, nil); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("without a wait: %v, want unavailable", err)
	}
	patient := &Client{Socket: path, Names: testNames, Timeout: 5 * time.Second, WaitRestart: 5 * time.Second}
	done := make(chan error, 1)
	go func() {
		var out map[string]string
		err := patient.Call(context.Background(), "echo", map[string]string{"k": "v"}, &out)
		if err == nil && out["k"] != "v" {
			err = fmt.Errorf("echo answered %v", out)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the call returned while nothing listened: %v", err)
	case <-time.After(300 * time.Millisecond): // the service is down for a moment
	}
	srv := &Server{Handlers: map[string]Handler{"echo": echo}, IdleTimeout: 10 * time.Second}
	ln, err := Listen(path, testNames)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	defer func() {
		ln.Close()
		srv.Shutdown(context.Background())
		<-served
	}()
	if err := <-done; err != nil {
		t.Fatalf("the call did not land once the service was back: %v", err)
	}
}

// A call ends at the client's Timeout, or at its context's deadline when that
// comes first: the socket's own timeouts end it, with no timer of the call's
// (a timer would start Go's network poller in every CLI command). A call that
// waits for a restarting service gives up at the same bound.
func TestACallEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	_, ln := setup(t, map[string]Handler{"hang": func(context.Context, Peer, *Request) (any, error) {
		<-release
		return nil, nil
	}})
	deadline := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
	}
	background := func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }

	// What a killed service leaves: its socket, nobody accepting.
	dead := filepath.Join(filepath.Dir(ln.Path), "dead.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	for _, c := range []struct {
		name   string
		client *Client
		ctx    func() (context.Context, context.CancelFunc)
		want   errs.Code
	}{
		{"the client's timeout", &Client{Socket: ln.Path, Names: testNames, Timeout: 200 * time.Millisecond}, background, errs.Timeout},
		{"the context's deadline", &Client{Socket: ln.Path, Names: testNames, Timeout: time.Minute}, deadline(200 * time.Millisecond), errs.Timeout},
		{"waiting for a restart", &Client{Socket: dead, Names: testNames, Timeout: 200 * time.Millisecond, WaitRestart: time.Minute}, background, errs.Unavailable},
	} {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := c.ctx()
			defer cancel()
			done <- c.client.Call(ctx, "hang", nil, nil)
		}()
		select {
		case err := <-done:
			if !errs.Is(err, c.want) {
				t.Errorf("%s: %v, want %s", c.name, err, c.want)
			}
		case <-time.After(20 * time.Second): // a safety net: the bound is 200 ms
			t.Fatalf("%s: the call outlived its deadline", c.name)
		}
	}
}
