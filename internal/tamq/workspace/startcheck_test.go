package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// StartFailures ends as soon as every watched command has exited, on their
// exits alone (the fake clock never moves), and names those the shell
// could not find (127) or run (126); with a command that runs on, it ends
// at the deadline of its clock. A reused window, or one without a command,
// is not watched.
func TestStartFailuresWaitsOnExitsThenTheClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := tmux.Server{Name: testutil.NewTmux(t).Name}
	t.Cleanup(func() { srv.Run(context.Background(), nil, "kill-server") })
	dir := t.TempDir()
	if _, err := srv.EnsureSession(ctx, "w", dir); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("echo hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(repo, command string) api.EndpointWindow {
		t.Helper()
		w, err := srv.NewWindow(ctx, "w", repo, repo, dir, []string{"/bin/sh", "-c", command}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return api.EndpointWindow{Repo: repo, WindowID: w.ID, PaneID: w.PaneID, PanePID: w.PanePID, Command: command}
	}
	check := func(clk *clock.Fake, ws ...api.EndpointWindow) <-chan []string {
		out := make(chan []string, 1)
		go func() {
			failed, err := StartFailures(ctx, srv, ws, clk, StartWatch)
			if err != nil {
				t.Error(err)
			}
			var names []string
			for _, f := range failed {
				names = append(names, f.Window.Repo+":"+map[int]string{126: "126", 127: "127"}[f.Status])
			}
			slices.Sort(names)
			out <- names
		}()
		return out
	}
	reused := open("reused", "exec sleep 600")
	reused.Reused = true
	shell := open("shell", "exec sleep 600")
	shell.Command = ""
	quick := check(clock.NewFake(time.Now()),
		open("missing", "exec no-such-program-of-tamq"), open("plain", plain), open("exits", "exit 3"), reused, shell)
	select {
	case got := <-quick:
		if !slices.Equal(got, []string{"missing:127", "plain:126"}) {
			t.Errorf("start failures %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the exits of every watched command did not end the watch")
	}

	clk := clock.NewFake(time.Now())
	slow := check(clk, open("runs", "exec sleep 600"))
	clk.BlockUntil(1, ctx.Done())
	clk.Advance(StartWatch)
	select {
	case got := <-slow:
		if len(got) != 0 {
			t.Errorf("start failures with one running %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end at its clock's deadline")
	}
}
