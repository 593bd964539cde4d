package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// scripts/install-deps (issue 40): both modes warn, without failing, when
// the bash-completion package is missing (tamq completion bash needs it) and
// say how to install it; the install mode downloads the Go modules the tests
// need (go mod download), so that no later make reaches the network, while
// --check downloads nothing. go, apt-get and sudo are stand-ins that record
// how they were called: nothing is installed or downloaded.
func TestInstallDeps(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/install-deps")
	if err != nil {
		t.Fatal(err)
	}
	stubs := t.TempDir()
	calls := filepath.Join(stubs, "calls")
	for _, name := range []string{"go", "apt-get", "sudo"} {
		stub := "#!/bin/sh\necho \"" + name + " $*\" >> '" + calls + "'\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	installed := filepath.Join(stubs, "bash_completion")
	if err := os.WriteFile(installed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(bashCompletion string, args ...string) (testutil.Result, string) {
		t.Helper()
		os.Remove(calls)
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"), "BASH_COMPLETION="+bashCompletion)
		r := testutil.RunCmd(t, cmd)
		called, _ := os.ReadFile(calls)
		return r, string(called)
	}

	r, called := run(filepath.Join(stubs, "absent"), "--check")
	for _, want := range []string{
		"install-deps: warning: bash-completion is not installed",
		`every Tab prints "_get_comp_words_by_ref: command not found"`,
		"sudo apt-get install bash-completion",
	} {
		if r.Status != 0 || !strings.Contains(r.Stderr, want) {
			t.Errorf("--check without bash-completion lacks %q: %s", want, r)
		}
	}
	if called != "" {
		t.Errorf("--check ran %q", called)
	}
	if r, called := run(installed, "--check"); r.Status != 0 || r.Stderr != "" || called != "" {
		t.Errorf("--check with everything there: %s\ncalled: %q", r, called)
	}
	r, called = run(installed)
	if r.Status != 0 || called != "go mod download\n" || !strings.Contains(r.Stderr, "downloading the Go modules the build and the tests need") ||
		strings.Contains(r.Stderr, "bash-completion") {
		t.Errorf("install with everything there: %s\ncalled: %q", r, called)
	}
}
