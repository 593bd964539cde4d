package statehub

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/sockowner"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The token goes to our own State Hub only, and only our own State Hub's
// answers are believed. While nothing listens on a loopback port any local
// user may bind it; so before a byte is written the client checks who it is
// connected to:
//
//   - unix:///path: the socket file must be owned by the user (or root) and
//     the process listening on it must run as the user (or root), as the
//     kernel says (SO_PEERCRED), as our own services' sockets are checked;
//   - a loopback port: the listening socket, found in /proc/net/tcp and
//     /proc/net/tcp6, must belong to the user (or root);
//   - another host: a token goes over https only.
//
// Redirects are never followed: a token must not go anywhere but
// statehub.api_base. Root is trusted since it can read the token anyway.

// target is statehub.api_base taken apart.
type target struct {
	prefix string // what a request's path is appended to
	socket string // unix:// only: the socket's path
	scheme string // http, https or unix
	host   string // http(s): the host, without its port
}

func parseTarget(base string) (target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return target{}, errs.New(errs.ConfigInvalid, "State Hub address %q is not a URL", textsafe.RedactURL(base))
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return target{}, errs.New(errs.ConfigInvalid, "State Hub address %q must be unix:// and a socket's absolute path", textsafe.RedactURL(base))
		}
		// The host is a placeholder: the socket is the address.
		return target{prefix: "http://localhost", socket: u.Path, scheme: "unix"}, nil
	case "http", "https":
		if u.Host == "" {
			break
		}
		return target{prefix: strings.TrimRight(base, "/"), scheme: u.Scheme, host: u.Hostname()}, nil
	}
	return target{}, errs.New(errs.ConfigInvalid, "State Hub address %q must be an http://, https:// or unix:// URL", textsafe.RedactURL(base))
}

// loopbackHost reports whether host names this machine's loopback interface.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// tokenAllowed refuses to send a token in clear to another machine.
func (t target) tokenAllowed(base string) error {
	if t.scheme == "http" && !loopbackHost(t.host) {
		return errs.New(errs.ConfigInvalid, "statehub.api_base %s is http:// to %s, which is not this machine: State Hub's token goes to another host over https only", textsafe.RedactURL(base), t.host).
			WithHint("use https://%s…, or a State Hub on this machine (unix:// or 127.0.0.1)", t.host)
	}
	return nil
}

// OwnerFunc says who owns the socket with this inode, when it knows better
// than the system (tests only): see sockowner.OwnerFunc.
type OwnerFunc = sockowner.OwnerFunc

// trusted is whether a socket owned by uid may be State Hub's.
func trusted(uid uint32) bool { return sockowner.Trusted(uid) }

// newHTTPClient is an HTTP client that connects to t alone, checked, and
// follows no redirect.
func newHTTPClient(t target, ownerOf OwnerFunc) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if t.socket != "" {
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, d, t.socket, ownerOf)
		}
	} else {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := checkTCPPeer(conn, ownerOf); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		}
	}
	return &http.Client{
		Transport: tr,
		// The 3xx is the answer, and an error to the caller.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// HTTPClient returns a client for State Hub at base, with the checks every
// request of Client makes, and the URL prefix to put a route's path after:
// for tools that send State Hub what Client does not (the demo seeds it).
func HTTPClient(base string) (*http.Client, string, error) {
	return CheckedHTTPClient(base, nil)
}

// CheckedHTTPClient is HTTPClient with ownerOf standing in for the system's
// word on who owns a socket (tests): the other drivers of the Hub port
// reach their trackers through it, so that a loopback listener of another
// user is refused the token as it is here. Its CheckRedirect refuses every
// redirect; a driver may set its own.
func CheckedHTTPClient(base string, ownerOf OwnerFunc) (*http.Client, string, error) {
	t, err := parseTarget(base)
	if err != nil {
		return nil, "", err
	}
	return newHTTPClient(t, ownerOf), t.prefix, nil
}

// TokenAllowed refuses to send a token to base in clear to another machine.
func TokenAllowed(base string) error {
	t, err := parseTarget(base)
	if err != nil {
		return err
	}
	return t.tokenAllowed(base)
}

// dialSocket connects to State Hub's Unix socket once the file is a socket
// of the user's, and keeps the connection only when the process listening
// runs as the user.
func dialSocket(ctx context.Context, d *net.Dialer, path string, ownerOf OwnerFunc) (net.Conn, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	hint := "another local user may be waiting there for State Hub's token; point statehub.api_base at a socket in a directory of your own"
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, errs.New(errs.PermissionDeny, "State Hub's address %s is not a socket; refusing to use it", path).WithHint("%s", hint)
	}
	if uid := ownerOf.Owner(st.Ino, st.Uid); !trusted(uid) {
		return nil, errs.New(errs.PermissionDeny, "State Hub's socket %s is owned by uid %d, not by you (uid %d); refusing to send it a token or believe its answers", path, uid, os.Getuid()).
			WithHint("%s", hint)
	}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	raw, err := uc.SyscallConn()
	var cred *unix.Ucred
	credErr := err
	if err == nil {
		err = raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	}
	if err != nil || credErr != nil {
		conn.Close()
		return nil, errs.Wrap(errs.Unavailable, errors.Join(err, credErr), "cannot tell who listens on %s", path)
	}
	// A socket file can be chowned; the process behind it cannot be faked.
	if !trusted(cred.Uid) {
		conn.Close()
		return nil, errs.New(errs.PermissionDeny, "the process listening on State Hub's socket %s (pid %d) runs as uid %d, not as you (uid %d); refusing to send it a token or believe its answers", path, cred.Pid, cred.Uid, os.Getuid()).
			WithHint("%s", hint)
	}
	return conn, nil
}

// checkTCPPeer refuses a connection to a loopback port whose listening
// socket is not the user's (or root's), before a byte is written
// (sockowner.CheckLoopback says whose it is).
func checkTCPPeer(conn net.Conn, ownerOf OwnerFunc) error {
	err := sockowner.CheckLoopback(conn, ownerOf)
	var foreign *sockowner.Foreign
	switch {
	case err == nil:
		return nil
	case errors.As(err, &foreign):
		port := foreign.Addr.Port()
		return errs.New(errs.PermissionDeny, "%s; refusing to send State Hub's token there or believe its answers", foreign.Error()).
			WithHint("another local user may be listening in State Hub's place (`ss -ltnp 'sport = :%d'` shows who); run State Hub on a Unix socket (`coordination-engine dev-statehub` does by default; api_base unix://…) or on a port of your own", port)
	}
	port := 0
	if ra, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		port = ra.Port
	}
	if errors.Is(err, sockowner.ErrNoListener) {
		return errs.New(errs.Unavailable, "cannot tell who listens on port %d: no listening socket for it in /proc/net/tcp; refusing to send State Hub's token there", port)
	}
	return errs.Wrap(errs.Unavailable, err, "cannot tell who listens on port %d", port)
}

// refusal is the check's own error inside what net/http returns, so it
// reaches the user as it was made (its code, its hint), or nil.
func refusal(err error) *errs.Error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
