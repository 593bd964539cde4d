package cli

import (
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// What top shows of explain comes from State Hub and the agents: escaped, a
// newline included, so nothing acts in the terminal or poses as a line.
func TestExplainSummaryIsInert(t *testing.T) {
	r := api.ExplainResult{Task: "T-1", Verdict: "not woken: \x1b]0;pwned\x07", Observed: true, Status: "todo", Repo: "beta",
		Workplan: "W-1\nlease L-9: completed", Dependencies: []api.ExplainDep{{ID: "T-0", Status: "done"}}}
	got := explainSummary(r)
	if !textsafe.Inert(got) || strings.Count(got, "\n") != 4 || !strings.Contains(got, `workplan W-1\x0alease L-9`) {
		t.Errorf("explainSummary:\n%s", got)
	}
}
