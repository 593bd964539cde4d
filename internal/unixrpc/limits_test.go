package unixrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// conn is a raw client connection that keeps its reader across calls.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, path string) *conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{Conn: c, r: bufio.NewReader(c)}
}

// call sends one frame and reads one response.
func (c *conn) call(t *testing.T, frame string) Response {
	t.Helper()
	if _, err := c.Write([]byte(frame)); err != nil {
		t.Fatalf("write %q: %v", frame, err)
	}
	return c.read(t)
}

// read reads one response; the deadline is a safety net, not a timing.
func (c *conn) read(t *testing.T) Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("response %q: %v", line, err)
	}
	return resp
}

// closedByServer fails unless the server closes the connection, sending
// nothing more. Without the server closing it, the read would hit the
// safety deadline.
func (c *conn) closedByServer(t *testing.T, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := c.r.ReadBytes('\n')
	// A server that closes a connection with bytes unread (the drip's
	// latest) makes the client's read fail with a reset instead of EOF:
	// closed either way.
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: want the server to close the connection, got %q, %v", what, line, err)
	}
}

// refused checks that resp is the refusal of a connection over a cap.
func refused(t *testing.T, what string, resp Response, mention string) {
	t.Helper()
	if resp.OK || resp.Error == nil || resp.Error.Code != errs.Unavailable || !strings.Contains(resp.Error.Message, mention) {
		t.Fatalf("%s: want unavailable mentioning %q, got %+v", what, mention, resp)
	}
}

const echoFrame = `{"proto":"0.1","op":"echo","id":"e","args":{"a":1}}` + "\n"
const streamFrame = `{"proto":"0.1","op":"stream","id":"s"}` + "\n"

// echoStream opens a stream that sends back every frame it gets (the tests
// send response-shaped frames, to read them back as responses).
func echoStream(context.Context, Peer, *Request) (any, error) {
	return Stream{Result: "open", Run: func(conn net.Conn, fr *FrameReader) {
		for {
			f, err := fr.Next()
			if err != nil {
				return
			}
			conn.Write(append(f, '\n'))
		}
	}}, nil
}

func TestConnectionsOverACapAreRefusedAndTheOthersGoOn(t *testing.T) {
	t.Parallel()
	srv := &Server{Handlers: map[string]Handler{"echo": echo, "stream": echoStream},
		StreamOps: map[string]bool{"stream": true}, IdleTimeout: 10 * time.Second, MaxConns: 2, MaxStreams: 1}
	ln := serve(t, srv)
	ok := func(what string, resp Response) {
		t.Helper()
		if !resp.OK {
			t.Fatalf("%s: %+v", what, resp)
		}
	}

	// Two request connections fill their cap; a third is refused on its
	// first request, and closed.
	r1, r2 := dial(t, ln.Path), dial(t, ln.Path)
	ok("first request connection", r1.call(t, echoFrame))
	ok("second request connection", r2.call(t, echoFrame))
	r3 := dial(t, ln.Path)
	refused(t, "request connection over the cap", r3.call(t, echoFrame), "too many request connections open (2 of 2)")
	r3.closedByServer(t, "request connection over the cap")

	// Brokers are not kept out by the request connections: a stream has a
	// cap of its own.
	s1 := dial(t, ln.Path)
	ok("stream", s1.call(t, streamFrame))
	ok("frame on the stream", s1.call(t, `{"id":"h1","ok":true}`+"\n"))

	// Both caps are full, so a new connection is refused as soon as it is
	// accepted, before it sends anything: its descriptor is not kept.
	c4 := dial(t, ln.Path)
	refused(t, "connection over both caps", c4.read(t), "too many connections open (3 of 3)")
	c4.closedByServer(t, "connection over both caps")
	// The client reports the service's answer, whether its request went out
	// before the service closed the connection or not.
	client := &Client{Socket: ln.Path, Names: testNames}
	err := client.Call(context.Background(), "echo", nil, nil)
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "too many connections open") {
		t.Fatalf("client call over the caps: %v", err)
	}

	// The connections already admitted were never disturbed.
	ok("first request connection, again", r1.call(t, echoFrame))
	ok("second request connection, again", r2.call(t, echoFrame))
	ok("stream, again", s1.call(t, `{"id":"h2","ok":true}`+"\n"))

	// A stream must open its own connection: asked on a request
	// connection, it is refused and the connection goes on.
	if resp := r1.call(t, streamFrame); resp.OK || resp.Error == nil || resp.Error.Code != errs.BadRequest {
		t.Fatalf("stream asked on a request connection: %+v", resp)
	}
	ok("request connection after a refused stream", r1.call(t, echoFrame))

	// Once a request connection closes, its slot is free again, although
	// the stream cap is still full: brokers do not keep requests out.
	r2.Close()
	testutil.WaitFor(t, "a request connection in the freed slot", func() bool {
		resps, err := exchange(ln.Path, echoFrame)
		return err == nil && resps[0].OK
	})
	// With room for connections, a second stream is still over its own cap.
	testutil.WaitFor(t, "a second stream to be refused over the stream cap", func() bool {
		resps, err := exchange(ln.Path, streamFrame)
		return err == nil && !resps[0].OK && resps[0].Error != nil && resps[0].Error.Code == errs.Unavailable &&
			strings.Contains(resps[0].Error.Message, "too many streams open (1 of 1)")
	})
	s1.Close()
	testutil.WaitFor(t, "a stream in the freed slot", func() bool {
		resps, err := exchange(ln.Path, streamFrame, `{"id":"h3","ok":true}`+"\n")
		return err == nil && resps[0].OK && resps[1].ID == "h3"
	})
}

func TestIdleAndStalledConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	srv := &Server{Handlers: map[string]Handler{"echo": echo}, IdleTimeout: 100 * time.Millisecond, MaxConns: 1, MaxStreams: 1}
	ln := serve(t, srv)

	// A connection that sends nothing, one that stops halfway through a
	// frame, and one that drips a frame byte by byte, never finishing it:
	// each is closed at the idle timeout, so none keeps its slot.
	idle := dial(t, ln.Path)
	half := dial(t, ln.Path)
	if _, err := half.Write([]byte(`{"proto":"0.1","op":"ec`)); err != nil {
		t.Fatal(err)
	}
	idle.closedByServer(t, "idle connection")
	half.closedByServer(t, "half a frame")

	drip := dial(t, ln.Path)
	dripped := make(chan error, 1)
	go func() {
		// A byte every 10 ms is pacing, not synchronization: the test ends
		// when the server closes the connection, which ends the writes.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := drip.Write([]byte(" ")); err != nil {
				dripped <- err
				return
			}
		}
	}()
	drip.closedByServer(t, "a frame dripped byte by byte")
	<-dripped

	// The slots are free again.
	c := dial(t, ln.Path)
	if resp := c.call(t, echoFrame); !resp.OK {
		t.Fatalf("request after the stalled connections were closed: %+v", resp)
	}
}

func TestAClientThatDoesNotReadIsClosed(t *testing.T) {
	t.Parallel()
	srv := &Server{Handlers: map[string]Handler{"echo": echo}, IdleTimeout: 100 * time.Millisecond, MaxConns: 1, MaxStreams: 1}
	ln := serve(t, srv)

	// The client sends requests with large replies and reads none: the
	// server's write waits on a full socket buffer until its deadline, then
	// the connection is closed, which ends the client's writes too.
	c := dial(t, ln.Path)
	big := `{"proto":"0.1","op":"echo","id":"b","args":{"a":"` + strings.Repeat("x", 60000) + `"}}` + "\n"
	wrote := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Write([]byte(big)); err != nil {
				wrote <- err
				return
			}
		}
	}()
	select {
	case <-wrote:
	case <-time.After(30 * time.Second): // a safety net, not a timing
		t.Fatal("the server kept a connection that reads no replies")
	}
	// Its request slot is free again.
	testutil.WaitFor(t, "a request in the freed slot", func() bool {
		resps, err := exchange(ln.Path, echoFrame)
		return err == nil && resps[0].OK
	})
}
