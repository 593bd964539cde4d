package unixrpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
)

// Handler serves one operation. It returns the result to marshal, or an error
// whose code goes on the wire (an untyped error is reported as internal).
type Handler func(ctx context.Context, peer Peer, req *Request) (any, error)

// Server runs the request loop on an authenticated listener.
type Server struct {
	// Names name the service in hints.
	Names    Names
	Handlers map[string]Handler
	// StreamOps are the operations whose handler may return a Stream (the
	// broker session). The server must know them before the handler runs: a
	// connection is counted as a stream or as a request connection by its
	// first request.
	StreamOps map[string]bool
	Log       *slog.Logger
	// Refused is told of every connection rejected by peer credentials, before
	// it is closed; nothing was read from it.
	Refused func(peer Peer, err error)
	// Trace, when set, sees every frame in and out, in full. Only --orwell sets
	// it: frames may hold message bodies.
	Trace func(direction string, frame []byte)
	// IdleTimeout closes a connection that does not send a whole request
	// within this long of the previous reply (or of connecting), and one that
	// does not take a reply within this long. Streams have no idle timeout.
	IdleTimeout time.Duration
	// MaxConns caps the request connections open at once, and MaxStreams the
	// streams; zero means no cap. Each has its own cap so that a flood of one
	// kind never keeps the other out. A connection counts as what its first
	// request asks for; until then, it counts only against the sum of both
	// caps, which bounds the descriptors connections can take. A connection
	// over a cap gets one unavailable error and is closed.
	MaxConns   int
	MaxStreams int

	mu       sync.Mutex
	closing  bool
	done     chan struct{} // closed by Shutdown
	conns    map[net.Conn]struct{}
	open     [slotKinds]int // request connections and streams open
	refusals refusals       // connections refused over a cap, by cap
	handlers sync.WaitGroup // requests being served
	loops    sync.WaitGroup // connection goroutines
}

// slot is what a connection is counted as.
type slot int

const (
	anySlot     slot = iota // not counted yet: no request so far
	requestSlot             // a connection for requests
	streamSlot              // a connection for one stream
	slotKinds
)

// refusals are the spells of connections refused over each cap; the
// Server's mu guards them. They are their own type because they only count
// and log: what a cap is and when it is reached is the Server's.
type refusals [slotKinds]spell

// spell is a run of like failures, logged when it begins and when it ends,
// so that a flood writes two lines instead of one per failure.
type spell struct {
	n     int
	since time.Time
	last  time.Time
}

// Accept backs off between failures from 5 ms, doubling up to a second, as
// net/http's Server does. A spell of accept failures ends at the first
// accept spellQuiet after its last failure: at the descriptor limit, accepts
// that fail and succeed by turns are one spell.
var acceptBackoff = backoff.Policy{Min: 5 * time.Millisecond, Max: time.Second}

const spellQuiet = 5 * time.Second

// Serve accepts connections until the listener is closed. Each connection is
// authenticated by SO_PEERCRED before a byte is read.
//
// No accept error ends Serve. The expected ones are transient: the process or
// the system is out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
// ENOMEM), a client gave up before it was accepted (ECONNABORTED), a
// deadline. An unexpected one is retried too, with the same backoff: a
// service that stops would strand every broker and queued message, and
// would remove its socket, leaving the path for someone else to bind; one
// that retries costs one accept a second at worst, and the log says why.
func (s *Server) Serve(ctx context.Context, ln *Listener) error {
	uid := uint32(os.Getuid())
	var failing spell
	var wait time.Duration
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if failing.n == 0 {
				failing.since = time.Now()
				logAcceptFailure(s.Log, err)
			}
			failing.n++
			failing.last = time.Now()
			wait = acceptBackoff.Next(wait)
			if !s.pause(wait) {
				return nil
			}
			continue
		}
		wait = 0
		if failing.n > 0 && time.Since(failing.last) >= spellQuiet {
			s.logInfo("accepting connections again", "failures", failing.n, "since", failing.since)
			failing = spell{}
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
		if err := s.track(c); err != nil {
			if errs.Is(err, errs.Unavailable) {
				s.refuse(c, err)
			}
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

// logAcceptFailure logs the first failure of a spell.
func logAcceptFailure(log *slog.Logger, err error) {
	if log == nil {
		return
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		log.Warn("cannot accept connections: out of file descriptors; retrying", "error", err.Error())
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		log.Warn("cannot accept connections: out of memory; retrying", "error", err.Error())
	case errors.Is(err, syscall.ECONNABORTED), errors.As(err, &ne) && ne.Timeout():
		log.Warn("cannot accept connections; retrying", "error", err.Error())
	default:
		log.Error("cannot accept connections: unexpected error; retrying", "error", err.Error())
	}
}

func (s *Server) logInfo(msg string, args ...any) {
	if s.Log != nil {
		s.Log.Info(msg, args...)
	}
}

// pause waits d, or until Shutdown; false means Shutdown.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.doneCh():
		return false
	}
}

func (s *Server) doneCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// track registers a new connection: shutting_down while closing, unavailable
// when the connections open reach the sum of both caps.
func (s *Server) track(c net.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errs.New(errs.ShuttingDown, "the service is shutting down")
	}
	if s.MaxConns > 0 && s.MaxStreams > 0 && len(s.conns) >= s.MaxConns+s.MaxStreams {
		return s.refusals.refused(s.Log, anySlot, len(s.conns), s.MaxConns+s.MaxStreams, "connections")
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return nil
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.refusals.end(s.Log, anySlot, len(s.conns), s.MaxConns+s.MaxStreams)
	s.mu.Unlock()
	c.Close()
}

// enter counts a connection as k, unless k's cap is reached.
func (s *Server) enter(k slot) error {
	limit, what := s.MaxConns, "request connections"
	if k == streamSlot {
		limit, what = s.MaxStreams, "streams"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 && s.open[k] >= limit {
		return s.refusals.refused(s.Log, k, s.open[k], limit, what)
	}
	s.open[k]++
	return nil
}

func (s *Server) leave(k slot) {
	if k == anySlot {
		return
	}
	limit := s.MaxConns
	if k == streamSlot {
		limit = s.MaxStreams
	}
	s.mu.Lock()
	s.open[k]--
	s.refusals.end(s.Log, k, s.open[k], limit)
	s.mu.Unlock()
}

// refused counts a refusal over cap k and returns its error.
func (r *refusals) refused(log *slog.Logger, k slot, open, limit int, what string) error {
	sp := &r[k]
	if sp.n == 0 {
		sp.since = time.Now()
		if log != nil {
			log.Warn("connection limit reached; refusing "+what+" over it", "limit", limit)
		}
	}
	sp.n++
	return errs.New(errs.Unavailable, "the service has too many %s open (%d of %d)", what, open, limit).
		WithHint("try again later; if it persists, something opens connections faster than it closes them (see the service log)")
}

// end ends the spell of refusals over cap k, if one is on and
// the connections open are down to half the cap: a flood that keeps the count
// at the cap then logs once, not each time a slot frees and fills again.
func (r *refusals) end(log *slog.Logger, k slot, open, limit int) {
	if sp := &r[k]; sp.n > 0 && open <= limit/2 {
		if log != nil {
			log.Info("connection limit no longer reached", "refused", sp.n, "for", time.Since(sp.since).Round(time.Millisecond))
		}
		*sp = spell{}
	}
}

// refuse writes the error frame of a connection refused at accept. The
// connection is new, so its socket buffer is empty and the write does not
// wait; the deadline only makes sure of it, as this runs in the accept loop.
func (s *Server) refuse(c *net.UnixConn, err error) {
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	s.reply(c, nil, nil, err)
}

// serveConn answers requests on one connection, one at a time, in order.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn, peer Peer) {
	fr := NewFrameReader(c)
	counted := anySlot
	defer func() { s.leave(counted) }()
	answer := func(req *Request, result any, err error) bool {
		if s.IdleTimeout > 0 {
			// A client that does not read its replies is closed too, however
			// long the request took.
			c.SetWriteDeadline(time.Now().Add(s.IdleTimeout))
		}
		return s.reply(c, req, result, err)
	}
	for {
		if s.IdleTimeout > 0 {
			// One deadline for the whole frame: a client that sends half a
			// frame and stalls, or drips bytes, is closed like an idle one.
			c.SetReadDeadline(time.Now().Add(s.IdleTimeout))
		}
		frame, err := fr.Next()
		if err != nil {
			if errs.Is(err, errs.FrameTooLarge) {
				answer(&Request{}, nil, err)
			}
			return // EOF, idle timeout, closed by Shutdown
		}
		if s.Trace != nil {
			s.Trace("in", frame)
		}
		req, err := DecodeRequest(frame)
		if !s.beginRequest() {
			answer(req, nil, errs.New(errs.ShuttingDown, "the service is shutting down"))
			return
		}
		wantStream := err == nil && s.StreamOps[req.Op]
		if counted == anySlot {
			k := requestSlot
			if wantStream {
				k = streamSlot
			}
			if cerr := s.enter(k); cerr != nil {
				answer(req, nil, cerr)
				s.handlers.Done()
				return
			}
			counted = k
		}
		if wantStream && counted != streamSlot {
			err = errs.New(errs.BadRequest, "%s opens a stream: it must be the first request on its connection", req.Op)
		}
		start := time.Now()
		var result any
		if err == nil {
			result, err = s.handle(ctx, peer, req)
		}
		if s.Log != nil {
			s.Log.Debug("request", "op", req.Op, "id", req.ID, "code", codeOrOK(err), "duration", time.Since(start))
		}
		// A stream keeps the connection: its result is the first reply, then
		// the stream owns the connection until it ends.
		stream, isStream := result.(Stream)
		if isStream {
			result = stream.Result
			if counted != streamSlot {
				// A bug: an operation not in StreamOps would run a stream
				// counted as a request connection.
				result, err = nil, errs.New(errs.Internal, "operation %s returned a stream it does not declare", req.Op)
			}
		}
		// The reply is part of the request: Shutdown waits for it to be written.
		ok := answer(req, result, err)
		s.handlers.Done()
		if !ok {
			return
		}
		if counted == streamSlot {
			// A stream slot serves its stream and nothing else.
			if isStream && err == nil {
				c.SetDeadline(time.Time{})
				stream.Run(c, fr)
			}
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

func (s *Server) handle(ctx context.Context, peer Peer, req *Request) (result any, err error) {
	if _, err := Negotiate(Version, req.Proto); err != nil {
		return nil, err
	}
	h, ok := s.Handlers[req.Op]
	if !ok {
		return nil, errs.New(errs.UnknownOp, "unknown operation %q", req.Op).
			WithHint("the service may be older than this client; see `%s version`", s.Names.Name())
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
	return h(ctx, peer, req)
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
	if !s.closing {
		s.closing = true
		if s.done == nil {
			s.done = make(chan struct{})
		}
		close(s.done)
	}
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
