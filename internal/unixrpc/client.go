package unixrpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
)

// Client calls the service, opening a new connection per call as the spec asks
// (recovery after a restart then never depends on a connection's state).
type Client struct {
	Socket string
	// Names name the service in messages and hints.
	Names Names
	// Timeout bounds one call, dial included; zero means 30 s.
	Timeout time.Duration
	// PrivateDir, when set, is the directory holding Socket that must be
	// private to the user (see CheckPrivateDir); it is checked on every call.
	PrivateDir string
	// WaitRestart, when set, is how long a call waits for a service that is
	// not listening (no socket, or nothing accepts on it) to come back
	// before it says the service is not running. Nothing was sent then, so
	// trying again is safe for any operation.
	WaitRestart time.Duration
}

// Call sends op with args and decodes the result into result (which may be nil).
func (c *Client) Call(ctx context.Context, op string, args, result any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	// A deadline, not context.WithTimeout: the socket's own timeouts enforce
	// it, and the runtime's first timer would start the network poller and a
	// thread to wait in it, more than a local round trip costs.
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	conn, err := c.dialWaiting(ctx, dl)
	if err != nil {
		return c.DialError(err)
	}
	defer conn.Close()
	req := Request{Proto: Version, Op: op, ID: NewID()}
	if args != nil {
		if req.Args, err = json.Marshal(args); err != nil {
			return errs.Wrap(errs.Internal, err, "encode %s arguments", op)
		}
	}
	frame, err := EncodeFrame(req)
	if err != nil {
		return err
	}
	_, werr := conn.Write(frame)
	// When the service closed the connection, it may have said why first
	// (too many connections open): that answer is read and wins.
	if werr != nil && !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		return c.ConnError(op, werr)
	}
	line, err := NewFrameReader(conn).Next()
	if err != nil {
		return c.ConnError(op, cmp.Or(werr, err))
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return errs.Wrap(errs.BadRequest, err, "malformed response from %s", c.name())
	}
	if !resp.OK {
		if resp.Error == nil {
			return errs.New(errs.Internal, "%s answered %s with neither result nor error", c.name(), op)
		}
		return resp.Error.AsError()
	}
	if result != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return errs.Wrap(errs.BadRequest, err, "malformed %s result from %s", op, c.name())
		}
	}
	return nil
}

func (c *Client) name() string { return c.Names.Name() }

// DialError says in a user's words why connecting to the service failed.
func (c *Client) DialError(err error) error {
	var e *errs.Error
	switch {
	case errors.As(err, &e):
		return e // a check refused the socket, and said why
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return errs.New(errs.Unavailable, "the %s service is not running (nothing listens on %s)", c.name(), c.Socket).
			WithHint("start it with `%s start --detach`", c.name())
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return errs.New(errs.PermissionDeny, "cannot connect to %s: permission denied", c.Socket).
			WithHint("the socket belongs to another user; %s", c.Names.MoveSocket())
	case errors.Is(err, context.DeadlineExceeded):
		return errs.New(errs.Timeout, "timed out connecting to %s on %s", c.name(), c.Socket)
	}
	return errs.Wrap(errs.Unavailable, err, "cannot connect to %s on %s", c.name(), c.Socket)
}

// ConnError says in a user's words why op failed on a connected socket.
func (c *Client) ConnError(op string, err error) error {
	// net.Error's Timeout, without linking net into every command's start.
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EAGAIN) {
		return errs.New(errs.Timeout, "%s did not answer %s in time", c.name(), op)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return errs.New(errs.Unavailable, "%s closed the connection during %s", c.name(), op)
	}
	return errs.Wrap(errs.Unavailable, err, "talking to %s", c.name())
}

// dialWaiting dials, and while the service is not listening and WaitRestart
// allows, dials again after a pause that grows to a second. A socket left
// behind (nothing accepts on it) is a service that died, likely to be
// started again: it is waited for up to WaitRestart. No socket at all is a
// service stopped on purpose, or one between removing a stale socket and
// binding its own: that is waited for a second at most.
func (c *Client) dialWaiting(ctx context.Context, deadline time.Time) (io.ReadWriteCloser, error) {
	start := time.Now()
	redial := backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second}
	pause := redial.Next(0)
	for {
		conn, err := c.dialBlocking(deadline)
		giveUp := start.Add(c.WaitRestart)
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
		case errors.Is(err, syscall.ENOENT):
			giveUp = start.Add(min(c.WaitRestart, time.Second))
		default:
			return conn, err
		}
		if giveUp.After(deadline) {
			giveUp = deadline
		}
		if time.Now().Add(pause).After(giveUp) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause): // no event tells a client that a socket is back
		}
		pause = redial.Next(pause)
	}
}

// dialBlocking connects with plain blocking system calls, bounded by deadline
// through the socket's own timeouts. A CLI command makes one call and exits;
// Go's network poller would add thread start-ups and wake-ups that cost more
// than the whole round trip on a local socket. Nothing is written before the
// socket and the process behind it are known to be the user's own.
func (c *Client) dialBlocking(deadline time.Time) (io.ReadWriteCloser, error) {
	path := c.Socket
	if err := CheckBeforeDial(path, c.PrivateDir, c.Names); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if !deadline.IsZero() {
		tv := unix.NsecToTimeval(max(time.Until(deadline), time.Millisecond).Nanoseconds())
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EAGAIN) {
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
	if err := CheckPeerFD(fd, path, c.Names); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// The descriptor is blocking, so os.File uses plain read and write.
	return os.NewFile(uintptr(fd), path), nil
}

// requests counts this process's requests.
var requests atomic.Uint64

// newID returns a request id. It only pairs a response with its request on a
// connection that carries one call, so it needs to be unique, not
// unguessable: a counter with the pid, rather than crypto/rand, which would
// link and initialise the crypto packages into every command's start.
func NewID() string {
	return strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(requests.Add(1), 10)
}
