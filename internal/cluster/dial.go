package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/sockowner"
)

// While etcd is down, any local user may bind its loopback port (or its
// socket's path) and wait: the engine's client logs in with the first
// request it sends, and that holds user:password. So every connection to
// etcd, the first and each one after a break, is checked before a byte is
// written to it, as State Hub's are (internal/sockowner):
//
//   - a loopback port: its listening socket must be the user's or root's;
//   - a socket (unix:///path): the file and the process listening on it
//     must be the user's or root's;
//   - another machine: with a password to send, only over TLS (config
//     validation refuses http:// there first; this catches a name that
//     resolves elsewhere).
//
// A refusal closes the connection unwritten, is kept (Claims.refused) and
// is what a call that found no connection answers: permission_denied,
// naming the endpoint and the uid.

// ErrForeignPeer is in the chain of every refusal of an endpoint that is
// not the user's own: the doctor tells it from refused credentials.
var ErrForeignPeer = errors.New("etcd's endpoint is not the user's")

// checkEndpoints accepts the endpoints etcd's client and the dialer know:
// http(s)://host:port and unix:///absolute/path (config validation says
// more; this is for callers that build a Config by hand).
func checkEndpoints(eps []string) error {
	for _, ep := range eps {
		u, err := url.Parse(ep)
		switch {
		case err != nil:
		case u.Scheme == "unix" && u.Host == "" && strings.HasPrefix(u.Path, "/"):
			continue
		case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
			continue
		}
		return errs.New(errs.ConfigInvalid, "cluster: endpoint %q must be http://host:port, https://host:port or unix:///path", ep)
	}
	return nil
}

// dial is the dialer of every connection etcd's client makes. addr is
// "host:port", or "unix:///path" for a socket endpoint (gRPC hands a
// custom dialer the target as written).
func (c *Claims) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		conn, err = c.dialSocket(ctx, &d, path)
	} else {
		conn, err = c.dialTCP(ctx, &d, addr)
	}
	var refusal *errs.Error
	switch {
	case errors.As(err, &refusal):
		c.refused.Store(refusal)
	case err == nil:
		c.refused.Store(nil)
	}
	return conn, err
}

func (c *Claims) dialTCP(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := c.checkTCP(conn, addr); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkTCP judges a connected TCP connection before anything is written.
func (c *Claims) checkTCP(conn net.Conn, addr string) error {
	if c.tls {
		// The certificate, checked against cluster.tls_ca_file (or the
		// system's roots) before a byte of the password goes, proves the
		// endpoint wherever it listens and whoever runs it: an etcd of
		// its own system user on this machine included. A squatter gets a
		// TLS hello and nothing it can answer.
		return nil
	}
	ra, _ := conn.RemoteAddr().(*net.TCPAddr)
	err := sockowner.CheckLoopback(conn, c.cfg.OwnerOf)
	var foreign *sockowner.Foreign
	switch {
	case errors.As(err, &foreign):
		return &errs.Error{Code: errs.PermissionDeny, Err: ErrForeignPeer,
			Message: fmt.Sprintf("etcd's endpoint %s: %s; refusing to send it etcd's password or a claim, or believe its answers", addr, foreign.Error()),
			Hint: fmt.Sprintf("another local user may be listening in etcd's place (`ss -ltnp 'sport = :%d'` shows who); stop it and start etcd there, "+
				"or reach etcd over a socket of your own (unix:///…) or https:// with cluster.tls_ca_file", foreign.Addr.Port())}
	case errors.Is(err, sockowner.ErrNoListener):
		return errs.New(errs.Unavailable, "cannot tell who listens on %s: no listening socket for it in /proc/net/tcp; refusing to send it anything", addr)
	case err != nil:
		return errs.Wrap(errs.Unavailable, err, "cannot tell who listens on %s", addr)
	}
	if ra != nil && !ra.AddrPort().Addr().Unmap().IsLoopback() && c.secret {
		return &errs.Error{Code: errs.PermissionDeny, Err: ErrForeignPeer,
			Message: fmt.Sprintf("etcd's endpoint %s is another machine (%s) reached over plain http, and there is a password to send; refusing to send it in clear", addr, ra.IP),
			Hint:    "write the endpoints as https:// (with cluster.tls_ca_file), or reach an etcd on this machine"}
	}
	return nil
}

// dialSocket connects to etcd's socket at path once the file is a socket
// of the user's (or root's), and keeps the connection only when the process
// listening runs as the user (or root).
func (c *Claims) dialSocket(ctx context.Context, d *net.Dialer, path string) (net.Conn, error) {
	hint := "another local user may be waiting there for etcd's password; point cluster.etcd_endpoints at a socket in a directory of your own"
	isSocket, uid, err := sockowner.SocketFile(path, c.cfg.OwnerOf)
	switch {
	case err != nil:
		return nil, err
	case !isSocket:
		return nil, &errs.Error{Code: errs.PermissionDeny, Err: ErrForeignPeer, Hint: hint,
			Message: fmt.Sprintf("etcd's endpoint unix://%s is not a socket; refusing to use it", path)}
	case !sockowner.Trusted(uid):
		return nil, &errs.Error{Code: errs.PermissionDeny, Err: ErrForeignPeer, Hint: hint,
			Message: fmt.Sprintf("etcd's socket %s is owned by uid %d, not by you (uid %d) or root; refusing to send it etcd's password or a claim", path, uid, os.Getuid())}
	}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	peer, pid, err := sockowner.PeerUID(conn.(*net.UnixConn))
	switch {
	case err != nil:
		conn.Close()
		return nil, errs.Wrap(errs.Unavailable, err, "cannot tell who listens on %s", path)
	case !sockowner.Trusted(peer):
		// A socket file can be chowned; the process behind it cannot be
		// faked.
		conn.Close()
		return nil, &errs.Error{Code: errs.PermissionDeny, Err: ErrForeignPeer, Hint: hint,
			Message: fmt.Sprintf("the process listening on etcd's socket %s (pid %d) runs as uid %d, not as you (uid %d) or root; refusing to send it etcd's password or a claim", path, pid, peer, os.Getuid())}
	}
	return conn, nil
}

// httpClient is a client of one endpoint's plain HTTP side (etcd's client
// port answers /version too), through the same checked dialer, and the
// URL of path there.
func (c *Claims) httpClient(endpoint, path string) (*http.Client, string, error) {
	t, err := tlsConfig(c.cfg)
	if err != nil {
		return nil, "", err
	}
	tr := &http.Transport{TLSClientConfig: t, Proxy: nil}
	base := strings.TrimSuffix(endpoint, "/")
	if sock, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx, "unix://"+sock) }
		base = "http://localhost"
	} else {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return c.dial(ctx, addr) }
	}
	return &http.Client{Transport: tr, Timeout: c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base + path, nil
}
