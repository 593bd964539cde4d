package statehub_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// nobody is the other local user of these tests.
const nobody = 65534

// TestMain removes the binaries testutil built for the squatter.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// counting is a State Hub that counts the requests it gets.
func counting(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := &devhub.Server{}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

// inode is the inode of a listening socket, as /proc/net/tcp lists it.
func inode(t *testing.T, ln net.Listener) uint64 {
	t.Helper()
	raw, err := ln.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return st.Ino
}

// asNobody makes the socket with inode ino look like uid 65534's.
func asNobody(ino uint64) statehub.OwnerFunc {
	return func(i uint64) (uint32, bool) { return nobody, i == ino }
}

// every runs each request a daemon makes of State Hub with c, and the probe
// of status and doctor.
func every(c *statehub.Client) map[string]error {
	out := withToken(c)
	out["probe"] = c.Probe(context.Background(), 5*time.Second)
	return out
}

// withToken runs the requests that carry the token.
func withToken(c *statehub.Client) map[string]error {
	ctx := context.Background()
	out := map[string]error{}
	_, _, _, out["workplans"] = c.Workplans(ctx)
	_, _, out["messages"] = c.UnreadMessages(ctx)
	_, out["progress"] = c.PostProgress(ctx, nil)
	out["task set"] = c.SetTask(ctx, "T1", contract.TaskUpdate{Status: "done"})
	out["events"] = c.Events(ctx, func() {}, func() {})
	return out
}

// Security item 1: a loopback port held by another local user (State Hub
// not running, its port taken) gets no token and is not believed: every
// request refuses it before writing a byte, naming the port and the uid
// that holds it. As root the other user is real (uid 65534 runs the
// squatter); everywhere the same check runs with the test's own listener
// made to look like uid 65534's.
func TestLoopbackPortOfAnotherUserIsRefused(t *testing.T) {
	token := []string{"sh", "-c", "echo s3cret"}
	check := func(t *testing.T, c *statehub.Client, port string) {
		t.Helper()
		for name, err := range every(c) {
			if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), "port "+port) ||
				!strings.Contains(err.Error(), fmt.Sprintf("held by uid %d", nobody)) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: %v", name, err)
			}
			var e *errs.Error
			if errors.As(err, &e); e != nil && !strings.Contains(e.Hint, "Unix socket") {
				t.Errorf("%s: hint %q", name, e.Hint)
			}
		}
	}
	t.Run("injected owner", func(t *testing.T) {
		ts, got := counting(t)
		_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
		check(t, &statehub.Client{Base: ts.URL, Credential: token, OwnerOf: asNobody(inode(t, ts.Listener))}, port)
		if n := got.Load(); n != 0 {
			t.Errorf("%d requests reached another user's listener", n)
		}
		// The user's own listener is believed: the same server, owner as it is.
		if _, _, _, err := (&statehub.Client{Base: ts.URL, Credential: token}).Workplans(context.Background()); err != nil {
			t.Errorf("the user's own State Hub: %v", err)
		}
	})
	t.Run("uid 65534", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("running a listener as uid 65534 needs root (CI runs as root; the injected case runs here)")
		}
		sq, addr := testutil.SquatTCP(t, nobody, "127.0.0.1:0")
		_, port, _ := net.SplitHostPort(addr)
		check(t, &statehub.Client{Base: "http://" + addr, Credential: token}, port)
		testutil.WaitFor(t, "the squatter to see each connection end", func() bool { return len(sq.Conns()) >= 6 })
		for _, n := range sq.Conns() {
			if n != 0 {
				t.Fatalf("the client wrote %d bytes to another user's listener: %v", n, sq.Conns())
			}
		}
	})
}

// Security item 1: api_base = "unix:///path" reaches State Hub over its
// socket; a socket file of another user, or one of ours with another
// user's process behind it, is refused before a byte is written.
func TestUnixSocketStateHub(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "statehub.sock")
	s := &devhub.Server{}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := &statehub.Client{Base: "unix://" + sock, Credential: []string{"echo", "s3cret"}}
	if _, _, _, err := c.Workplans(context.Background()); err != nil {
		t.Fatalf("the user's own socket: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(sock, &st); err != nil {
		t.Fatal(err)
	}
	injected := &statehub.Client{Base: "unix://" + sock, Credential: []string{"echo", "s3cret"}, OwnerOf: asNobody(st.Ino)}
	for name, err := range every(injected) {
		if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), fmt.Sprintf("%s is owned by uid %d", sock, nobody)) {
			t.Errorf("injected owner, %s: %v", name, err)
		}
	}

	t.Run("uid 65534", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("running a listener as uid 65534 needs root (CI runs as root)")
		}
		e := testutil.NewEnv(t)
		path := filepath.Join(e.SharedDir(t, "shared"), "statehub.sock")
		sq := e.Squat(t, nobody, path)
		c := &statehub.Client{Base: "unix://" + path, Credential: []string{"echo", "s3cret"}}
		for name, err := range every(c) {
			if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), fmt.Sprintf("is owned by uid %d", nobody)) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if got := sq.Conns(); len(got) != 0 {
			t.Fatalf("the client connected to another user's socket: %v", got)
		}
		// The socket file made to look like ours: the kernel's word on the
		// process behind it refuses it alone.
		if err := os.Lchown(path, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
		for name, err := range every(c) {
			if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), fmt.Sprintf("runs as uid %d", nobody)) {
				t.Errorf("chowned, %s: %v", name, err)
			}
		}
		testutil.WaitFor(t, "the squatter to see each connection end", func() bool { return len(sq.Conns()) >= 6 })
		for _, n := range sq.Conns() {
			if n != 0 {
				t.Fatalf("the client wrote %d bytes to another user's process: %v", n, sq.Conns())
			}
		}
	})
}

// Security item 1: to a host that is not this machine a token goes over
// https only: http:// with a credential command is refused before the
// command runs or anything is dialed.
func TestTokenGoesToAnotherHostOverHTTPSOnly(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	c := &statehub.Client{Base: "http://192.0.2.7:8000", Credential: []string{"sh", "-c", "touch " + ran + "; echo s3cret"}}
	for name, err := range withToken(c) {
		if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "over https only") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the credential command ran for a token that could not be sent")
	}
}

// Security item 1: a redirect is never followed, so the token cannot be led
// to another port (or host): a 3xx is an error that says so.
func TestRedirectsAreNotFollowed(t *testing.T) {
	other, got := counting(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	c := &statehub.Client{Base: redirect.URL, Credential: []string{"echo", "s3cret"}}
	for name, err := range every(c) {
		if name == "probe" { // an answer: reachable
			if err != nil {
				t.Errorf("probe: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "redirects are not followed") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Errorf("%d requests followed the redirect", n)
	}
}
