package app

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// `start --detach --orwell` opens the orwell sink for the policy's word and
// the warning only (the service opens its own): the process that asked for
// the start keeps no descriptor of it.
func TestStartDetachedWithOrwellKeepsNoSinkOpen(t *testing.T) {
	root := t.TempDir()
	env := map[string]string{"HOME": root, "XDG_CONFIG_HOME": filepath.Join(root, "config"),
		"XDG_STATE_HOME": filepath.Join(root, "state"), "XDG_RUNTIME_DIR": filepath.Join(root, "run")}
	if err := os.Mkdir(env["XDG_RUNTIME_DIR"], 0o700); err != nil {
		t.Fatal(err)
	}
	a := NewApp(paths.Engine, "test", nil)
	a.Getenv, a.Out, a.Err = func(k string) string { return env[k] }, io.Discard, io.Discard
	p, err := a.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p.ConfigFile), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "[policy]\nprofile = \"diagnose\"\n[policy.profiles.diagnose]\nallow = [\"statehub_read\", \"orwell_diagnostics\"]\n"
	if err := os.WriteFile(p.ConfigFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// A service answers already, so the start starts nothing.
	svc, err := daemon.Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &unixrpc.Server{Handlers: map[string]unixrpc.Handler{
		daemon.OpPing: func(context.Context, unixrpc.Peer, *unixrpc.Request) (any, error) {
			return daemon.PingResult{PID: os.Getpid()}, nil
		},
	}}
	if err := svc.Listen(srv); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, daemon.Plan{}) }()
	t.Cleanup(func() { stop(); <-done })
	testutil.WaitFor(t, "the service to answer", func() bool { _, err := daemon.Ping(context.Background(), p); return err == nil })

	if err := a.StartDetached(context.Background(), ServeFlags{Orwell: true}, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.OrwellLog); err != nil {
		t.Fatalf("the sink was not opened: %v", err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == p.OrwellLog {
			t.Errorf("descriptor %s is still open on %s", fd.Name(), p.OrwellLog)
		}
	}
}
