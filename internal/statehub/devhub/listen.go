package devhub

import (
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
// headers are small.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Listener caps ln at s.MaxConns open connections. One over the cap is
// answered 503 at once and closed, rather than left waiting, so a flood is
// told and the clients already served go on.
func (s *Server) Listener(ln net.Listener) net.Listener {
	n := s.MaxConns
	if n == 0 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
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
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
			// A new connection's send buffer is empty: this does not block.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, busy)
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
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
