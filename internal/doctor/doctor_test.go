package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestTmuxVersion(t *testing.T) {
	tests := []struct {
		out, version     string
		supported, known bool
	}{
		{"tmux 3.3a\n", "3.3a", true, true},
		{"tmux 3.2\n", "3.2", true, true},
		{"tmux 3.2a", "3.2a", true, true},
		{"tmux 3.1c\n", "3.1c", false, true},
		{"tmux 2.9", "2.9", false, true},
		{"tmux 10.0", "10.0", true, true},
		{"tmux next-3.6\n", "next-3.6", true, true},
		{"tmux master\n", "master", true, true},
		{"tmux openbsd-7.4\n", "openbsd-7.4", false, false},
		{"tmux 3", "3", false, false},
		{"", "", false, false},
		{"screen 4.9", "", false, false},
	}
	for _, tt := range tests {
		version, supported, known := TmuxVersion(tt.out)
		if version != tt.version || supported != tt.supported || known != tt.known {
			t.Errorf("TmuxVersion(%q) = %q, %v, %v; want %q, %v, %v", tt.out, version, supported, known, tt.version, tt.supported, tt.known)
		}
	}
}

// The clock fails when it reads more than a minute before the newest
// recorded time or the build's commit time; within the minute it is a step
// of the clock, not a wrong one.
func TestClock(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name          string
		newest, built time.Time
		want          Status
		detail        string
	}{
		{"nothing recorded, no build time", time.Time{}, time.Time{}, OK, "nothing recorded yet"},
		{"newest in the past", now.Add(-time.Hour), now.Add(-24 * time.Hour), OK, "not before the newest time"},
		{"newest a few seconds ahead", now.Add(5 * time.Second), time.Time{}, OK, "not before"},
		{"newest exactly a minute ahead", now.Add(time.Minute), time.Time{}, OK, "not before"},
		{"newest more than a minute ahead", now.Add(time.Minute + time.Second), time.Time{}, Fail, "1m1s before the newest time in the database"},
		{"newest a day ahead", now.Add(24 * time.Hour), time.Time{}, Fail, "24h0m0s before the newest time"},
		{"built after now", time.Time{}, now.Add(48 * time.Hour), Fail, "before this build's source was committed"},
		{"built a moment after now", time.Time{}, now.Add(30 * time.Second), OK, "nothing recorded yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Clock(now, tt.newest, tt.built)
			if c.Status != tt.want || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("Clock = %s %q, want %s containing %q", c.Status, c.Detail, tt.want, tt.detail)
			}
			if (c.Status == OK) != (c.Fix == "") {
				t.Errorf("fix %q with status %s", c.Fix, c.Status)
			}
		})
	}
}

func TestDisk(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	tests := []struct {
		name         string
		free, dbSize int64
		want         Status
		detail       string
	}{
		{"plenty", 50 * gib, 10 * mib, OK, "50 GiB free"},
		{"exactly 1 GiB", gib, 0, OK, "1.0 GiB free"},
		{"under 1 GiB", gib - 1, 0, Warn, "under 1.0 GiB"},
		{"under twice the database", 3 * gib, 2 * gib, Warn, "under twice the database"},
		{"twice the database exactly", 4 * gib, 2 * gib, OK, "4.0 GiB free"},
		{"exactly 64 MiB", 64 * mib, 0, Warn, "under 1.0 GiB"},
		{"under 64 MiB", 64*mib - 1, 0, Fail, "about to fail"},
		{"nothing free", 0, 5 * gib, Fail, "about to fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Disk("/state", tt.free, tt.dbSize, "make room")
			if c.Status != tt.want || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("Disk = %s %q, want %s containing %q", c.Status, c.Detail, tt.want, tt.detail)
			}
			if c.Status != OK && c.Fix != "make room" {
				t.Errorf("fix = %q", c.Fix)
			}
		})
	}
}

// DiskAt measures the file system of a directory not made yet through its
// nearest parent, and counts the database with its WAL.
func TestDiskAt(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "x.sqlite3")
	os.WriteFile(db, make([]byte, 3000), 0o600)
	os.WriteFile(db+"-wal", make([]byte, 1096), 0o600)
	c := DiskAt(filepath.Join(dir, "not", "yet"), db, "fix")
	if c.Status == Warn && strings.Contains(c.Detail, "cannot") {
		t.Fatalf("DiskAt: %+v", c)
	}
	if !strings.Contains(c.Detail, "(database 4.0 KiB)") {
		t.Errorf("DiskAt detail = %q, want the database and WAL counted", c.Detail)
	}
}

// The socket and state directory checks on real directories: missing is
// fine (the service makes them), open to others fails with the chmod that
// closes them.
func TestPrivateFiles(t *testing.T) {
	root := t.TempDir()
	p := paths.Paths{Program: paths.Tamq, StateDir: filepath.Join(root, "state"), Socket: filepath.Join(root, "run", "tamq.sock")}
	if c := Socket(p); c.Status != OK {
		t.Errorf("missing socket dir: %+v", c)
	}
	if c := StateDir(p); c.Status != OK {
		t.Errorf("missing state dir: %+v", c)
	}
	for _, d := range []string{p.StateDir, filepath.Dir(p.Socket)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if c := Socket(p); c.Status != OK || !strings.Contains(c.Detail, "no socket") {
		t.Errorf("private socket dir: %+v", c)
	}
	if c := StateDir(p); c.Status != OK {
		t.Errorf("private state dir: %+v", c)
	}
	for _, d := range []string{p.StateDir, filepath.Dir(p.Socket)} {
		if err := os.Chmod(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if c := Socket(p); c.Status != Fail || c.Fix != "chmod 700 "+filepath.Dir(p.Socket) {
		t.Errorf("open socket dir: %+v", c)
	}
	if c := StateDir(p); c.Status != Fail || c.Fix != "chmod 700 "+p.StateDir {
		t.Errorf("open state dir: %+v", c)
	}
	os.Chmod(filepath.Dir(p.Socket), 0o700)
	// A plain file at the socket's path is not the service's socket.
	os.WriteFile(p.Socket, nil, 0o600)
	if c := Socket(p); c.Status != Fail || !strings.Contains(c.Detail, "is not a socket") {
		t.Errorf("file at the socket path: %+v", c)
	}
}

// Repos names each registered repository whose path is gone (fail) apart
// from a directory that is not a git repository (warn).
func TestRepos(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "gita")
	os.Mkdir(dir, 0o700)
	got := map[string]string{}
	var rows string
	for _, name := range []string{"net-kingdom", "railiance", "plain", "file"} {
		got[name] = filepath.Join(root, name)
		if out, err := exec.Command("git", "init", "-q", got[name]).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		rows += testutil.GitaRow(got[name], name)
	}
	if err := os.WriteFile(filepath.Join(dir, gita.ReposFileName), []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func() *gita.Registry {
		t.Helper()
		reg, err := gita.NewReader(dir).Load()
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	if c := Repos(load()); c.Status != OK || c.Detail != "4 repos, each a git repository" {
		t.Errorf("all present: %+v", c)
	}
	os.RemoveAll(filepath.Join(got["plain"], ".git"))
	if c := Repos(load()); c.Status != Warn || !strings.Contains(c.Detail, "plain (") || c.Fix != "make each a git repository again, or remove line 3 of "+filepath.Join(dir, gita.ReposFileName) {
		t.Errorf("not a git repository: %+v", c)
	}
	os.RemoveAll(got["railiance"])
	os.RemoveAll(got["file"])
	os.WriteFile(got["file"], nil, 0o600)
	c := Repos(load())
	if c.Status != Fail || !strings.Contains(c.Detail, "railiance ("+got["railiance"]+" does not exist)") ||
		!strings.Contains(c.Detail, "file ("+got["file"]+" is not a directory)") || strings.Contains(c.Detail, "plain") {
		t.Errorf("gone: %+v", c)
	}
	// Not `gita rm railiance file`, which fails: gita hides a row whose path
	// is gone. The lines to delete are what `tamq open` says too.
	if want := "put each repository back at its path, or remove lines 2 and 4 of " + filepath.Join(dir, gita.ReposFileName); !strings.HasPrefix(c.Fix, want) {
		t.Errorf("gone: fix %q", c.Fix)
	}
}

func TestReport(t *testing.T) {
	r := NewReport([]Check{ok("a", ""), warn("b", "", "x"), fail("c", "", "y"), fail("d", "", "z")})
	if r.OK || strings.Join(r.Names(Fail), ",") != "c,d" || strings.Join(r.Names(Warn), ",") != "b" {
		t.Errorf("report: %+v", r)
	}
	if r := NewReport([]Check{ok("a", ""), warn("b", "", "x")}); !r.OK {
		t.Errorf("warnings alone failed the report: %+v", r)
	}
	if r := NewReport(nil); !r.OK || r.Checks == nil {
		t.Errorf("empty report: %+v", r)
	}
}
