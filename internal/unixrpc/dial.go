package unixrpc

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// CheckPeer is CheckPeerFD for a net.Conn dialled on a Unix socket.
func CheckPeer(c net.Conn, path string, n Names) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errs.New(errs.Internal, "%s is not a Unix socket connection", path)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot tell who listens on %s", path)
	}
	var peerErr error
	if err := raw.Control(func(fd uintptr) { peerErr = CheckPeerFD(int(fd), path, n) }); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot tell who listens on %s", path)
	}
	return peerErr
}

// Dial connects to the Unix socket at path after CheckBeforeDial
// (private, when privateDir is not "", is the directory that must be
// private), for callers that need a net.Conn: streams and the hook socket.
func Dial(ctx context.Context, path, privateDir string, n Names, d net.Dialer) (net.Conn, error) {
	if err := CheckBeforeDial(path, privateDir, n); err != nil {
		return nil, err
	}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := CheckPeer(c, path, n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// OpenStream starts a streaming operation (the broker session): it sends the
// request, checks the first reply, and hands over the connection.
func OpenStream(ctx context.Context, c *Client, op string, args any) (net.Conn, *FrameReader, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	conn, err := Dial(ctx, c.Socket, c.PrivateDir, c.Names, net.Dialer{Timeout: timeout})
	if err != nil {
		return nil, nil, c.DialError(err)
	}
	// The handshake is bounded like a call; the stream then has no deadline.
	conn.SetDeadline(time.Now().Add(timeout))
	req := Request{Proto: Version, Op: op, ID: NewID()}
	if req.Args, err = json.Marshal(args); err != nil {
		conn.Close()
		return nil, nil, errs.Wrap(errs.Internal, err, "encode %s arguments", op)
	}
	frame, err := EncodeFrame(req)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	_, werr := conn.Write(frame)
	// A refusal sent before the service closed the connection is read even
	// when the write failed, as in Call.
	fr := NewFrameReader(conn)
	line, err := fr.Next()
	if err != nil {
		conn.Close()
		return nil, nil, c.ConnError(op, cmp.Or(werr, err))
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil || !resp.OK {
		conn.Close()
		if resp.Error != nil {
			return nil, nil, resp.Error.AsError()
		}
		return nil, nil, errs.New(errs.BadRequest, "malformed %s reply", op)
	}
	conn.SetDeadline(time.Time{})
	return conn, fr, nil
}
