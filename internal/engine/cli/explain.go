package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/kinds"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newExplainCmd(a *app.App) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "explain TASK",
		Short: "Tell why a task was or was not woken",
		Long: `Tell, from the engine's last observation of State Hub and its own receipts,
why a task was or was not woken: its status and workplan, each dependency and
its state, the tasks that wait on it, the gate that applied, its triggers, their
leases, attempts and wakes (with tamq's message ids), and when it is tried next.
Then its timeline, oldest first: when it was observed and judged, gated or
waiting, leased (attempt n of max), woken (tamq's message id) or the wake
failed, acknowledged (by the broker or the agent), renewed, checkpointed,
released (completed, failed, blocked), waiting to retry, stopped; the
operator's manual wakes (coordination-engine wake) are marked. --json has it
as "timeline": [{"at", "kind", "text", ...}].
While the engine is not running, the answer comes from its database as it last
wrote it, without the observation (a note on stderr says so; the verdict says
the engine is not running and --json has "offline": true).
A task it has nothing on (no trigger, and no such task at State Hub's last look)
is not_found, exit 12: most likely a mistyped id.

--format dot draws the task, its dependencies and its dependents as a Graphviz
graph with the same facts (render it with ` + "`dot -Tsvg`" + `).`,
		Example: `  coordination-engine explain T-42
  coordination-engine explain T-42 --json
  coordination-engine explain T-42 --format dot | dot -Tsvg > t42.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "dot" {
				return errs.New(errs.Usage, "unknown --format %q; want text or dot", format)
			}
			c, err := engineClient(a)
			if err != nil {
				return err
			}
			// Stopped: its triggers, leases and wakes are in its database;
			// only the observation of State Hub needs it running.
			res, err := askOrRead(cmd.Context(), a, func() (api.ExplainResult, error) { return c.Explain(cmd.Context(), args[0]) },
				func(st *store.Store) (api.ExplainResult, error) {
					res, err := service.Explain(cmd.Context(), st, args[0], nil)
					if cfg, cerr := a.Config(); cerr == nil && err == nil {
						if hub, herr := kinds.Open(cfg, a.Registry, nil); herr == nil {
							res.URL = hub.Link(args[0]) // a name, nothing asked of the tracker
						}
					}
					return res, err
				})
			if err != nil {
				return err
			}
			switch {
			case a.JSON:
				return a.PrintJSON(res)
			case format == "dot":
				a.Printf("%s", explainDot(res))
			default:
				a.Printf("%s", explainText(res))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or dot (Graphviz)")
	return cmd
}

// explainText is the explanation for people: the verdict first, then the
// facts it rests on, then the task's timeline, oldest first. Every field
// is escaped: ids, revisions, repos, reasons and the verdict that quotes
// them come from State Hub and agents, and a newline in one would forge a
// line of its own (Printf's escaping keeps newlines, as a body needs).
func explainText(r api.ExplainResult) string {
	e := textsafe.Escape
	var b strings.Builder
	fmt.Fprintf(&b, "task %s: %s\n", e(r.Task), e(r.Verdict))
	if r.URL != "" {
		fmt.Fprintf(&b, "  page: %s\n", e(r.URL))
	}
	if r.Observed {
		fmt.Fprintf(&b, "  State Hub (%s): %s, revision %s, repo %s, workplan %s (%s), priority %d\n",
			stamp(r.ObservedAt), e(r.Status), e(r.Revision), e(r.Repo), e(r.Workplan), e(r.WorkplanStatus), r.Priority)
		if r.Skipped != "" {
			fmt.Fprintf(&b, "  skipped by the engine: %s\n", e(r.Skipped))
		}
		if r.Waiting != "" {
			fmt.Fprintf(&b, "  not actionable: %s\n", e(r.Waiting))
		}
		if r.Gate != "" {
			fmt.Fprintf(&b, "  gate: %s (%s)\n", e(r.Gate), e(r.GateReason))
		}
	}
	if r.Held != "" {
		fmt.Fprintf(&b, "  cluster: %s\n", e(r.Held))
	}
	for _, d := range r.Dependencies {
		fmt.Fprintf(&b, "  depends on %s: %s\n", e(d.ID), e(depState(d)))
	}
	for _, d := range r.Dependents {
		fmt.Fprintf(&b, "  needed by %s (%s, %s)\n", e(d.ID), e(d.Repo), e(d.Status))
	}
	for _, t := range r.Triggers {
		fmt.Fprintf(&b, "  trigger %s: %s revision %s, %s, %s", e(t.ID), e(t.Source), e(t.SourceRevision), e(t.Reason), e(t.State))
		if t.GateReason != "" {
			fmt.Fprintf(&b, " at gate %s", e(t.GateReason))
		}
		if t.Why != "" {
			fmt.Fprintf(&b, " (%s)", e(t.Why))
		}
		fmt.Fprintf(&b, ", observed %s\n", t.ObservedAt.Format(time.RFC3339))
		for _, l := range t.Leases {
			fmt.Fprintf(&b, "    lease %s: %s, attempt %d of %d", e(l.LeaseID), e(l.State), l.Attempt, l.MaxAttempts)
			if l.StopReason != "" {
				fmt.Fprintf(&b, ", %s", e(l.StopReason))
			}
			b.WriteString("\n")
			for _, w := range l.Wakes {
				status := e(w.Status)
				meaning := lease.WakeOutcome(w.Status).Meaning()
				if meaning != "" {
					// "resumed" alone reads as resumed from a checkpoint.
					status = "sent, " + meaning
				}
				fmt.Fprintf(&b, "      wake attempt %d: %s", w.Attempt, status)
				if w.MessageID != "" {
					fmt.Fprintf(&b, ", tamq message %s", e(w.MessageID))
				}
				// The receipt's reason is those words again, said once.
				if w.Reason != "" && w.Reason != meaning {
					fmt.Fprintf(&b, " (%s)", e(w.Reason))
				}
				fmt.Fprintf(&b, ", %s\n", w.At.Format(time.RFC3339))
			}
		}
	}
	if r.NextRetry != nil {
		fmt.Fprintf(&b, "  next try: %s\n", r.NextRetry.Format(time.RFC3339))
	}
	if len(r.Timeline) > 0 {
		b.WriteString("  timeline:\n")
	}
	for _, en := range r.Timeline {
		// Each entry stays one line: its text holds reasons and summaries
		// from agents and State Hub, whose newlines could fake an entry.
		fmt.Fprintf(&b, "    %s  %-15s  %s", en.At.Format(time.RFC3339), e(en.Kind), e(en.Text))
		if en.Manual && en.Kind != api.TimelineManualWake {
			b.WriteString(" [manual wake]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func depState(d api.ExplainDep) string {
	if !d.Found {
		return "in no workplan"
	}
	return d.Status + " (" + d.Repo + ")"
}

func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

// explainDot draws the task with its dependencies and dependents: done
// tasks filled, the explained one bold and labelled with its verdict.
func explainDot(r api.ExplainResult) string {
	var b strings.Builder
	b.WriteString("digraph explain {\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n")
	node := func(id, label string, done, main bool) {
		style := ""
		switch {
		case main:
			style = ", style=bold"
		case done:
			style = ", style=filled, fillcolor=\"#d8f0d8\""
		}
		fmt.Fprintf(&b, "  %s [label=%s%s];\n", dotQuote(id), dotQuote(label), style)
	}
	// The fields are escaped before they are joined: the newlines between
	// them break a label's lines, one inside a field must not (nor may
	// anything else in it act where the graph is shown or printed).
	e := textsafe.Escape
	node(e(r.Task), e(r.Task)+"\n"+e(r.Status)+" "+e(r.Repo)+"\n"+e(r.Verdict), r.Status == "done", true)
	for _, d := range r.Dependencies {
		node(e(d.ID), e(d.ID)+"\n"+e(depState(d)), d.Done, false)
		fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(e(d.ID)), dotQuote(e(r.Task)))
	}
	for _, d := range r.Dependents {
		node(e(d.ID), e(d.ID)+"\n"+e(d.Status)+" ("+e(d.Repo)+")", d.Done, false)
		fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(e(r.Task)), dotQuote(e(d.ID)))
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote is a Graphviz quoted string: ids and text come from State Hub.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
