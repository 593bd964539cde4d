package cli

import (
	"bytes"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// A workplan's tree: a task under each task it depends on (drawn once, then
// named "shown above"), a cycle drawn rather than lost, the columns lined up.
func TestTaskTreesDrawEachDependencyOnce(t *testing.T) {
	ts := []api.TaskStanding{
		{ID: "A", Repo: "alpha", Workplan: "W-1", Words: "done"},
		{ID: "B", Repo: "beta", Workplan: "W-1", Words: "working: lease L attempt 1"},
		{ID: "C", Repo: "gamma", Workplan: "W-1", DependsOn: []string{"A", "B"}, Words: "waiting: dependency B (todo, beta)"},
		{ID: "X", Repo: "delta", Workplan: "W-2", DependsOn: []string{"Y"}, Words: "waiting: dependency Y (todo, delta)"},
		{ID: "Y", Repo: "delta", Workplan: "W-2", DependsOn: []string{"X"}, Words: "waiting: dependency X (todo, delta)"},
	}
	var b bytes.Buffer
	printTaskTrees(&b, ts)
	want := `workplan W-1
  A     alpha  done
  └─ C  gamma  waiting: dependency B (todo, beta)
  B     beta   working: lease L attempt 1
  └─ C         (shown above)

workplan W-2
  X        delta  waiting: dependency Y (todo, delta)
  └─ Y     delta  waiting: dependency X (todo, delta)
     └─ X         (shown above)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
