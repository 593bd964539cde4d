package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// mkfile makes path (and its directories) with a line in it.
func mkfile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeUser is a user's environment whose every directory is below root.
func fakeUser(root string) func(string) string {
	vars := map[string]string{
		"HOME":            filepath.Join(root, "home"),
		"XDG_RUNTIME_DIR": filepath.Join(root, "run"),
		"TMPDIR":          filepath.Join(root, "tmp"),
		"TMUX_TMPDIR":     filepath.Join(root, "tmux"),
	}
	return func(k string) string { return vars[k] }
}

// A decoy home the tests left alone passes, whatever else is in it: the go
// command's telemetry, the tests' own tmux servers, git's files.
func TestACleanRunPasses(t *testing.T) {
	decoy, user := t.TempDir(), t.TempDir()
	uid := strconv.Itoa(os.Getuid())
	mkfile(t, filepath.Join(decoy, "config", "go", "telemetry", "local", "upload.token"))
	mkfile(t, filepath.Join(decoy, "tmux", "tmux-"+uid, "tamq-test-1-2"))
	mkfile(t, filepath.Join(decoy, "home", ".gitconfig"))
	// A tamq of the user's keeps writing to its files during the run.
	mkfile(t, filepath.Join(user, "home", ".local", "state", "tamq", "tamq.log"))
	snap := filepath.Join(t.TempDir(), "before")
	if err := snapshot(snap, fakeUser(user)); err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(user, "home", ".local", "state", "tamq", "tamq.log"))
	mkfile(t, filepath.Join(user, "home", ".local", "state", "tamq", "backups", "new"))
	found, err := check(decoy, snap, fakeUser(user))
	if err != nil || len(found) != 0 {
		t.Fatalf("a clean run reported %q %v", found, err)
	}
}

// The guard trips on each place a test might wrongly write: the decoy's
// state, config, cache and runtime directories (a program run with the
// environment of `make test` instead of a private one), its home read
// without XDG_*, the agents' settings, tmux's default socket; and, in the
// user's own directories, on a path of ours that appeared during the run.
func TestTheGuardTrips(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	for _, c := range []struct {
		name, where, path string // where: "decoy" or "user"
	}{
		{"state", "decoy", "state/tamq/tamq.sqlite3"},
		{"engine state", "decoy", "state/coordination-engine/coordination.sqlite3"},
		{"config", "decoy", "config/tamq/config.toml"},
		{"cache", "decoy", "cache/coordination-engine/x"},
		{"socket", "decoy", "run/tamq.sock"},
		{"home without XDG", "decoy", "home/.local/state/tamq/tamq.log"},
		{"agent settings", "decoy", "home/.claude/settings.json"},
		{"tmux default socket", "decoy", "tmux/tmux-" + uid + "/default"},
		{"user's state", "user", "home/.local/state/coordination-engine/coordination-engine.log"},
		{"user's private runtime dir", "user", "tmp/tamq-" + uid + "/tamq.sock"},
		{"user's tmux default socket", "user", "tmux/tmux-" + uid + "/default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			decoy, user := t.TempDir(), t.TempDir()
			snap := filepath.Join(t.TempDir(), "before")
			if err := snapshot(snap, fakeUser(user)); err != nil {
				t.Fatal(err)
			}
			root := map[string]string{"decoy": decoy, "user": user}[c.where]
			mkfile(t, filepath.Join(root, c.path))
			found, err := check(decoy, snap, fakeUser(user))
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || !strings.HasPrefix(c.path, strings.TrimPrefix(strings.Fields(found[0])[0], root+"/")) {
				t.Errorf("%s/%s: found %q", c.where, c.path, found)
			}
		})
	}
}

// The real thing, end to end: the command, run as the Makefile runs it,
// passes a clean decoy, and fails loudly, naming the directory, once tamq
// ran with the decoy's environment and nothing private (as a test that
// forgot testutil.NewEnv would run it).
func TestTheCommandFailsAfterAProgramUsedTheDecoy(t *testing.T) {
	decoy := t.TempDir()
	snap := filepath.Join(t.TempDir(), "before")
	guard := func(args ...string) (string, int) {
		t.Helper()
		// This test binary runs as homeguard (TestMain).
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "HOMEGUARD_MAIN=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, status := guard("snapshot", snap); status != 0 {
		t.Fatalf("snapshot: exit %d\n%s", status, out)
	}
	if out, status := guard("check", decoy, snap); status != 0 {
		t.Fatalf("check of a clean decoy: exit %d\n%s", status, out)
	}
	env := decoyEnv(decoy)
	tamq := func(args ...string) error {
		t.Helper()
		cmd := exec.Command(filepath.Join(testutil.Binaries(t), "tamq"), args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "TMUX_TMPDIR"} {
			cmd.Env = append(cmd.Env, k+"="+env(k))
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("tamq %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := tamq("start", "--detach"); err != nil {
		t.Fatal(err)
	}
	// A failing test must not leave the service running.
	t.Cleanup(func() { tamq("stop") })
	if err := tamq("stop"); err != nil {
		t.Fatal(err)
	}
	out, status := guard("check", decoy, snap)
	for _, want := range []string{filepath.Join(decoy, "state", "tamq"), "homeguard: the tests wrote where they must not"} {
		if status != 1 || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.TrimSpace(l) == want || strings.HasPrefix(l, want) }) {
			t.Errorf("check after tamq used the decoy: exit %d, want 1 and a line %q:\n%s", status, want, out)
		}
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("HOMEGUARD_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	status := m.Run()
	testutil.RemoveBinaries()
	os.Exit(status)
}
