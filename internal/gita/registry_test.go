package gita

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

func testRegistry(slugs ...string) *Registry {
	reg := &Registry{Dir: "/x/gita", ReposFile: "/x/gita/repos.csv", GroupsFile: "/x/gita/groups.csv"}
	for _, s := range slugs {
		reg.Repos = append(reg.Repos, Repo{Name: s, Path: "/src/" + s})
	}
	return reg
}

func TestNear(t *testing.T) {
	t.Parallel()
	reg := testRegistry("net-kingdom", "railiance-platform", "Net-Tools", "with space,comma", "api", "apx")
	tests := []struct {
		slug string
		max  int
		want []string
	}{
		{"Net-Kingdom", 3, []string{"net-kingdom"}},
		{"NET-TOOLS", 3, []string{"Net-Tools"}},
		{"net", 3, []string{"Net-Tools", "net-kingdom"}},
		{"net-kingdon", 3, []string{"net-kingdom"}},
		{"net-kigndom", 3, []string{"net-kingdom"}},
		{"railiance", 3, []string{"railiance-platform"}},
		{"platform", 3, []string{"railiance-platform"}},
		{"with space", 3, []string{"with space,comma"}},
		{"apy", 3, []string{"api", "apx"}},
		{"ap", 1, []string{"api"}},
		{"zzz", 3, nil},
		{"", 3, nil},
		{"x", 3, nil}, // too short to suggest "apx" just for containing it
		{"net", 0, nil},
	}
	for _, tt := range tests {
		if got := reg.Near(tt.slug, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("Near(%q, %d) = %q, want %q", tt.slug, tt.max, got, tt.want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	reg := testRegistry("net-kingdom", "api", "apx", "with space,comma")
	reg.Unregistered = []Unregistered{{Repo: Repo{Name: "gone", Path: "/src/gone"}, Line: 4, Reason: "path does not exist"}}
	many := testRegistry("net-a", "net-b", "net-c", "net-d")

	if repo, err := reg.Resolve("with space,comma"); err != nil || repo.Path != "/src/with space,comma" {
		t.Fatalf("Resolve(registered) = %+v, %v", repo, err)
	}
	tests := []struct {
		reg      *Registry
		slug     string
		want     string
		wantHint string
	}{
		{reg, "zzz", "unknown target 'zzz': not in the gita registry (see `gita ls`)", "gita add"},
		{reg, "net-kingdon", "unknown target 'net-kingdon': not in the gita registry (see `gita ls`); did you mean 'net-kingdom'?", "gita add"},
		{reg, "NET-KINGDOM", "unknown target 'NET-KINGDOM': not in the gita registry (see `gita ls`); did you mean 'net-kingdom'?", "gita add"},
		{reg, "ap", "unknown target 'ap': not in the gita registry (see `gita ls`); did you mean 'api' or 'apx'?", "gita add"},
		{many, "net", "unknown target 'net': not in the gita registry (see `gita ls`); did you mean 'net-a', 'net-b' or 'net-c'?", "gita add"},
		{reg, "gone", "unknown target 'gone': its gita registry entry points to /src/gone, which is not a git repository (path does not exist)",
			"line 4 of /x/gita/repos.csv"},
	}
	for _, tt := range tests {
		_, err := tt.reg.Resolve(tt.slug)
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.UnknownTarget || e.Message != tt.want {
			t.Errorf("Resolve(%q) error\n got %q (%s)\nwant %q", tt.slug, err, errs.CodeOf(err), tt.want)
			continue
		}
		if !strings.Contains(e.Hint, tt.wantHint) {
			t.Errorf("Resolve(%q) hint %q should mention %q", tt.slug, e.Hint, tt.wantHint)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "abc", 0}, {"abc", "abd", 1},
		{"abc", "acb", 1}, {"kitten", "sitting", 3}, {"héllo", "hello", 1},
	}
	for _, tt := range tests {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
