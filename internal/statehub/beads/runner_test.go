package beads

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// bd sees an environment of its own: its database named, no prompt, its
// usage metrics off (on by default in bd), a private HOME; nothing of the
// engine's own (a token, the user's BD_ settings).
func TestBDRunsWithAnEnvironmentOfItsOwn(t *testing.T) {
	t.Setenv("BD_DISABLE_METRICS", "")
	t.Setenv("BEADS_DOLT_SERVER_HOST", "db.example.com")
	t.Setenv("GITHUB_TOKEN", "ghp_secret")
	dir := t.TempDir()
	script := filepath.Join(dir, "bd")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := &runner{command: script, timeout: 10 * time.Second, home: filepath.Join(dir, "home")}
	out, err := r.run(context.Background(), dir, "list")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, want := range []string{"BD_DISABLE_METRICS=1", "BD_NON_INTERACTIVE=1", "BEADS_DIR=" + filepath.Join(dir, ".beads"), "HOME=" + r.home} {
		if !slices.Contains(env, want) {
			t.Errorf("bd's environment lacks %s: %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GITHUB_TOKEN=") || strings.HasPrefix(kv, "BEADS_DOLT_SERVER_HOST=") {
			t.Errorf("bd got %s", kv)
		}
	}
	if fi, err := os.Stat(r.home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("bd's home: %v %v", fi, err)
	}
	if r.runs.Load() != 1 {
		t.Errorf("runs %d", r.runs.Load())
	}
}

// A bd that runs over its time, or cannot be started, is unavailable; one
// that says an issue is not there, not found.
func TestBDFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		command string
		want    errs.Code
	}{
		{filepath.Join(dir, "missing"), errs.Unavailable},
		{write("slow", "exec sleep 30"), errs.Unavailable},
		{write("nf", "echo 'Error fetching x-1: no issue found matching \"x-1\"' >&2; exit 1"), errs.NotFound},
		{write("blk", "echo 'cannot close x-1: blocked by open issues [x-2]' >&2; exit 1"), errs.Conflict},
		{write("other", "echo \"$(printf 'boom\\033[31m')\" >&2; exit 3"), errs.Internal},
	} {
		r := &runner{command: c.command, timeout: 300 * time.Millisecond, home: filepath.Join(dir, "home")}
		_, err := r.run(context.Background(), dir, "show", "x-1")
		if !errs.Is(err, c.want) || strings.Contains(err.Error(), "\x1b") {
			t.Errorf("%s: %v, want %s", filepath.Base(c.command), err, c.want)
		}
	}
}
