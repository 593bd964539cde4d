package prompt

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The two wakes docs/agents.md shows (section 3) are what Build writes for
// the inputs the page names, after tamq's From:coordination-engine: prefix:
// the page a newcomer reads is the prompt their agent gets.
func TestAgentsDocShowsTheBuiltPrompts(t *testing.T) {
	b, err := os.ReadFile("../../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for i, block := range strings.Split(string(b), "```") {
		if i%2 == 1 && strings.HasPrefix(block, "\nFrom:coordination-engine: coordination-engine wakes") {
			shown = append(shown, strings.TrimPrefix(block, "\n"))
		}
	}
	base := Input{Program: "coordination-engine", LeaseID: "0197d2a4-8c3e-7b1f-9a52-3e6f0c4d2b18", MaxAttempts: 5, Repo: "net-kingdom",
		Trigger: Trigger{Source: "task", SourceID: "T-7", SourceRevision: "r12", Reason: "dependency_satisfied"},
		Task:    &Task{ID: "T-7", Title: "Fix the parser", Workplan: "WP-2"}}
	first := base
	first.Attempt = 1
	second := base
	second.Attempt = 2
	second.Templates = []string{"run `make test` and fix the first failure;", "implement the next item of the open workplan;", "close the session with a checkpoint."}
	second.Checkpoint = &Checkpoint{Summary: "parser rewritten, two tests still fail", NextAction: "fix the escaping tests",
		FilesChanged: []string{"parse.go", "parse_test.go"}, RecordedAt: time.Date(2026, 5, 4, 9, 12, 40, 0, time.UTC)}
	want := []Input{first, second}
	if len(shown) != len(want) {
		t.Fatalf("docs/agents.md shows %d wakes, want %d", len(shown), len(want))
	}
	for i, in := range want {
		if got := "From:coordination-engine: " + Build(in); strings.TrimRight(got, "\n") != strings.TrimRight(shown[i], "\n") {
			t.Errorf("wake %d in docs/agents.md is not what the engine writes; it writes:\n%s\nthe page shows:\n%s", i+1, got, shown[i])
		}
	}
}
