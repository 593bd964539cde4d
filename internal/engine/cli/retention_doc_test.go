package cli_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/engine/cli"
)

// docSection is the text of the "## title" section of a docs page.
func docSection(t *testing.T, page, title string) string {
	t.Helper()
	data, err := os.ReadFile("../../../docs/" + page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/%s has no section %q", page, title)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// operations.md's retention paragraph is where an operator learns what is
// kept: it once said the engine had no purge and kept everything, while the
// engine deletes history past coordination.retention_days by itself. It must
// say so, with the default the engine uses, and its purge examples must be
// commands the program takes.
func TestOperationsDocSaysTheEngineDeletesOldHistory(t *testing.T) {
	section := docSection(t, "operations.md", "Backup and retention")
	for _, wrong := range []string{"has no purge", "coordination-engine keeps every"} {
		if strings.Contains(section, wrong) {
			t.Errorf("docs/operations.md says %q", wrong)
		}
	}
	days := strconv.Itoa(config.Default().Coordination.RetentionDays)
	for _, want := range []string{"`coordination.retention_days` (default " + days, "`coordination-engine\npurge`", "`--yes`", "history.purged"} {
		if !strings.Contains(section, want) {
			t.Errorf("docs/operations.md's Backup and retention does not say %q", want)
		}
	}
	examples := 0
	for _, line := range strings.Split(section, "\n") {
		cmdline, _, _ := strings.Cut(line, "#")
		args := strings.Fields(cmdline)
		if len(args) < 2 || args[0] != "coordination-engine" || args[1] != "purge" {
			continue
		}
		examples++
		root := cli.NewRoot(cli.NewApp())
		cmd, rest, err := root.Find(args[1:])
		if err != nil || cmd.Name() != "purge" {
			t.Fatalf("%q: %v", line, err)
		}
		if err := cmd.ParseFlags(rest); err != nil || cmd.Args(cmd, cmd.Flags().Args()) != nil {
			t.Errorf("%q is not a command coordination-engine takes: %v", line, err)
		}
	}
	if examples == 0 {
		t.Error("docs/operations.md shows no coordination-engine purge example")
	}
}
