package paths

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestResolveDefaults(t *testing.T) {
	p, err := Resolve(Tamq, env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Paths{
		Program:    Tamq,
		ConfigFile: "/home/u/.config/tamq/config.toml",
		StateDir:   "/home/u/.local/state/tamq",
		Database:   "/home/u/.local/state/tamq/tamq.sqlite3",
		LogFile:    "/home/u/.local/state/tamq/tamq.log",
		BackupDir:  "/home/u/.local/state/tamq/backups",
		LockFile:   "/home/u/.local/state/tamq/tamq.lock",

		StartLockFile: "/home/u/.local/state/tamq/start.lock",
		OpenLockFile:  "/home/u/.local/state/tamq/open.lock",
		OrwellLog:     "/home/u/.local/state/tamq/orwell.log",
		// No XDG_RUNTIME_DIR: a private directory of the user's own.
		Socket:     fmt.Sprintf("/tmp/tamq-%d/tamq.sock", os.Getuid()),
		TamqSocket: fmt.Sprintf("/tmp/tamq-%d/tamq.sock", os.Getuid()),
		PrivateDir: fmt.Sprintf("/tmp/tamq-%d", os.Getuid()),

		StateHubSocket: fmt.Sprintf("/tmp/tamq-%d/statehub.sock", os.Getuid()),

		PolicyProfileVar: "TAMQ_POLICY_PROFILE",
	}
	if p != want {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
}

func TestResolveXDG(t *testing.T) {
	e := env(map[string]string{
		"HOME": "/home/u", "XDG_CONFIG_HOME": "/x/cfg", "XDG_STATE_HOME": "/x/state", "XDG_RUNTIME_DIR": "/run/user/7",
	})
	p, err := Resolve(Engine, e)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string][2]string{
		"config":      {p.ConfigFile, "/x/cfg/coordination-engine/config.toml"},
		"database":    {p.Database, "/x/state/coordination-engine/coordination.sqlite3"},
		"socket":      {p.Socket, "/run/user/7/coordination-engine.sock"},
		"tamq socket": {p.TamqSocket, "/run/user/7/tamq.sock"},
		"statehub":    {p.StateHubSocket, "/run/user/7/statehub.sock"},
		"log":         {p.LogFile, "/x/state/coordination-engine/coordination-engine.log"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
}

// Without XDG_RUNTIME_DIR both programs share one private directory under
// $TMPDIR, so the engine still finds tamq's socket.
func TestPrivateRuntimeDir(t *testing.T) {
	vars := map[string]string{"HOME": "/home/u", "TMPDIR": "/var/tmp/"}
	e, err := Resolve(Engine, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/var/tmp/tamq-%d", os.Getuid())
	if e.PrivateDir != dir || e.Socket != dir+"/coordination-engine.sock" || e.TamqSocket != dir+"/tamq.sock" {
		t.Errorf("engine paths %+v", e)
	}
	if !e.SocketDirPrivate(e.TamqSocket) || e.SocketDirPrivate("/elsewhere/tamq.sock") {
		t.Error("SocketDirPrivate")
	}
	vars["TMPDIR"] = "relative"
	if e, _ := Resolve(Tamq, env(vars)); e.PrivateDir != fmt.Sprintf("/tmp/tamq-%d", os.Getuid()) {
		t.Errorf("a relative TMPDIR was not ignored: %q", e.PrivateDir)
	}
	vars["XDG_RUNTIME_DIR"] = "/run/user/7"
	if e, _ := Resolve(Tamq, env(vars)); e.PrivateDir != "" || e.SocketDirPrivate(e.Socket) {
		t.Errorf("private dir with XDG_RUNTIME_DIR set: %q", e.PrivateDir)
	}
}

func TestResolveRelativeXDGIsIgnored(t *testing.T) {
	p, err := Resolve(Tamq, env(map[string]string{
		"HOME": "/home/u", "XDG_CONFIG_HOME": "rel/cfg", "XDG_STATE_HOME": "rel", "XDG_RUNTIME_DIR": "run",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if p.ConfigFile != "/home/u/.config/tamq/config.toml" || p.StateDir != "/home/u/.local/state/tamq" ||
		p.Socket != fmt.Sprintf("/tmp/tamq-%d/tamq.sock", os.Getuid()) {
		t.Errorf("relative XDG values were not ignored: %+v", p)
	}
}

func TestResolveOverrides(t *testing.T) {
	tests := []struct {
		program Program
		vars    map[string]string
		check   func(Paths) bool
	}{
		{Tamq, map[string]string{"TAMQ_CONFIG": "/c/t.toml"}, func(p Paths) bool {
			return p.ConfigFile == "/c/t.toml" && p.ConfigVar == "TAMQ_CONFIG"
		}},
		{Tamq, map[string]string{"TAMQ_STATE_DIR": "/s"}, func(p Paths) bool {
			return p.StateDir == "/s" && p.Database == "/s/tamq.sqlite3" && p.BackupDir == "/s/backups"
		}},
		{Tamq, map[string]string{"TAMQ_SOCKET": "/r/q.sock"}, func(p Paths) bool {
			return p.Socket == "/r/q.sock" && p.TamqSocket == "/r/q.sock"
		}},
		{Tamq, map[string]string{"TAMQ_POLICY_PROFILE": "strict"}, func(p Paths) bool { return p.PolicyProfile == "strict" }},
		{Tamq, map[string]string{"STATEHUB_API_BASE": "http://hub:9"}, func(p Paths) bool { return p.StateHubAPIBase == "http://hub:9" }},
		{Tamq, map[string]string{"COORDINATION_ENGINE_STATE_DIR": "/other"}, func(p Paths) bool {
			return p.StateDir == "/home/u/.local/state/tamq"
		}},
		{Engine, map[string]string{"COORDINATION_ENGINE_CONFIG": "/c/e.toml"}, func(p Paths) bool {
			return p.ConfigFile == "/c/e.toml" && p.ConfigVar == "COORDINATION_ENGINE_CONFIG"
		}},
		{Engine, map[string]string{"COORDINATION_ENGINE_STATE_DIR": "/e"}, func(p Paths) bool {
			return p.Database == "/e/coordination.sqlite3"
		}},
		{Engine, map[string]string{"COORDINATION_ENGINE_SOCKET": "/r/ce.sock", "TAMQ_SOCKET": "/r/t.sock"}, func(p Paths) bool {
			return p.Socket == "/r/ce.sock" && p.TamqSocket == "/r/t.sock"
		}},
		{Engine, map[string]string{"COORDINATION_ENGINE_POLICY_PROFILE": "p2", "TAMQ_POLICY_PROFILE": "no"}, func(p Paths) bool {
			return p.PolicyProfile == "p2" && p.PolicyProfileVar == "COORDINATION_ENGINE_POLICY_PROFILE"
		}},
	}
	for _, tt := range tests {
		tt.vars["HOME"] = "/home/u"
		p, err := Resolve(tt.program, env(tt.vars))
		if err != nil {
			t.Fatal(err)
		}
		if !tt.check(p) {
			t.Errorf("%s with %v: unexpected %+v", tt.program, tt.vars, p)
		}
	}
}

func TestResolveRelativeOverrideIsMadeAbsolute(t *testing.T) {
	p, err := Resolve(Tamq, env(map[string]string{"HOME": "/h", "TAMQ_STATE_DIR": "st"}))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if p.StateDir != filepath.Join(wd, "st") {
		t.Errorf("StateDir = %q", p.StateDir)
	}
}

func TestResolveWithoutHome(t *testing.T) {
	_, err := Resolve(Tamq, env(nil))
	if !errs.Is(err, errs.ConfigInvalid) {
		t.Fatalf("err = %v, want config_invalid", err)
	}
	// With every directory given absolutely, HOME is not needed.
	_, err = Resolve(Tamq, env(map[string]string{"XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"}))
	if err != nil {
		t.Fatal(err)
	}
}

func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	if err := EnsurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("mode = %v, want 0700", fi.Mode().Perm())
	}
	// An existing directory keeps the mode its owner chose.
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o750 {
		t.Errorf("existing dir mode changed to %v", fi.Mode().Perm())
	}
	// A file where the directory should be is a storage error naming it.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(file, "sub")} {
		err := EnsurePrivateDir(p)
		if !errs.Is(err, errs.Storage) {
			t.Errorf("EnsurePrivateDir(%s) = %v, want storage_error", p, err)
		}
	}
}
