package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeInstallDir is where `make install` puts the programs for the user
// whose home is home: the GOBIN of the install recipe, as make prints it
// without running it.
func makeInstallDir(t *testing.T, home string) string {
	t.Helper()
	cmd := exec.Command("make", "-n", "-s", "-C", root, "install")
	// Only HOME decides the default; a PREFIX or GOBIN of the caller's
	// environment must not.
	cmd.Env = append(filterEnv(os.Environ(), "HOME", "PREFIX", "GOBIN", "MAKEFLAGS", "MFLAGS"), "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n install: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`GOBIN="?([^"\s]+)"?\s.*\sinstall\s`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("make install does not set GOBIN for go install:\n%s", out)
	}
	return m[1]
}

func filterEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+name+" ") {
			out = append(out, kv)
		}
	}
	return out
}

// The README installs with `make install` and contrib/systemd's units run
// the programs from a fixed path: the two once disagreed (GOPATH/bin against
// ~/.local/bin), and units copied as documented failed with "No such file".
// Every unit's ExecStart, and the first entry of its PATH, must be the
// directory `make install` fills, and the README must name it.
func TestMakeInstallPutsTheProgramsWhereTheUnitsRunThem(t *testing.T) {
	home := "/home/someone"
	dir := makeInstallDir(t, home)
	if dir != home+"/.local/bin" {
		t.Errorf("make install puts the programs in %s, not ~/.local/bin", dir)
	}
	units, err := filepath.Glob(filepath.Join(root, "contrib", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in contrib/systemd: %v", err)
	}
	for _, unit := range units {
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		prog := strings.TrimSuffix(filepath.Base(unit), ".service")
		var execStart, path string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				execStart = strings.ReplaceAll(strings.Fields(v)[0], "%h", home)
			}
			if v, ok := strings.CutPrefix(line, "Environment=PATH="); ok {
				path = strings.ReplaceAll(strings.Split(v, ":")[0], "%h", home)
			}
		}
		if execStart != filepath.Join(dir, prog) {
			t.Errorf("%s runs %q; make install puts %s in %s", filepath.Base(unit), execStart, prog, dir)
		}
		if path != dir {
			t.Errorf("%s's PATH starts with %q, not %s where make install puts the programs", filepath.Base(unit), path, dir)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make install .*~/\.local/bin`).Match(readme) {
		t.Error("README.md's `make install` line does not say the programs go to ~/.local/bin")
	}
}
