package service_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// `tamq hook` reaches its broker's socket, exits 0 whatever happens, and a
// process of another user is never heard even where the socket's mode would
// let it connect.
func TestHookSocketHearsOnlyItsUser(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	dir, err := os.MkdirTemp("", "tamq-hk-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var mu sync.Mutex
	var got []broker.HookEvent
	h, err := broker.ListenHooks(broker.HookSocketFor(dir, 4242), os.Getpid(), func(ev broker.HookEvent) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Open the way for another user: only the peer check stands.
	for _, p := range []string{dir, filepath.Dir(h.Path())} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(h.Path(), 0o666)

	hook := func(uid uint32, tool string) testutil.Result {
		cmd := e.Command(context.Background(), "tamq", "hook", `{"hook_event_name":"PermissionRequest","tool_name":"`+tool+`"}`)
		cmd.Env = append(cmd.Env, broker.HookSocketEnv+"="+h.Path())
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		}
		return testutil.RunCmd(t, cmd)
	}
	if r := hook(nobody, "from-nobody"); r.Status != 0 || r.Stdout != "" {
		t.Fatalf("tamq hook as another user: %s", r)
	}
	for _, tool := range []string{"first", "second"} {
		if r := hook(0, tool); r.Status != 0 || r.Stdout != "" {
			t.Fatalf("tamq hook: %s", r)
		}
	}
	testutil.WaitFor(t, "the two events of our own", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range got {
		if ev.Tool == "from-nobody" {
			t.Fatalf("heard another user: %+v", got)
		}
	}
	// Outside a window, or with a socket gone, the hook still exits 0.
	h.Close()
	if r := hook(0, "late"); r.Status != 0 || r.Stdout != "" || r.Stderr != "" {
		t.Fatalf("tamq hook with no broker: %s", r)
	}
}
