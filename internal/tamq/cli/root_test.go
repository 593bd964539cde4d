package cli

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

func testApp() *app.App {
	return app.NewApp(paths.Tamq, short, store.Migrations)
}

// newRootFor finds a command by the name commands gives it: a name that is
// not the command's own would send that command to the full tree (slower,
// still right), or another command's build to it.
func TestCommandsNamed(t *testing.T) {
	a := testApp()
	seen := map[string]bool{}
	for _, c := range commands {
		if got := c.build(a).Name(); got != c.name {
			t.Errorf("commands names %q a command whose name is %q", c.name, got)
		}
		if seen[c.name] {
			t.Errorf("commands names %q twice", c.name)
		}
		seen[c.name] = true
	}
}

func childNames(t *testing.T, a *app.App, args ...string) []string {
	t.Helper()
	var names []string
	for _, c := range newRootFor(a, args).Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return names
}

// A run of one of tamq's own commands builds that command alone, found as
// cobra finds it (past the root's flags, a flag's value included); anything
// else gets every command, as NewRoot builds them.
func TestNewRootForBuildsWhatArgsRun(t *testing.T) {
	a := testApp()
	var all []string
	for _, c := range NewRoot(a).Commands() {
		all = append(all, c.Name())
	}
	slices.Sort(all)
	shared := []string{"config", "db-version", "repos", "version"} // app.NewRoot's
	one := func(name string) []string { return slices.Sorted(slices.Values(append(slices.Clone(shared), name))) }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ping", "--quiet"}, one("ping")},
		{[]string{"--json", "-q", "send", "To:r: hi"}, one("send")},
		{[]string{"--command", "send", "ping"}, one("ping")}, // --command takes a value
		{[]string{"broker", "--repo", "r", "--", "ping"}, one("broker")},
		{[]string{"ping", "--help"}, one("ping")},
		{nil, all},
		{[]string{"--help"}, all},
		{[]string{"help", "ping"}, all},
		{[]string{"completion", "bash"}, all},
		{[]string{"__complete", "send", ""}, all},
		{[]string{"net-kingdom"}, all}, // the root form, or a mistyped command
		{[]string{"version"}, all},
	} {
		if got := childNames(t, a, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("newRootFor(%q) has %v, want %v", tc.args, got, tc.want)
		}
	}
}

// The commands a newcomer meets first each show an example in their help, and
// no line of their long help runs past the width the others wrap at.
func TestMainCommandsHaveExamplesAndEvenWrapping(t *testing.T) {
	a := testApp()
	for _, name := range []string{"send", "open", "start", "status", "history", "top", "doctor"} {
		var found bool
		for _, c := range commands {
			if c.name != name {
				continue
			}
			found = true
			cmd := c.build(a)
			if strings.TrimSpace(cmd.Example) == "" {
				t.Errorf("tamq %s has no Example", name)
			}
			for _, line := range strings.Split(cmd.Long, "\n") {
				if n := utf8.RuneCountInString(line); n > helpWidth {
					t.Errorf("tamq %s: a line of its help is %d characters, over %d: %q", name, n, helpWidth, line)
				}
			}
		}
		if !found {
			t.Errorf("no command %q", name)
		}
	}
}

// helpWidth is the width the long help texts are wrapped at.
const helpWidth = 82
