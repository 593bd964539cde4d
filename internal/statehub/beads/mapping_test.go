package beads

import (
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
)

func settings() config.Beads {
	return config.Beads{NeedsHumanLabels: config.DefaultBeadsNeedsHuman, SecretsRequiredLabels: config.DefaultBeadsSecrets,
		DestructiveLabels: config.DefaultBeadsDestructive}
}

// The mapping as docs/trackers.md tables it; bd's JSON as bd 1.1.2 prints
// it (`bd list --json --all`).
func TestMapping(t *testing.T) {
	owners := map[string]string{"alpha-a1": "alpha", "beta-b2": "beta"}
	owner := func(id string) string { return owners[id] }
	is := issue{ID: "alpha-x9", Title: "Do it", Status: "open", Priority: 1, Labels: []string{"Human", "destructive", "area:api"},
		Dependencies: []dependency{
			{IssueID: "alpha-x9", DependsOnID: "alpha-a1", Type: "blocks"},
			{IssueID: "alpha-x9", DependsOnID: "beta-b2", Type: "waits-for"},              // another database's id, held by beta
			{IssueID: "alpha-x9", DependsOnID: "external:gamma:gamma-c3", Type: "blocks"}, // bd's external link
			{IssueID: "alpha-x9", DependsOnID: "alpha-parent", Type: "parent-child"},      // structure, not a wait
			{IssueID: "alpha-x9", DependsOnID: "alpha-r", Type: "related"},
			{IssueID: "alpha-x9", DependsOnID: "alpha-c", Type: "conditional-blocks"},
			{IssueID: "alpha-x9", DependsOnID: "--force", Type: "blocks"}, // not an id bd makes
			{IssueID: "alpha-other", DependsOnID: "alpha-a1", Type: "blocks"},
		}}
	got := task(is, "alpha", owner, settings())
	want := []string{"alpha/alpha-a1", "beta/beta-b2", "gamma/gamma-c3"}
	switch {
	case got.ID != "alpha/alpha-x9" || got.Repo != "alpha" || got.Title != "Do it" || got.Status != "todo" || got.Priority != 1:
		t.Errorf("task %+v", got)
	case !slices.Equal(got.DependsOn, want):
		t.Errorf("depends on %v, want %v", got.DependsOn, want)
	case !got.NeedsHuman || got.SecretsRequired || len(got.ProposedActions) != 1 || got.ProposedActions[0].Category != "destructive":
		t.Errorf("gates %+v", got)
	}
	for bd, want := range map[string]string{"open": "todo", "in_progress": "in_progress", "hooked": "in_progress", "blocked": "blocked",
		"closed": "done", "deferred": "cancelled", "pinned": "cancelled", "tombstone": "cancelled"} {
		if s := status(bd); s != want {
			t.Errorf("bd status %s is %s, want %s", bd, s, want)
		}
	}
}

// The revision moves with what the engine reads, and only with that.
func TestRevision(t *testing.T) {
	base := issue{ID: "a-1", Title: "T", Status: "open", Priority: 2}
	none := func(string) string { return "" }
	rev := func(is issue) string { return task(is, "alpha", none, settings()).Revision }
	r0 := rev(base)
	for name, change := range map[string]func(*issue){
		"title":      func(is *issue) { is.Title = "U" },
		"status":     func(is *issue) { is.Status = "in_progress" },
		"priority":   func(is *issue) { is.Priority = 0 },
		"a label":    func(is *issue) { is.Labels = []string{"human"} },
		"dependency": func(is *issue) { is.Dependencies = []dependency{{IssueID: "a-1", DependsOnID: "a-2", Type: "blocks"}} },
	} {
		is := base
		change(&is)
		if rev(is) == r0 {
			t.Errorf("%s changed, the revision did not", name)
		}
	}
	is := base
	is.Description = "a new description"
	is.Dependencies = []dependency{{IssueID: "a-1", DependsOnID: "a-p", Type: "parent-child"}}
	if rev(is) != r0 {
		t.Error("the description or a parent changed the revision: an edit that wakes nobody")
	}
	if !strings.HasPrefix(r0, "bd-") {
		t.Errorf("revision %q", r0)
	}
}

func TestTaskIDs(t *testing.T) {
	if slug, id, err := ParseTaskID("alpha/alpha-x9.1"); err != nil || slug != "alpha" || id != "alpha-x9.1" {
		t.Errorf("%q %q %v", slug, id, err)
	}
	for _, bad := range []string{"alpha", "alpha/", "/a-1", "alpha/--force", "alpha/a 1", "alpha/a;rm", "al\x1bpha/a-1", "alpha/" + strings.Repeat("a", 101)} {
		if _, _, err := ParseTaskID(bad); !errs.Is(err, errs.BadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for out, want := range map[string]string{"bd version 1.1.2 (dev)\n": "1.1.2", "bd version v0.22.0\n": "0.22.0"} {
		if v, err := parseVersion(out); err != nil || v != want {
			t.Errorf("%q: %q %v", out, v, err)
		}
	}
	if _, err := parseVersion("bd: unknown command"); err == nil {
		t.Error("no version read as one")
	}
	if !Supported("1.1.2") || Supported("0.22.0") {
		t.Error("supported versions")
	}
}
