package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newTasksCmd(a *app.App) *cobra.Command {
	var (
		args     api.TasksArgs
		needsYou bool
		tree     bool
	)
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List every task and what it waits for, what needs you first",
		Long: `List every task of the engine's last observation of State Hub, one line each,
ordered by what needs a person first: its id, repo, State Hub status, and
where it stands in words you act on:

  needs you: ...   a gate (human, secret, a proposed action the policy sends
                   to a person), retries exhausted, a dialog open in an
                   agent's window, work released as blocked, a task the
                   engine skips (what State Hub sends of it breaks the
                   engine's rules, as a revision with a newline: mend it
                   there; --json has the reason as "skipped")
  working: ...     an agent holds its lease (attempt, who acknowledged it,
                   its last renewal)
  retry at ...     its lease waits for its next attempt
  waiting: ...     a dependency, a window, its workplan: it moves by itself
  ready: ...       actionable; the engine takes it at its next look
  done             done or cancelled in State Hub

--needs-you lists only what needs you; --state narrows to one of needs_you,
working, retry, waiting, ready, done; --repo to one repo. --tree draws each
workplan's dependency tree with the same words. --json has the same facts as
fields (times in RFC 3339) and the count of each kind over all tasks. The
list is the running engine's: it observes State Hub only while it runs.
While the engine is not running, the list comes from its database as it last
wrote it (a note on stderr says so; --json has "offline": true): every task it
has a trigger of, where its gates and leases leave it, with State Hub's status
shown as "-".`,
		Example: `  coordination-engine tasks
  coordination-engine tasks --needs-you
  coordination-engine tasks --repo beta --tree
  coordination-engine tasks --state working --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if needsYou {
				if args.Kind != "" && args.Kind != string(standing.NeedsYou) {
					return app.UsageError("--needs-you and --state %s contradict each other", textsafe.Escape(args.Kind))
				}
				args.Kind = string(standing.NeedsYou)
			}
			if args.Kind != "" && !slices.Contains(standing.Kinds, standing.Kind(args.Kind)) {
				return app.UsageError("--state %q is not one of %s", textsafe.Escape(args.Kind), kindNames())
			}
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			// Stopped: its triggers and leases are in its database; only
			// State Hub's side of each task needs it running.
			res, err := askOrRead(cmd.Context(), a, func() (api.TasksResult, error) { return c.Tasks(cmd.Context(), args) },
				func(st *store.Store) (api.TasksResult, error) {
					return service.OfflineTasks(cmd.Context(), st, args, time.Now())
				})
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res)
			}
			// Old standings say their age first: the rest is as of then.
			if line := api.StaleLine(res.StateHubUnreachableSince, res.ObservedAt); line != "" {
				a.Printf("%s\n", line)
			}
			switch {
			case res.ObservedAt == nil && !res.Offline:
				a.Printf("State Hub has not been observed yet.\n")
			case tree:
				printTaskTrees(a.Out, res.Tasks)
			default:
				printTasks(a.Out, res.Tasks)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&args.Repo, "repo", "", "only the tasks of this repo")
	cmd.Flags().StringVar(&args.Kind, "state", "", "only tasks that stand so: "+kindNames())
	cmd.Flags().BoolVar(&needsYou, "needs-you", false, "only what needs a person now (--state needs_you)")
	cmd.Flags().BoolVar(&tree, "tree", false, "draw each workplan's dependency tree")
	cmd.Flags().IntVar(&args.Limit, "limit", 1000, "at most this many (up to 1000), what needs you first")
	return cmd
}

func kindNames() string {
	names := make([]string, len(standing.Kinds))
	for i, k := range standing.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// printTasks prints a task a line, under a header. Ids, repos and reasons
// come from State Hub and agents: escaped, nothing in them acts in the
// terminal.
func printTasks(w io.Writer, ts []api.TaskStanding) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "No task.")
		return
	}
	// A tracker with pages for people (GitHub) gets their links, last,
	// where a terminal that makes them clickable finds them whole.
	pages := slices.ContainsFunc(ts, func(t api.TaskStanding) bool { return t.URL != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if pages {
		fmt.Fprintln(tw, "TASK\tREPO\tSTATUS\tSTANDING\tPAGE")
	} else {
		fmt.Fprintln(tw, "TASK\tREPO\tSTATUS\tSTANDING")
	}
	for _, t := range ts {
		status := t.Status
		if status == "" {
			status = "-" // not observed: the engine is not running
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s", textsafe.Escape(t.ID), textsafe.Escape(t.Repo), textsafe.Escape(status), textsafe.Escape(t.Words))
		if pages {
			line += "\t" + textsafe.Escape(t.URL)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// printTaskTrees draws each workplan's tasks as the tree of their
// dependencies: a task under each task it depends on, its own dependents
// drawn once (later it is named "shown above").
func printTaskTrees(w io.Writer, ts []api.TaskStanding) {
	byWorkplan := map[string][]api.TaskStanding{}
	var workplans []string
	for _, t := range ts {
		if _, ok := byWorkplan[t.Workplan]; !ok {
			workplans = append(workplans, t.Workplan)
		}
		byWorkplan[t.Workplan] = append(byWorkplan[t.Workplan], t)
	}
	slices.Sort(workplans)
	for i, wp := range workplans {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "workplan %s\n", textsafe.Escape(wp))
		// The repo and standing columns line up within a workplan.
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		tasks := byWorkplan[wp]
		slices.SortFunc(tasks, func(a, b api.TaskStanding) int { return cmpPriorityID(a, b) })
		in := map[string]bool{}
		dependents := map[string][]api.TaskStanding{}
		for _, t := range tasks {
			in[t.ID] = true
		}
		var roots []api.TaskStanding
		for _, t := range tasks {
			parents := 0
			for _, d := range t.DependsOn {
				if in[d] {
					dependents[d] = append(dependents[d], t)
					parents++
				}
			}
			if parents == 0 {
				roots = append(roots, t)
			}
		}
		drawn := map[string]bool{}
		var draw func(t api.TaskStanding, prefix string, last bool, depth int)
		draw = func(t api.TaskStanding, prefix string, last bool, depth int) {
			branch, next := "├─ ", "│  "
			if last {
				branch, next = "└─ ", "   "
			}
			if depth == 0 {
				branch, next = "", ""
			}
			if drawn[t.ID] {
				fmt.Fprintf(tw, "  %s%s%s\t\t(shown above)\n", prefix, branch, textsafe.Escape(t.ID))
				return
			}
			drawn[t.ID] = true
			fmt.Fprintf(tw, "  %s%s%s\t%s\t%s\n", prefix, branch, textsafe.Escape(t.ID), textsafe.Escape(t.Repo), textsafe.Escape(t.Words))
			kids := dependents[t.ID]
			for j, k := range kids {
				draw(k, prefix+next, j == len(kids)-1, depth+1)
			}
		}
		for _, r := range roots {
			draw(r, "", true, 0)
		}
		// Tasks in a cycle have no root: drawn on their own so none is lost.
		for _, t := range tasks {
			if !drawn[t.ID] {
				draw(t, "", true, 0)
			}
		}
		tw.Flush()
	}
}

func cmpPriorityID(a, b api.TaskStanding) int {
	if a.Priority != b.Priority {
		return a.Priority - b.Priority
	}
	return strings.Compare(a.ID, b.ID)
}
