package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/paths"
)

// logHelperVar makes the test binary the detached daemon of
// TestDetachedDaemonLogIsRotatedAndFollowed.
const logHelperVar = "TAMQ_TEST_DAEMON_LOG_HELPER"

// stderrLine is what the helper daemon writes to its stderr, as a crash
// trace would be, after its log was rotated.
const stderrLine = "written to stderr after the rotations"

// Security issue 37 (low): a detached daemon's log file is rotated at
// log.max_size_mb, the old files beyond log.max_files deleted, all 0600;
// what the process writes to stderr itself (a crash trace) follows the
// rotation into the current file; a warning repeated within the window is
// written once, and its count when the daemon stops. The daemon is this
// test binary run again, detached as the launcher runs one: its stdout and
// stderr on the log file, its readiness on descriptor 3.
func TestDetachedDaemonLogIsRotatedAndFollowed(t *testing.T) {
	if os.Getenv(logHelperVar) == "1" {
		logHelper()
		return
	}
	root := t.TempDir()
	env := map[string]string{"HOME": root, "XDG_CONFIG_HOME": filepath.Join(root, "config"),
		"XDG_STATE_HOME": filepath.Join(root, "state"), "XDG_RUNTIME_DIR": filepath.Join(root, "run")}
	if err := os.Mkdir(env["XDG_RUNTIME_DIR"], 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := paths.Resolve(paths.Engine, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Dir(p.ConfigFile), p.StateDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p.ConfigFile, []byte("[log]\nmax_size_mb = 1\nmax_files = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(p.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ready, notify, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDetachedDaemonLogIsRotatedAndFollowed$")
	cmd.Env = []string{logHelperVar + "=1", "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = logf, logf, []*os.File{notify}
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(p.LogFile)
		t.Fatalf("the daemon: %v\n%.2000s", err, b)
	}
	notify.Close()
	if said, _ := io.ReadAll(ready); string(said) != "ready\n" {
		t.Errorf("the daemon said %q on its readiness descriptor", said)
	}

	cur, err := os.ReadFile(p.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cur), stderrLine) {
		t.Errorf("what the daemon wrote to stderr is not in the current log file:\n%s", cur[max(0, len(cur)-2000):])
	}
	if n := strings.Count(string(cur), "State Hub is not reachable"); n != 2 ||
		!strings.Contains(string(cur), `msg="State Hub is not reachable (repeated 499 times in the last `) {
		t.Errorf("the repeated warning is in the log %d times, without its count:\n%s", n, cur[max(0, len(cur)-2000):])
	}
	olds, _ := filepath.Glob(p.LogFile + ".*")
	if want := []string{p.LogFile + ".1", p.LogFile + ".2"}; strings.Join(olds, " ") != strings.Join(want, " ") {
		t.Errorf("old files %v of 3.3 MiB written, rotated at 1 MiB, 2 to keep; want %v", olds, want)
	}
	for _, f := range append(olds, p.LogFile) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() > 1<<20 {
			t.Errorf("%s: mode %v, %d bytes", filepath.Base(f), fi.Mode().Perm(), fi.Size())
		}
	}
}

// logHelper is the daemon of the test above: it logs 3.3 MiB of distinct
// warnings, then one warning 500 times, then writes to stderr itself.
func logHelper() {
	a := NewApp(paths.Engine, "test", nil)
	err := a.Serve(context.Background(), ServeFlags{NotifyFD: 3}, func(d Daemon) (Runner, error) {
		return runFunc(func(context.Context) error {
			log := a.Logger()
			pad := strings.Repeat("x", 1000)
			for i := range 3000 {
				log.Warn("cannot deliver", "message", fmt.Sprint(i), "pad", pad)
			}
			for i := range 500 {
				log.Warn("State Hub is not reachable", "error", fmt.Sprint("attempt ", i))
			}
			fmt.Fprintln(os.Stderr, stderrLine)
			return nil
		}), nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }
