package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// With --keep, once its loop has run its course, the demo leaves it as a
// person finds it on a busy day: every way a task can stand at once, for
// `coordination-engine tasks` and `tamq top` to show (docs/operations.md,
// "Where am I needed?"). Five more repos are registered with gita; four get
// a window whose scripted agent plays one part (agent.go's plans), delta
// gets none.
var keptRepos = append([]string{"delta"}, keptWindows...)

// keptWindows are the kept repos that get a window: all but delta.
var keptWindows = []string{"epsilon", "zeta", "eta", "theta"}

// heldRepos are the repos whose agents work until their hold file is removed.
var heldRepos = []string{"eta", "theta"}

// keptTask is a task of the kept loop's workplan and where the demo leaves
// it: the kind of its standing and words its standing says.
type keptTask struct {
	id, title, repo string
	deps            []string
	secret          bool
	kind, words     string
}

// keptTasks are the kept loop's workplan, what needs a person first, then
// the tasks of the demo's loop that stay where they stopped.
var keptTasks = []keptTask{
	{id: "S", title: "rotate the deploy key", repo: "gamma", secret: true, kind: "needs_you", words: "needs you: secret required"},
	{id: "X", title: "fix the load test", repo: "zeta", kind: "needs_you", words: "needs you: retries exhausted"},
	{id: "Q", title: "upgrade the database driver", repo: "eta", kind: "needs_you", words: "needs you: dialog open in window eta"},
	{id: "W", title: "write the changelog", repo: "theta", kind: "working", words: "working: lease"},
	// epsilon's agent failed and quit: the retry waits for a person to
	// start an agent in its window (nothing else would).
	{id: "R", title: "rerun the flaky migration", repo: "epsilon", kind: "needs_you", words: "needs you: no agent runs in the window of epsilon; start it again"},
	{id: "F", title: "announce the upgrade", repo: "alpha", deps: []string{"Q"}, kind: "waiting", words: "waiting: dependency Q ("},
	{id: "N", title: "tag the nightly build", repo: "delta", kind: "waiting", words: "waiting: no window for repo delta"},
}

// loopTasks are the demo's loop's tasks where the kept loop finds them.
var loopTasks = []keptTask{
	{id: taskHuman, kind: "needs_you", words: "needs you: human gate"},
	{id: taskDestructive, kind: "needs_you", words: "needs you: destructive action proposed"},
	{id: taskA, kind: "done", words: "done"},
	{id: taskB, kind: "done", words: "done"},
}

// holdFile is the file a held repo's agent works while it exists.
func (w workspace) holdFile(repo string) string { return filepath.Join(w.holdDir(), repo) }

// leaveLoop opens the kept windows, seeds the kept workplan, waits until
// every task stands where the demo leaves it, and prints the list.
func (d *demo) leaveLoop(ctx context.Context) error {
	fmt.Fprintf(d.out, "\nThe loop as a person finds it (--keep): every way a task can stand\n")
	for _, r := range heldRepos {
		if err := os.WriteFile(d.holdFile(r), nil, 0o600); err != nil {
			return err
		}
	}
	if _, err := d.openWindows(ctx, keptWindows); err != nil {
		return err
	}
	if err := d.waitBrokersOf(ctx, keptWindows); err != nil {
		return err
	}
	if err := d.waitEngineWindows(ctx, len(repos)+len(keptWindows)); err != nil {
		return err
	}
	d.say("windows    %s: epsilon's agent fails and quits, zeta's fails every attempt, eta's asks for a permission, theta's works while %s exists; delta has no window",
		strings.Join(keptWindows, ", "), d.holdFile("theta"))
	wp := contract.Workplan{ID: "W-keep", Repo: "alpha", Status: "active"}
	for _, k := range keptTasks {
		wp.Tasks = append(wp.Tasks, contract.Task{ID: k.id, Title: k.title, Status: "todo", Repo: k.repo, DependsOn: k.deps, SecretsRequired: k.secret})
	}
	if err := d.hubDo(ctx, http.MethodPut, "/v1/workplans/"+wp.ID, wp, nil); err != nil {
		return err
	}
	d.say("seeded     workplan W-keep: %d tasks across %s", len(keptTasks), strings.Join(append([]string{"alpha", "gamma"}, keptRepos...), ", "))
	if err := d.waitStandings(ctx); err != nil {
		return err
	}
	for _, argv := range [][]string{{"coordination-engine", "tasks"}, {"tamq", "status", "--tmux-line"}} {
		out, err := d.call(ctx, argv[0], argv[1:]...)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "\n$ %s\n%s", strings.Join(argv, " "), out)
	}
	fmt.Fprintln(d.out)
	return nil
}

// waitStandings waits until every task stands where the demo leaves it.
func (d *demo) waitStandings(ctx context.Context) error {
	d.say("waiting    for zeta's retries to run out, epsilon's retry to wait for its window, eta's dialog...")
	want := append(append([]keptTask{}, keptTasks...), loopTasks...)
	last := ""
	for {
		why := d.standingsMissing(ctx, want)
		if why == "" {
			return nil
		}
		if ctx.Err() == nil {
			last = why // not the failure of the call that ran out of time
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("the kept loop did not settle (%s): %w", last, err)
		}
	}
}

// standingsMissing says which task does not stand as wanted yet ("" when
// every one does).
func (d *demo) standingsMissing(ctx context.Context, want []keptTask) string {
	out, err := d.call(ctx, "coordination-engine", "tasks", "--json")
	if err != nil {
		return err.Error()
	}
	var res struct {
		Tasks []struct{ ID, Kind, Words string }
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return "coordination-engine tasks --json: " + err.Error()
	}
	got := map[string]string{}
	for _, t := range res.Tasks {
		got[t.ID] = t.Kind + " " + t.Words
	}
	for _, k := range want {
		if s := got[k.id]; !strings.HasPrefix(s, k.kind+" ") || !strings.Contains(s, k.words) {
			return fmt.Sprintf("task %s stands %q, not %s %q yet", k.id, s, k.kind, k.words)
		}
	}
	return ""
}
