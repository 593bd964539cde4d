package devhub

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust"
)

// HTTPServer is the server to serve s with: a request must arrive within
// its read timeouts and its answer be taken within the write timeout (an
// event stream lifts both for itself), an idle connection is closed, and
// headers are small. Each request knows its connection (ConnContext), so
// that the token it presents lets the connection count toward the cap
// (Listener).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
}

// connKey is where a request's context keeps its connection.
type connKey struct{}

// Listener caps ln's connections.
//
// Without a token (the user's own socket, or --no-token) every connection
// counts toward s.MaxConns from its accept; one over the cap is answered
// 503 at once and closed, rather than left waiting, so a flood is told and
// the clients already served go on.
//
// With a token, a connection counts toward MaxConns only once a request on
// it has presented the token: before that the server cannot tell the token
// holder's new connection from another local user's, so connections that
// held a slot from their accept let anyone who can reach the port starve
// the real client by holding MaxConns of them open. Until it is
// authenticated a connection is pending: at most s.MaxPending are, each
// for at most s.PendingTimeout, and a new one over that cap closes the
// oldest pending one instead of being refused. Holding connections open
// therefore takes nothing from the token holder, whose client sends its
// request the moment it connects; only one who opens connections faster
// than that request arrives could push it out, which is a CPU flood, not a
// held resource.
func (s *Server) Listener(ln net.Listener) net.Listener {
	n := s.MaxConns
	if n == 0 {
		n = DefaultMaxConns
	}
	l := &limitListener{Listener: ln, slots: make(chan struct{}, n), gated: s.Token != ""}
	l.maxPending = s.MaxPending
	if l.maxPending == 0 {
		l.maxPending = DefaultMaxPending
	}
	l.pendingTimeout = s.PendingTimeout
	if l.pendingTimeout == 0 {
		l.pendingTimeout = DefaultPendingTimeout
	}
	return l
}

type limitListener struct {
	net.Listener
	// slots are the connections that count: all of them when not gated,
	// the authenticated ones when gated.
	slots chan struct{}
	gated bool

	maxPending     int
	pendingTimeout time.Duration
	mu             sync.Mutex
	pending        list.List // of *limitConn not yet authenticated, oldest first
}

var busy = func() string {
	body := `{"error":"too many connections; try again"}` + "\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.gated {
			return l.admit(c), nil
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, l: l, counted: true}, nil
		default:
			// A new connection's send buffer is empty: this does not block.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, busy)
			c.Close()
		}
	}
}

// admit makes c pending, closing the oldest pending connection when there
// are already maxPending, and closes c itself if it is still pending after
// pendingTimeout.
func (l *limitListener) admit(c net.Conn) *limitConn {
	lc := &limitConn{Conn: c, l: l}
	l.mu.Lock()
	var evicted *limitConn
	if l.pending.Len() >= l.maxPending {
		evicted = l.pending.Remove(l.pending.Front()).(*limitConn)
		evicted.pending = nil
	}
	lc.pending = l.pending.PushBack(lc)
	// Set under mu: expire reads it under mu, and may run before
	// AfterFunc returns.
	lc.timer = time.AfterFunc(l.pendingTimeout, lc.expire)
	l.mu.Unlock()
	if evicted != nil {
		// Its server goroutine sees the close and calls Close, which
		// finds it no longer pending.
		evicted.Conn.Close()
	}
	return lc
}

// limitConn is a connection of a limitListener: pending (in its pending
// list) or counted (holding a slot), until it is closed.
type limitConn struct {
	net.Conn
	l *limitListener
	// pending, counted and timer are guarded by l.mu (counted is set once
	// at accept when not gated, before any other goroutine sees it).
	pending *list.Element
	counted bool
	timer   *time.Timer
}

// authenticated is called when a request on c presented the token: c
// counts from now on. It reports false when the cap is reached (or c was
// closed meanwhile): the request is refused and the connection closed.
func (c *limitConn) authenticated() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.counted {
		return true
	}
	if c.pending == nil {
		return false
	}
	select {
	case c.l.slots <- struct{}{}:
	default:
		return false
	}
	c.l.pending.Remove(c.pending)
	c.pending, c.counted = nil, true
	c.timer.Stop()
	return true
}

// expire closes c if no request on it has presented the token by now.
func (c *limitConn) expire() {
	c.l.mu.Lock()
	still := c.pending != nil
	if still {
		c.l.pending.Remove(c.pending)
		c.pending = nil
	}
	c.l.mu.Unlock()
	if still {
		c.Conn.Close()
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.pending != nil {
		c.l.pending.Remove(c.pending)
		c.pending = nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.counted {
		c.counted = false
		<-c.l.slots
	}
	return err
}

// TokenFile returns the token kept in path, made there first (32 random
// bytes in hex, a new 0600 file, its directory 0700) when create is set and
// there is none. A file others may read, or of another user, is refused.
func TokenFile(path string, create bool) (token string, created bool, err error) {
	if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", false, errs.Wrap(errs.Storage, err, "cannot make the token file's directory")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			b := make([]byte, 32)
			rand.Read(b)
			token = hex.EncodeToString(b)
			_, werr := fmt.Fprintln(f, token)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(path)
				return "", false, errs.Wrap(errs.Storage, werr, "cannot write the token file %s", path)
			}
			return token, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", false, errs.Wrap(errs.Storage, err, "cannot make the token file")
		}
	}
	// The token is a secret, and whoever could write the file could choose
	// it: the file must be the user's and private.
	f, err := trust.OpenPrivate(path, "token file")
	if errs.Is(err, errs.PermissionDeny) {
		return "", false, err
	}
	if err != nil {
		return "", false, errs.Wrap(errs.ConfigInvalid, err, "token file")
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", false, errs.Wrap(errs.ConfigInvalid, err, "token file")
	}
	if token = strings.TrimSpace(string(b)); token == "" {
		return "", false, errs.New(errs.ConfigInvalid, "token file %s is empty", path)
	}
	return token, false, nil
}
