package service_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/service"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// TestServiceOutlivesAFileDescriptorFlood leaves the service room for only a
// few more descriptors and opens more connections than that, so its accept
// fails with EMFILE. The service must go on, keep its socket, and answer once
// the connections are gone.
func TestServiceOutlivesAFileDescriptorFlood(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	pid := startDetached(t, e)
	logFile := filepath.Join(e.TamqState(), "tamq.log")
	readLog := func() string {
		b, _ := os.ReadFile(logFile)
		return string(b)
	}

	// A connection opened before the flood, to be served during it.
	ping := `{"proto":"0.1","op":"ping","id":"p"}` + "\n"
	held, err := net.Dial("unix", e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if resp := exchangeOn(t, held, ping); !resp.OK {
		t.Fatalf("ping before the flood: %+v", resp)
	}

	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(len(fds) + 4)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}

	// Connections the service cannot all accept: the first few take its
	// last descriptors, the rest wait in the listen queue.
	var conns []net.Conn
	for range 32 {
		c, err := net.Dial("unix", e.Socket())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	gone := func() bool { _, err := os.Lstat(e.Socket()); return err != nil }
	testutil.WaitFor(t, "accept to run out of descriptors", func() bool {
		return strings.Contains(readLog(), "out of file descriptors") || gone()
	})
	if gone() {
		t.Fatalf("the service removed its socket when accept failed; log:\n%s", readLog())
	}
	if resp := exchangeOn(t, held, ping); !resp.OK {
		t.Fatalf("ping on a connection opened before the flood: %+v", resp)
	}
	for _, c := range conns {
		c.Close()
	}

	if got := pingPID(t, e); got != pid {
		t.Fatalf("ping answered by pid %d, want the flooded service %d", got, pid)
	}
	if fi, err := os.Lstat(e.Socket()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket after the flood: %v", err)
	}
	// The failed accepts of one flood, those while the connections were held
	// and those as they closed, are logged once, not once each.
	if n := strings.Count(readLog(), "cannot accept connections"); n != 1 {
		t.Errorf("accept failures logged %d times, want once; log:\n%s", n, readLog())
	}
}

// TestServiceRefusesRequestConnectionsOverItsCap fills the service's cap of
// request connections: a command then fails with unavailable (exit 8) and a
// message that says why, a broker's session is still taken, and once a
// connection closes, commands work again.
func TestServiceRefusesRequestConnectionsOverItsCap(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	startDetached(t, e)

	ping := `{"proto":"0.1","op":"ping","id":"p"}` + "\n"
	var conns []net.Conn
	for range service.MaxConns {
		c, err := net.Dial("unix", e.Socket())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if resp := exchangeOn(t, c, ping); !resp.OK {
			t.Fatalf("ping on connection %d: %+v", len(conns), resp)
		}
	}

	r := e.Run(t, "tamq", "ping")
	if r.Status != errs.ExitStatus(errs.Unavailable) || !strings.Contains(r.Stderr, "too many request connections open (256 of 256)") {
		t.Fatalf("tamq ping over the cap: %s", r)
	}

	// A broker's session has its own cap: its request reaches the service
	// (and fails there, for the made-up arguments it sends).
	b, err := net.Dial("unix", e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resp := exchangeOn(t, b, `{"proto":"0.1","op":"broker_session","id":"b","args":{}}`+"\n")
	if resp.OK || resp.Error == nil || resp.Error.Code != errs.BadRequest {
		t.Fatalf("broker session while the request connections are full: %+v", resp)
	}

	conns[0].Close()
	testutil.WaitFor(t, "tamq ping to be served again", func() bool { return e.Run(t, "tamq", "ping").Status == 0 })
	for _, c := range conns[1:] {
		c.Close()
	}
}

// exchangeOn sends one frame on c and reads the response.
func exchangeOn(t *testing.T, c net.Conn, frame string) unixrpc.Response {
	t.Helper()
	if _, err := c.Write([]byte(frame)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a safety net, not a timing
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp unixrpc.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("response %q: %v", line, err)
	}
	return resp
}
