package beadscheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Doctor says which bd it found and whether the driver reads it: missing,
// too old (the proxy's @latest is 0.22), another 1.x than the one tested,
// the one tested. bd's answers to `version` and `list` are scripted here:
// the real bd runs in make test-trackers.
func TestVersionAndDatabases(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "alpha")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(repo, ".beads"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "repos.csv"), []byte(testutil.GitaRow(repo, "alpha")), 0o600); err != nil {
		t.Fatal(err)
	}
	bd := func(version string) string {
		path := filepath.Join(root, "bd-"+version)
		script := "#!/bin/sh\ncase \"$1\" in version) echo 'bd version " + version + " (dev)';; list) echo '[]';; esac\n"
		if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		return path
	}
	check := func(command string) []doctor.Check {
		cfg := &config.Loaded{Config: config.Default(), File: "config.toml"}
		cfg.StateHub.Kind, cfg.StateHub.Beads.Command = config.KindBeads, command
		d, err := beads.New(beads.Options{Settings: cfg.StateHub.Beads, Registry: gita.NewReader(root).Load, Home: filepath.Join(root, "home")})
		if err != nil {
			t.Fatal(err)
		}
		return Run(context.Background(), d, cfg)
	}
	for _, c := range []struct {
		command string
		want    doctor.Status
		says    string
	}{
		{filepath.Join(root, "no-such-bd"), doctor.Fail, "cannot be found"},
		{bd("0.22.0"), doctor.Fail, "reads bd 1.x"},
		{bd("1.2.0"), doctor.Warn, "tested with " + beads.TestedVersion},
		{bd(beads.TestedVersion), doctor.OK, "the version the driver is tested with"},
	} {
		got := check(c.command)
		if got[0].Status != c.want || !strings.Contains(got[0].Detail, c.says) {
			t.Errorf("%s: %+v", filepath.Base(c.command), got[0])
		}
	}
	got := check(bd(beads.TestedVersion))
	if len(got) != 2 || got[1].Status != doctor.OK || !strings.Contains(got[1].Detail, "1 database watched") {
		t.Errorf("databases: %+v", got)
	}
	// A database others may write is not trusted.
	os.Chmod(filepath.Join(repo, ".beads"), 0o777)
	got = check(bd(beads.TestedVersion))
	if len(got) != 2 || got[1].Status != doctor.Fail || !strings.Contains(got[1].Detail, "alpha") {
		t.Errorf("a database others may write: %+v", got)
	}
}
