//go:build trackers

package service_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The steps of docs/trackers.md, "beads, from zero", followed as written
// against the real bd (TAMQ_TEST_BD, on PATH as `bd`): the config blocks go
// into the files they name, `cd ~/src/REPO` goes to the repo gita
// registered, every other command runs as written. The agent is the
// scripted one rather than claude, in a private tmux server; `beta-xxx` and
// `alpha-xxx` are the ids the `bd create` before them printed. The issue
// the docs file in alpha is taken and closed by alpha's agent through the
// engine, and beta's issue, linked to it, is a task that waits for it.
func TestBeadsDocRunsAsWritten(t *testing.T) {
	t.Parallel()
	steps := docSteps(t, "../../../docs/trackers.md", "## beads, from zero")
	if len(steps) < 6 {
		t.Fatalf("the doc's steps are not where this test looks: %d", len(steps))
	}
	p := newBeadsPeople(t)
	e := testutil.NewEnv(t)
	repos := e.Gita(t, "alpha", "beta")
	bin := filepath.Join(e.Root, "bd-bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p.bd, filepath.Join(bin, "bd")); err != nil {
		t.Fatal(err)
	}
	for i, kv := range e.Vars {
		if strings.HasPrefix(kv, "PATH=") {
			e.Vars[i] = "PATH=" + e.Bin + ":" + bin + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	tm := testutil.NewTmux(t)
	log := filepath.Join(e.Root, "agent.log")
	agent := "env SCRIPTED_AGENT_LOG='" + log + "' SCRIPTED_AGENT_PUBLISH=1 " + filepath.Join(e.Bin, "scriptedagent")
	t.Cleanup(func() {
		e.Run(t, "tamq", "stop")
		e.Run(t, "coordination-engine", "stop")
	})
	dir := repos["alpha"]
	made := map[string]string{} // repo → the id its last bd create printed
	idOf := regexp.MustCompile(`(alpha|beta)-xxx`)
	bd := func(args ...string) string {
		t.Helper()
		args = slices.Clone(args)
		for i, a := range args {
			args[i] = idOf.ReplaceAllStringFunc(a, func(m string) string { return made[strings.TrimSuffix(m, "-xxx")] })
		}
		if args[0] == "create" {
			args = append(args, "--json")
		}
		out := string(p.run(t, dir, args...))
		if args[0] == "create" {
			var is struct{ ID string }
			if err := json.Unmarshal([]byte(out), &is); err != nil || is.ID == "" {
				t.Fatalf("bd create printed %q: %v", out, err)
			}
			made[filepath.Base(dir)] = is.ID
		}
		return out
	}
	for _, step := range steps {
		lang, body := step[0], step[1]
		if lang == "toml" {
			writeDocConfig(t, e, body)
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			for _, cmd := range strings.Split(line, " && ") {
				args := shellWords(t, cmd)
				switch {
				case len(args) == 0:
				case args[0] == "cd":
					repo, ok := strings.CutPrefix(args[1], "~/src/")
					if !ok || repos[repo] == "" {
						t.Fatalf("cd %s: not a registered repo", args[1])
					}
					dir = repos[repo]
				case args[0] == "bd" && args[1] == "init":
					bd("init", "--quiet", "--non-interactive") // as a person answers its questions
				case args[0] == "bd":
					bd(args[1:]...)
				case args[0] == "tamq" && args[1] == "open":
					openDocAgent(t, e, tm, args, agent, log)
				default:
					r := e.Run(t, args[0], args[1:]...)
					if r.Status != 0 {
						t.Fatalf("%s: %s", line, r)
					}
					if cmd == "coordination-engine doctor" && (!strings.Contains(r.Stdout, "beads-repos") || !strings.Contains(r.Stdout, "bd "+beads.TestedVersion)) {
						t.Errorf("doctor did not check beads:\n%s", r.Stdout)
					}
				}
			}
		}
	}
	// The parser issue the docs filed in alpha: its agent took it and
	// closed it through the engine.
	alpha := made["alpha"]
	testutil.WaitFor(t, "alpha's agent to close "+alpha, func() bool {
		var list []struct{ Status string }
		out, err := p.command(repos["alpha"], "list", "--json", "--all", "--limit", "0", "--id", alpha).Output()
		return err == nil && json.Unmarshal(out, &list) == nil && len(list) == 1 && list[0].Status == "closed"
	})
	// beta's issue is a task that waits for it, linked as the docs say.
	beta := beads.TaskID("beta", made["beta"])
	testutil.WaitFor(t, "beta's task on the board, waiting for alpha's", func() bool {
		// Until the engine has seen the task, explain says it has no such
		// task (exit 12).
		r := e.Run(t, "coordination-engine", "explain", beta)
		return r.Status == 0 && strings.Contains(r.Stdout, beads.TaskID("alpha", alpha))
	})
}
