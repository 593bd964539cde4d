//go:build agents

// Built only with the agents tag, which `make test-agents` sets: it runs the
// real Codex that scripts/install-agents puts in TAMQ_TEST_AGENTS.

package agentsetup

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// Codex itself loads tamq's rules file (checking each rule's match example)
// and allows the loop's commands, and nothing else of coordination-engine's:
// not the operator's commands, not a program of that name by an absolute
// path. The file is where tamq agent setup writes it by default, a repo's
// .codex/rules (the same text goes into ~/.codex/rules with --user-wide);
// --rules names it, so this checks the text wherever it is. That Codex
// reads it there, in a trusted repo, is what the real loop's Codex tests
// (internal/engine/service, TestRealLoop…) rely on.
func TestRealAgentsSetupCodexRules(t *testing.T) {
	codex := testutil.AgentBin(t, "codex")
	home := t.TempDir()
	repo := t.TempDir()
	rules := filepath.Join(append([]string{repo}, CodexRepoRules...)...)
	if err := os.MkdirAll(filepath.Dir(rules), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, CodexRulesText(), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(cmd string) string {
		t.Helper()
		c := exec.Command(codex, append([]string{"execpolicy", "check", "--resolve-host-executables", "--rules", rules}, strings.Fields(cmd)...)...)
		c.Env = append(os.Environ(), "HOME="+home, "CODEX_HOME="+filepath.Join(home, ".codex"))
		out, err := c.Output()
		if err != nil {
			t.Fatalf("codex execpolicy check %s: %v\n%s", cmd, err, out)
		}
		var res struct {
			Decision string `json:"decision"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("codex execpolicy check %s: %v\n%s", cmd, err, out)
		}
		return res.Decision
	}
	for _, c := range Commands {
		if d := check(c.Example); d != "allow" {
			t.Errorf("%s: decision %q, want allow", c.Example, d)
		}
	}
	for _, cmd := range []string{"coordination-engine wake net", "coordination-engine stop", "coordination-engine", "coordination-engine lease",
		"/tmp/x/coordination-engine lease ack L --attempt 1"} {
		if d := check(cmd); d != "" {
			t.Errorf("%s: decision %q, want none", cmd, d)
		}
	}
}
