package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// sharedDir makes a directory anyone may create files in, with the sticky
// bit, as /tmp is: where another user can get to a path first.
func sharedDir(t *testing.T, e *testutil.Env, name string) string {
	t.Helper()
	d := filepath.Join(e.Root, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// setVar replaces (or, with value "", drops) one variable of the test's
// environment.
func setVar(e *testutil.Env, name, value string) {
	e.Vars = slices.DeleteFunc(e.Vars, func(v string) bool { return strings.HasPrefix(v, name+"=") })
	if value != "" {
		e.Vars = append(e.Vars, name+"="+value)
	}
}

// Issue 11, item 1: another user who binds the socket path first gets
// nothing: every client command refuses it before writing a byte, whether it
// is told by the socket file's owner or, with the file chowned to the victim,
// by the kernel's credentials of the process behind it.
func TestClientsRefuseAnotherUsersSocket(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.Gita(t, "net-kingdom")
	e.Runtime = sharedDir(t, e, "run-shared")
	setVar(e, "XDG_RUNTIME_DIR", e.Runtime)
	sq := e.Squat(t, nobody, e.Socket())
	commands := [][]string{{"send", "To:net-kingdom: the secret body"}, {"ping"}, {"stop"}}
	check := func(want string) {
		t.Helper()
		for _, args := range commands {
			r := e.Run(t, "tamq", args...)
			if r.Status != 9 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr+r.Stdout, "secret") {
				t.Errorf("tamq %s with another user's socket: %s", args[0], r)
			}
		}
		// The broker's stream too: it would type what the squatter sends.
		c := protocol.Client{Socket: e.Socket(), Service: "tamq", Timeout: 5 * time.Second}
		if _, _, err := c.OpenStream(context.Background(), protocol.OpBrokerSession, protocol.BrokerSessionArgs{Repo: "net-kingdom"}); !errs.Is(err, errs.PermissionDeny) {
			t.Errorf("broker session with another user's socket: %v", err)
		}
	}
	check(fmt.Sprintf("socket %s is owned by uid %d, not by you", e.Socket(), nobody))
	if got := sq.Conns(); len(got) != 0 {
		t.Fatalf("clients connected to a socket of another user: %v", got)
	}

	// A socket file that looks like ours: only the peer check is left.
	if err := os.Lchown(e.Socket(), os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	check(fmt.Sprintf("runs as uid %d, not as you", nobody))
	testutil.WaitFor(t, "the squatter to see each connection end", func() bool { return len(sq.Conns()) == len(commands)+1 })
	for _, n := range sq.Conns() {
		if n != 0 {
			t.Fatalf("a client wrote %d bytes to another user's process: %v", n, sq.Conns())
		}
	}
	// Our own service cannot take that path either, and says why.
	if r := e.Run(t, "tamq", "start", "--detach"); r.Status == 0 || !strings.Contains(r.Stderr, e.Socket()) {
		t.Errorf("start with a squatted socket: %s", r)
	}
}

// Issue 11, item 1: with XDG_RUNTIME_DIR unset the socket lives in a private
// directory under $TMPDIR (made 0700); one planted there by another user, or
// a symbolic link, or a directory at the socket path, is refused and said so.
func TestPrivateSocketDirectory(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	tmp := sharedDir(t, e, "tmp")
	setVar(e, "XDG_RUNTIME_DIR", "")
	setVar(e, "TMPDIR", tmp)
	private := filepath.Join(tmp, fmt.Sprintf("tamq-%d", os.Getuid()))
	socket := filepath.Join(private, "tamq.sock")

	e.Tamq(t, "start", "--detach")
	fi, err := os.Lstat(private)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("private dir %s: %v %v", private, fi, err)
	}
	if fi, err := os.Lstat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v", socket, err)
	}
	e.Tamq(t, "ping")
	if r := e.Tamq(t, "config", "show", "--json"); !strings.Contains(r.Stdout, `"socket": "`+socket+`"`) {
		t.Errorf("paths do not show %s: %s", socket, r.Stdout)
	}
	e.Tamq(t, "stop")

	// Loosened by mistake: refused until it is private again.
	os.Chmod(private, 0o755)
	for _, args := range [][]string{{"ping"}, {"start", "--detach"}} {
		if r := e.Run(t, "tamq", args...); r.Status != 9 || !strings.Contains(r.Stderr, "has mode 0755; it must be private to you (0700)") {
			t.Errorf("tamq %s with an open private dir: %s", args[0], r)
		}
	}
	os.RemoveAll(private)

	// Planted by another user before ours existed.
	plant := func(how string) {
		cmd := exec.Command("sh", "-c", how)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if r := testutil.RunCmd(t, cmd); r.Status != 0 {
			t.Fatalf("planting %q: %s", how, r)
		}
	}
	plant("mkdir -m 0700 " + private)
	for _, args := range [][]string{{"ping"}, {"send", "To:x: secret"}, {"start", "--detach"}, {"serve"}} {
		r := e.Run(t, "tamq", args...)
		if r.Status != 9 || !strings.Contains(r.Stderr, fmt.Sprintf("socket directory %s is owned by uid %d, not by you", private, nobody)) {
			t.Errorf("tamq %s with a planted private dir: %s", args[0], r)
		}
	}
	os.RemoveAll(private)
	plant("mkdir " + filepath.Join(tmp, "elsewhere") + " && ln -s elsewhere " + private)
	if r := e.Run(t, "tamq", "start", "--detach"); r.Status != 9 || !strings.Contains(r.Stderr, "is a symbolic link; refusing to follow it") {
		t.Errorf("start with a planted symlink: %s", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(tmp, "elsewhere")); len(entries) != 0 {
		t.Errorf("something was made through the planted link: %v", entries)
	}
}

// Issue 11, item 1: a directory another user made at the socket path, in a
// shared runtime directory, is reported as what it is.
func TestSomethingPlantedAtTheSocketPath(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.Runtime = sharedDir(t, e, "run-shared")
	setVar(e, "XDG_RUNTIME_DIR", e.Runtime)
	if err := os.Mkdir(e.Socket(), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chown(e.Socket(), nobody, nobody)
	if r := e.Run(t, "tamq", "ping"); r.Status != 13 || !strings.Contains(r.Stderr, e.Socket()+" is not a socket; refusing to use it") {
		t.Errorf("ping with a directory at the socket path: %s", r)
	}
	if r := e.Run(t, "tamq", "serve"); r.Status != 13 || !strings.Contains(r.Stderr, e.Socket()+" exists and is not a socket") {
		t.Errorf("serve with a directory at the socket path: %s", r)
	}
}
