package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Handler serves one operation. It returns the result to marshal, or an error
// whose code goes on the wire (an untyped error is reported as internal).
type Handler func(ctx context.Context, peer Peer, req *Request) (any, error)

// Server runs the request loop on an authenticated listener.
type Server struct {
	Handlers map[string]Handler
	Log      *slog.Logger
	// Refused is told of every connection rejected by peer credentials, before
	// it is closed; nothing was read from it.
	Refused func(peer Peer, err error)
	// Trace, when set, sees every frame in and out, in full. Only --orwell sets
	// it: frames may hold message bodies.
	Trace func(direction string, frame []byte)
	// IdleTimeout closes a connection that sends no request for this long.
	IdleTimeout time.Duration

	mu       sync.Mutex
	closing  bool
	conns    map[net.Conn]struct{}
	handlers sync.WaitGroup // requests being served
	loops    sync.WaitGroup // connection goroutines
}

// Serve accepts connections until the listener is closed. Each connection is
// authenticated by SO_PEERCRED before a byte is read.
func (s *Server) Serve(ctx context.Context, ln *Listener) error {
	uid := uint32(os.Getuid())
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		peer, err := PeerOf(c)
		if err == nil && peer.UID != uid {
			err = errs.New(errs.PermissionDeny, "peer uid %d is not the service's uid %d", peer.UID, uid)
		}
		if err != nil {
			if s.Refused != nil {
				s.Refused(peer, err)
			}
			c.Close()
			continue
		}
		if !s.track(c) {
			c.Close()
			continue
		}
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			defer s.untrack(c)
			s.serveConn(ctx, c, peer)
		}()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// serveConn answers requests on one connection, one at a time, in order.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn, peer Peer) {
	fr := NewFrameReader(c)
	for {
		if s.IdleTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(s.IdleTimeout))
		}
		frame, err := fr.Next()
		if err != nil {
			if errs.Is(err, errs.FrameTooLarge) {
				s.reply(c, &Request{}, nil, err)
			}
			return // EOF, idle timeout, closed by Shutdown
		}
		if s.Trace != nil {
			s.Trace("in", frame)
		}
		if !s.beginRequest() {
			req, _ := DecodeRequest(frame)
			s.reply(c, req, nil, errs.New(errs.ShuttingDown, "the service is shutting down"))
			return
		}
		start := time.Now()
		req, result, err := s.handle(ctx, peer, frame)
		if s.Log != nil {
			s.Log.Debug("request", "op", req.Op, "id", req.ID, "code", codeOrOK(err), "duration", time.Since(start))
		}
		// A stream keeps the connection: its result is the first reply, then
		// the stream owns the connection until it ends.
		stream, isStream := result.(Stream)
		if isStream {
			result = stream.Result
		}
		// The reply is part of the request: Shutdown waits for it to be written.
		ok := s.reply(c, req, result, err)
		s.handlers.Done()
		if !ok {
			return
		}
		if isStream && err == nil {
			c.SetReadDeadline(time.Time{})
			stream.Run(c, fr)
			return
		}
	}
}

// Stream is what a handler returns to keep its connection: Result is the
// reply to the request; Run then has the connection (and its reader) until it
// returns, after which the connection is closed. Shutdown closes it too.
type Stream struct {
	Result any
	Run    func(conn net.Conn, fr *FrameReader)
}

// beginRequest registers a request unless the server is closing, so Shutdown
// can wait for exactly the requests that started.
func (s *Server) beginRequest() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.handlers.Add(1)
	return true
}

func codeOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return string(errs.CodeOf(err))
}

func (s *Server) handle(ctx context.Context, peer Peer, frame []byte) (req *Request, result any, err error) {
	req, err = DecodeRequest(frame)
	if err != nil {
		return req, nil, err
	}
	if _, err := Negotiate(Version, req.Proto); err != nil {
		return req, nil, err
	}
	h, ok := s.Handlers[req.Op]
	if !ok {
		return req, nil, errs.New(errs.UnknownOp, "unknown operation %q", req.Op).
			WithHint("the service may be older than this client; see `tamq version`")
	}
	defer func() {
		// A bug in one handler must not take the service down.
		if r := recover(); r != nil {
			if s.Log != nil {
				s.Log.Error("handler panic", "op", req.Op, "panic", r)
			}
			result, err = nil, errs.New(errs.Internal, "internal error serving %s", req.Op)
		}
	}()
	result, err = h(ctx, peer, req)
	return req, result, err
}

// reply writes the response; false means the connection is unusable.
func (s *Server) reply(w io.Writer, req *Request, result any, err error) bool {
	proto := Version
	if req != nil && req.Proto != "" {
		if v, nerr := Negotiate(Version, req.Proto); nerr == nil {
			proto = v
		}
	}
	resp := Response{Proto: proto, OK: err == nil}
	if req != nil {
		resp.ID = req.ID
	}
	if err == nil && result != nil {
		b, merr := json.Marshal(result)
		if merr != nil {
			err = errs.Wrap(errs.Internal, merr, "encode result")
		} else {
			resp.Result = b
		}
	}
	if err != nil {
		var e *errs.Error
		if !errors.As(err, &e) {
			e = errs.New(errs.Internal, "%v", err)
		}
		resp.OK, resp.Result = false, nil
		resp.Error = &Error{Code: e.Code, Message: e.Message, Hint: e.Hint}
	}
	frame, ferr := EncodeFrame(resp)
	if ferr != nil {
		frame, _ = EncodeFrame(Response{Proto: proto, ID: resp.ID, Error: &Error{Code: errs.FrameTooLarge, Message: ferr.Error()}})
	}
	if s.Trace != nil {
		s.Trace("out", frame[:len(frame)-1])
	}
	_, werr := w.Write(frame)
	return werr == nil
}

// Shutdown stops taking requests, waits until the requests already started
// have finished (or ctx ends), then closes every connection. The caller closes
// the listener first, so no connection arrives meanwhile.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = errs.New(errs.Timeout, "requests still running when the grace period ended")
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	return err
}
