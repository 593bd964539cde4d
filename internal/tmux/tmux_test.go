package tmux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// TestMain gives the servers these tests start (as tamq does, with this
// process's environment) an empty HOME, so their shells read no one's rc
// files, as testutil.NewTmux does for its servers.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "tamq-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// private starts a private server with session "work", removed at cleanup.
func private(t testing.TB) Server {
	s := Server{Name: testutil.NewTmux(t).Name}
	cleanUp(t, s)
	return s
}

// unstarted names a private server that does not run yet and is removed at
// cleanup if the test starts it.
func unstarted(t testing.TB) Server {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is required: ", err)
	}
	s := Server{Name: fmt.Sprintf("tamq-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	cleanUp(t, s)
	return s
}

// cleanUp kills the private server s and removes its socket file, which tmux
// leaves behind.
func cleanUp(t testing.TB, s Server) {
	t.Cleanup(func() {
		path, err := s.SocketPath(context.Background())
		exec.Command("tmux", "-L", s.Name, "kill-server").Run()
		if err == nil {
			os.Remove(path)
		}
	})
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestChoose(t *testing.T) {
	uid := os.Getuid()
	cases := []struct {
		name   string
		socket string
		vars   map[string]string
		want   Server
	}{
		{"-L wins", "mine", map[string]string{"TMUX": "/tmp/tmux-0/default,1234,0"}, Server{Name: "mine"}},
		{"a path is -S", "/run/t/sock", map[string]string{"TMUX": "/tmp/tmux-0/default,1234,0"}, Server{Socket: "/run/t/sock"}},
		{"$TMUX", "", map[string]string{"TMUX": "/tmp/tmux-0/default,1234,0", "TMUX_TMPDIR": "/x"}, Server{Socket: "/tmp/tmux-0/default"}},
		{"default", "", nil, Server{Name: "default"}},
		{"TMUX_TMPDIR", "", map[string]string{"TMUX_TMPDIR": "/var/run/t/"}, Server{Name: "default"}},
		{"empty $TMUX path", "", map[string]string{"TMUX": ",1,2"}, Server{Name: "default"}},
	}
	for _, c := range cases {
		if got := Choose(c.socket, env(c.vars)); got != c.want {
			t.Errorf("%s: Choose = %+v, want %+v", c.name, got, c.want)
		}
	}
	paths := map[string]string{
		"":         fmt.Sprintf("/tmp/tmux-%d/default", uid),
		"mine":     fmt.Sprintf("/tmp/tmux-%d/mine", uid),
		"/run/t/s": "/run/t/s",
	}
	for name, want := range paths {
		if got := ChoosePath(name, env(nil)); got != want {
			t.Errorf("ChoosePath(%q) = %q, want %q", name, got, want)
		}
	}
	if got := ChoosePath("", env(map[string]string{"TMUX_TMPDIR": "/var/run/t/"})); got != fmt.Sprintf("/var/run/t/tmux-%d/default", uid) {
		t.Errorf("ChoosePath with TMUX_TMPDIR = %q", got)
	}
	if got := ServerAt(fmt.Sprintf("/tmp/tmux-%d/work", uid), env(nil)); got != (Server{Name: "work"}) {
		t.Errorf("ServerAt in the label directory = %+v", got)
	}
	if got := ServerAt("/run/t/s", env(nil)); got != (Server{Socket: "/run/t/s"}) {
		t.Errorf("ServerAt elsewhere = %+v", got)
	}
	if got := (Server{Socket: "/s", Name: "n"}).args(); strings.Join(got, " ") != "-S /s" {
		t.Errorf("args = %q, want -S to win as in tmux", got)
	}
}

func TestSessionAndServer(t *testing.T) {
	ctx := ctxFor(t)
	s := unstarted(t)
	if s.Alive(ctx) {
		t.Fatal("Alive for a server never started")
	}
	if _, err := s.PID(ctx); !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), s.Name) {
		t.Fatalf("PID of no server: %v (want unavailable, naming the server)", err)
	}
	if _, err := s.ListWindows(ctx); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("ListWindows of no server: %v", err)
	}
	dir := t.TempDir()
	created, err := s.EnsureSession(ctx, "my sess,#1", dir)
	if err != nil || !created {
		t.Fatalf("EnsureSession first: created=%v err=%v", created, err)
	}
	created, err = s.EnsureSession(ctx, "my sess,#1", dir)
	if err != nil || created {
		t.Fatalf("EnsureSession second: created=%v err=%v", created, err)
	}
	if !s.Alive(ctx) {
		t.Fatal("not Alive after EnsureSession")
	}
	pid, err := s.PID(ctx)
	if err != nil || pid <= 1 {
		t.Fatalf("PID = %d, %v", pid, err)
	}
	path, err := s.SocketPath(ctx)
	if err != nil || filepath.Base(path) != s.Name {
		t.Fatalf("SocketPath = %q, %v", path, err)
	}
	// The path names the same server.
	if p2, err := (Server{Socket: path}).PID(ctx); err != nil || p2 != pid {
		t.Fatalf("PID via -S %s = %d, %v; want %d", path, p2, err, pid)
	}
	ws, err := s.ListWindows(ctx)
	if err != nil || len(ws) != 1 || ws[0].Session != "my sess,#1" {
		t.Fatalf("ListWindows = %+v, %v", ws, err)
	}
	for _, bad := range []string{"", "a.b", "a:b"} {
		if _, err := s.EnsureSession(ctx, bad, ""); !errs.Is(err, errs.Usage) {
			t.Errorf("EnsureSession(%q) = %v, want a usage error", bad, err)
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx := ctxFor(t)
	if _, err := (Server{}).Run(ctx, nil, "list-sessions"); err == nil {
		t.Fatal("Run with no server chosen succeeded")
	}
	t.Setenv("PATH", t.TempDir())
	_, err := Server{Name: "x"}.Run(ctx, nil, "list-sessions")
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("missing tmux: %v", err)
	}
}

func waitFile(t testing.TB, path, want string) {
	t.Helper()
	var got []byte
	testutil.WaitFor(t, fmt.Sprintf("%s to hold %q", filepath.Base(path), want), func() bool {
		got, _ = os.ReadFile(path)
		return string(got) == want || len(got) > len(want)
	})
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), got, want)
	}
}

func windowByID(t testing.TB, ctx context.Context, s Server, id string) Window {
	t.Helper()
	ws, err := s.ListWindows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	t.Fatalf("window %s not listed in %+v", id, ws)
	return Window{}
}

func TestNewWindow(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	// Our own server: make renaming possible, so the window options must stop it.
	for _, o := range []string{"allow-rename", "automatic-rename"} {
		if _, err := s.Run(ctx, nil, "set-option", "-g", "-w", o, "on"); err != nil {
			t.Fatal(err)
		}
	}
	// A foreign window whose name holds the list separators.
	if _, err := s.Run(ctx, nil, "new-window", "-d", "-n", arg("x\x1fy\nz;"), "-t", "=work:"); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "repo dir, with space#1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "env")
	name, repo := "with space,comma #{pid};", "org/repo with space,comma;"
	script := `printf '%s' "$TAMQ_REPO" > "$1"; printf '\033]2;renamed\033\\'; printf '\033kname\033\\'; echo DONE; exec cat`
	w, err := s.NewWindow(ctx, "work", name, repo, dir, []string{"sh", "-c", script, "sh", out}, map[string]string{"TAMQ_REPO": repo, "OTHER": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.ID, "@") || !strings.HasPrefix(w.PaneID, "%") || w.PanePID <= 1 {
		t.Fatalf("NewWindow = %+v", w)
	}
	waitFile(t, out, repo)
	testutil.WaitFor(t, "DONE on the screen", func() bool {
		text, _ := s.CapturePane(ctx, w.PaneID)
		return strings.Contains(text, "DONE")
	})

	ws, err := s.ListWindows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []Window
	foreign := false
	for _, x := range ws {
		if x.Repo == repo {
			mine = append(mine, x)
		}
		foreign = foreign || x.Name == "x\x1fy\nz;"
	}
	want := Window{ID: w.ID, Name: name, Session: "work", PaneID: w.PaneID, PanePID: w.PanePID, DeadStatus: -1, Repo: repo}
	if len(mine) != 1 || mine[0] != want {
		t.Fatalf("windows with our repo: %+v, want [%+v]", mine, want)
	}
	if !foreign {
		t.Fatalf("foreign window with separators in its name not listed: %+v", ws)
	}

	cwd, err := s.Run(ctx, nil, "display-message", "-p", "-t", w.PaneID, "#{pane_current_path}")
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(dir); strings.TrimSuffix(cwd, "\n") != real {
		t.Fatalf("pane cwd %q, want %q", cwd, real)
	}
	for _, o := range []string{"allow-rename", "automatic-rename", "remain-on-exit"} {
		v, err := s.Run(ctx, nil, "show-options", "-w", "-v", "-t", w.ID, o)
		if want := map[bool]string{true: "on", false: "off"}[o == "remain-on-exit"]; err != nil || strings.TrimSpace(v) != want {
			t.Errorf("window option %s = %q, %v; want %s", o, v, err, want)
		}
	}

	if err := syscall.Kill(w.PanePID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := deadWindow(t, ctx, s, w.ID); got.Name != name || got.DeadStatus != 128+int(syscall.SIGTERM) && got.DeadStatus != -1 {
		t.Fatalf("dead window renamed to %q, or its exit status %d is not SIGTERM's as a shell says it", got.Name, got.DeadStatus)
	}
}

func TestNewWindowQuickExitAndErrors(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	// Exits at once: remain-on-exit must already be set when it does.
	w, err := s.NewWindow(ctx, "work", "quick", "r", "", []string{"sh", "-c", "exit 3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := deadWindow(t, ctx, s, w.ID); got.DeadStatus != 3 && got.DeadStatus != -1 {
		t.Fatalf("exit status of the dead pane: %d, want 3", got.DeadStatus)
	}

	// What a broker says of its agent's exit is read when tmux does not
	// know it, and a respawn forgets it.
	w, err = s.NewWindow(ctx, "work", "broker", "r", "", []string{`tmux set-option -p -t "$TMUX_PANE" ` + ExitOption + ` 127; exit 127`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := deadWindow(t, ctx, s, w.ID); got.DeadStatus != 127 {
		t.Fatalf("exit status of a pane that set %s: %d, want 127", ExitOption, got.DeadStatus)
	}
	if err := s.Respawn(ctx, w.PaneID, "", []string{"sh", "-c", "exec sleep 60"}, nil); err != nil {
		t.Fatal(err)
	}
	if own, err := s.Run(ctx, nil, "display-message", "-p", "-t", w.PaneID, "#{"+ExitOption+"}"); err != nil || strings.TrimSpace(own) != "" {
		t.Fatalf("%s after a respawn: %q, %v; want it unset", ExitOption, own, err)
	}

	// Empty argv: the default shell; no repo: no marker.
	w, err = s.NewWindow(ctx, "work", "shell", "", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := windowByID(t, ctx, s, w.ID); got.Repo != "" || got.Dead {
		t.Fatalf("shell window = %+v", got)
	}

	if _, err := s.NewWindow(ctx, "no such session", "x", "r", "", nil, nil); !errs.Is(err, errs.NotFound) {
		t.Fatalf("NewWindow in a missing session: %v", err)
	}
	if _, err := s.NewWindow(ctx, "work", "x", "r", filepath.Join(t.TempDir(), "missing"), nil, nil); !errs.Is(err, errs.NotFound) {
		t.Fatalf("NewWindow in a missing dir: %v", err)
	}
}

func TestSnapshot(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	w, err := s.NewWindow(ctx, "work", "snap", "snap repo", "", []string{"sleep", "60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, wins, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := s.PID(ctx); pid != want {
		t.Errorf("snapshot pid %d, want %d", pid, want)
	}
	found := false
	for _, x := range wins {
		if x.PaneID == w.PaneID {
			found = x.Repo == "snap repo" && x.PanePID == w.PanePID && !x.Dead
		}
	}
	if !found || len(wins) != 2 {
		t.Errorf("snapshot windows %+v", wins)
	}
	if _, _, err := unstarted(t).Snapshot(ctx); !errs.Is(err, errs.Unavailable) {
		t.Errorf("snapshot of no server: %v", err)
	}
}

func TestCapture(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	w, err := s.NewWindow(ctx, "work", "cap", "cap", "", []string{"sh", "-c", `printf '\033]2;a title\007line one\nline two'; exec sleep 60`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c Capture
	testutil.WaitFor(t, "the window's text", func() bool {
		c, err = s.Capture(ctx, w.PaneID)
		return err == nil && len(c.Rows) > 1 && c.Rows[1] == "line two"
	})
	if c.Rows[0] != "line one" || c.CursorX != len("line two") || c.CursorY != 1 || !c.CursorVisible || c.AltScreen ||
		c.Width != 200 || c.Title != "a title" {
		t.Errorf("capture %+v", c)
	}
	if _, err := s.Capture(ctx, "%99999"); err == nil {
		t.Error("capture of a missing pane")
	}
}

// A server that stops answering must not hang its callers past their
// deadline: the tmux client hands its pipes to the server, so killing the
// client alone would leave the call waiting on them forever.
func TestAHungServerTimesOut(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	s := private(t)
	pid, err := s.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	done := make(chan error, 1)
	go func() {
		askCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, _, err := s.Snapshot(askCtx)
		done <- err
	}()
	select {
	case err := <-done:
		if !errs.Is(err, errs.Timeout) {
			t.Errorf("snapshot of a hung server: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("snapshot of a hung server did not return")
	}
	syscall.Kill(pid, syscall.SIGCONT)
	if got, err := s.PID(ctx); err != nil || got != pid {
		t.Errorf("after the server resumed: pid %d, %v", got, err)
	}
}

// deadWindow waits for a window's pane to be dead, then briefly for tmux to
// know how its process ended: tmux may mark a pane dead (its terminal
// closed) a moment before it has reaped the process, and tmux 3.3a
// sometimes never learns (DeadStatus stays -1; see ExitOption).
func deadWindow(t *testing.T, ctx context.Context, s Server, id string) Window {
	t.Helper()
	testutil.WaitFor(t, "the pane to be dead", func() bool { return windowByID(t, ctx, s, id).Dead })
	testutil.Within(2*time.Second, func() bool { return windowByID(t, ctx, s, id).DeadStatus != -1 })
	return windowByID(t, ctx, s, id)
}
