package workspace

import (
	"slices"
	"testing"

	"github.com/tmux-amq/tamq/internal/tmux"
)

// Of the live windows marked for a repo, find keeps the one whose pane runs
// the broker, wherever it is listed; without one, the first. The others,
// and dead ones, are to be unmarked.
func TestFindKeepsTheBrokeredWindow(t *testing.T) {
	hand := tmux.Window{ID: "@1", PanePID: 11, Repo: "alpha"}
	brokered := tmux.Window{ID: "@2", PanePID: 12, Repo: "alpha"}
	other := tmux.Window{ID: "@3", PanePID: 13, Repo: "beta"}
	dead := tmux.Window{ID: "@4", PanePID: 14, Repo: "alpha", Dead: true}
	runsBroker := func(w tmux.Window, repo string) bool { return w.PanePID == 12 && repo == "alpha" }
	none := func(tmux.Window, string) bool { return false }
	ids := func(ws []tmux.Window) (out []string) {
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		ws       []tmux.Window
		brokered func(tmux.Window, string) bool
		want     string
		dups     []string
	}{
		{"hand-made listed first", []tmux.Window{hand, other, brokered, dead}, runsBroker, "@2", []string{"@1", "@4"}},
		{"brokered listed first", []tmux.Window{brokered, hand}, runsBroker, "@2", []string{"@1"}},
		{"no broker anywhere", []tmux.Window{hand, brokered}, none, "@1", []string{"@2"}},
		{"only a dead one", []tmux.Window{dead, other}, runsBroker, "", []string{"@4"}},
	} {
		found, ok, dups := find(c.ws, "alpha", c.brokered)
		if found.ID != c.want || ok != (c.want != "") || !slices.Equal(ids(dups), c.dups) {
			t.Errorf("%s: kept %q (%v), unmarks %v; want %q, %v", c.name, found.ID, ok, ids(dups), c.want, c.dups)
		}
	}
}

func TestIsBroker(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"/usr/bin/tamq", "broker", "--repo", "alpha", "--gita-dir", "/g", "--", "/bin/sh"}, true},
		{[]string{"/home/u/go/bin/tamq", "broker", "--repo=alpha", "--", "codex"}, true},
		{[]string{"/usr/bin/tamq", "broker", "--repo", "beta", "--", "/bin/sh"}, false},
		{[]string{"/usr/bin/tamq", "broker", "--repo=alphabet", "--", "sh"}, false},
		// The agent's own arguments are not the broker's.
		{[]string{"/usr/bin/tamq", "broker", "--gita-dir", "/g", "--", "x", "--repo", "alpha"}, false},
		{[]string{"/usr/bin/tamq", "broker", "--repo"}, false},
		{[]string{"/bin/bash"}, false},
		{[]string{"/usr/bin/other", "broker", "--repo", "alpha"}, false},
	} {
		if got := isBroker(c.argv, "alpha"); got != c.want {
			t.Errorf("isBroker(%q) = %v, want %v", c.argv, got, c.want)
		}
	}
}
