package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// kind = "beads" fills [statehub.beads]'s defaults for the engine, so that
// `config show` prints what it uses.
func TestBeadsDefaults(t *testing.T) {
	content := "[statehub]\nkind = \"beads\"\n"
	l, err := Load(setupFor(t, paths.Engine, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	b := l.StateHub.Beads
	if b.Command != "bd" || !slices.Equal(b.NeedsHumanLabels, []string{"human", "needs-human"}) || b.TimeoutSeconds != 30 {
		t.Errorf("defaults %+v", b)
	}
	out, err := l.TOML(paths.Engine)
	if err != nil || !strings.Contains(string(out), "[statehub.beads]") {
		t.Errorf("config show: %v\n%s", err, out)
	}
}

func TestBeadsValidation(t *testing.T) {
	for name, c := range map[string]struct{ content, key string }{
		"section without kind": {"[statehub.beads]\ncommand = \"bd\"\n", "statehub.beads"},
		"github's section":     {"[statehub]\nkind = \"beads\"\n[statehub.github]\nlabel = \"x\"\n", "statehub.github"},
		"arguments":            {"[statehub]\nkind = \"beads\"\n[statehub.beads]\ncommand = \"bd --db x\"\n", "statehub.beads.command"},
		"a relative path":      {"[statehub]\nkind = \"beads\"\n[statehub.beads]\ncommand = \"bin/bd\"\n", "statehub.beads.command"},
		"a timeout":            {"[statehub]\nkind = \"beads\"\n[statehub.beads]\ntimeout_seconds = 900\n", "statehub.beads.timeout_seconds"},
		"one label, two gates": {"[statehub]\nkind = \"beads\"\n[statehub.beads]\nsecrets_required_labels = [\"Human\"]\n", "statehub.beads"},
		"a control character":  {"[statehub]\nkind = \"beads\"\n[statehub.beads]\ndestructive_labels = [\"a\\u001b[31m\"]\n", "statehub.beads.destructive_labels"},
	} {
		t.Run(name, func(t *testing.T) {
			content := c.content
			_, err := Load(setupFor(t, paths.Engine, &content, nil))
			if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), c.key) {
				t.Errorf("%q: %v, want a config error naming %s", content, err, c.key)
			}
		})
	}
	ok := "[statehub]\nkind = \"beads\"\n[statehub.beads]\ncommand = \"/opt/bd/bin/bd\"\n"
	if _, err := Load(setupFor(t, paths.Engine, &ok, nil)); err != nil {
		t.Errorf("an absolute command: %v", err)
	}
}
