package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	engine "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/top"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// topActions are what the keys of `tamq top`'s loop pane do: Enter goes to
// the task's window, e explains the task, c shows its latest checkpoint.
func topActions(a *app.App, ep paths.Paths) top.Actions {
	ec := engine.New(ep)
	return top.Actions{
		Focus: func(ctx context.Context, t api.TaskStanding, s top.Snapshot) string {
			return focusWindow(ctx, a, t, s)
		},
		Explain: func(ctx context.Context, t api.TaskStanding) string {
			ctx, cancel := context.WithTimeout(ctx, topCallTimeout)
			defer cancel()
			r, err := ec.Explain(ctx, t.ID)
			if err != nil {
				return "explain " + t.ID + ": " + err.Error()
			}
			return explainSummary(r)
		},
		Checkpoint: func(ctx context.Context, t api.TaskStanding) string {
			ctx, cancel := context.WithTimeout(ctx, topCallTimeout)
			defer cancel()
			return latestCheckpoint(ctx, ec, t)
		},
	}
}

// focusWindow switches the tmux client `tamq top` runs in to the window of
// the task's repo, on the tmux server that window is on. Outside that server
// it makes the window current there and says how to get to it: a client of
// another server cannot be switched.
func focusWindow(ctx context.Context, a *app.App, t api.TaskStanding, s top.Snapshot) string {
	socket, window := "", ""
	if st := s.Tamq.Status; st != nil {
		for _, ep := range st.Endpoints {
			for _, w := range ep.Windows {
				if w.Repo == t.Repo && window == "" {
					socket, window = ep.TmuxSocket, w.WindowID
				}
			}
		}
	}
	if window == "" {
		return fmt.Sprintf("tamq has no window of %s: open one with `tamq open %s`", t.Repo, t.Repo)
	}
	ctx, cancel := context.WithTimeout(ctx, topCallTimeout)
	defer cancel()
	srv := tmux.Server{Socket: socket}
	// $TMUX is "<socket>,<server pid>,<session>" inside a tmux client.
	here, _, _ := strings.Cut(a.Getenv("TMUX"), ",")
	if here != "" && filepath.Clean(here) == filepath.Clean(socket) {
		if _, err := srv.Run(ctx, nil, "select-window", "-t", window, ";", "switch-client", "-t", window); err != nil {
			return "cannot switch to the window of " + t.Repo + ": " + err.Error()
		}
		return ""
	}
	if _, err := srv.Run(ctx, nil, "select-window", "-t", window); err != nil {
		return "cannot select the window of " + t.Repo + ": " + err.Error()
	}
	return fmt.Sprintf("The window of %s (%s) is now the current one on tmux server %s.\n"+
		"This terminal is not a client of that server; go there with: tmux -S %s attach", t.Repo, window, socket, socket)
}

// inert escapes one value from a service: the agents' and State Hub's words,
// newlines included, so none of them acts in the terminal or poses as a line
// of its own.
func inert(s string) string { return textsafe.Escape(s) }

// explainSummary is the part of explain a frame has room for: the verdict,
// what State Hub said, the dependencies, and each lease of the task.
func explainSummary(r api.ExplainResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "explain %s: %s\n", inert(r.Task), inert(r.Verdict))
	if r.Observed {
		fmt.Fprintf(&b, "  State Hub: %s, repo %s, workplan %s, priority %d\n", inert(r.Status), inert(r.Repo), inert(r.Workplan), r.Priority)
	}
	for _, d := range r.Dependencies {
		fmt.Fprintf(&b, "  depends on %s: %s\n", inert(d.ID), inert(d.Status))
	}
	for _, t := range r.Triggers {
		fmt.Fprintf(&b, "  trigger %s: %s, %s\n", inert(t.ID), inert(t.Reason), inert(t.State))
		for _, l := range t.Leases {
			fmt.Fprintf(&b, "    lease %s: %s, attempt %d of %d %s\n", inert(l.LeaseID), inert(l.State), l.Attempt, l.MaxAttempts, inert(l.StopReason))
		}
	}
	if r.NextRetry != nil {
		fmt.Fprintf(&b, "  next try: %s\n", r.NextRetry.Local().Format(time.TimeOnly))
	}
	b.WriteString("(coordination-engine explain " + inert(r.Task) + " tells the whole story)\n")
	return b.String()
}

// latestCheckpoint is the task's latest checkpoint as the engine keeps it
// (local: never published). Its texts are the agent's, escaped.
func latestCheckpoint(ctx context.Context, ec *engine.Client, t api.TaskStanding) string {
	res, err := ec.Checkpoints(ctx, api.CheckpointsArgs{TaskID: t.ID, Limit: 1})
	switch {
	case err != nil:
		return "checkpoints of " + t.ID + ": " + err.Error()
	case len(res.Checkpoints) == 0:
		return "no checkpoint of " + t.ID + " yet"
	}
	c := res.Checkpoints[0]
	var b strings.Builder
	fmt.Fprintf(&b, "latest checkpoint of %s: lease %s", inert(t.ID), inert(c.LeaseID))
	if c.Attempt > 0 {
		fmt.Fprintf(&b, " attempt %d", c.Attempt)
	}
	fmt.Fprintf(&b, ", %s\n", c.RecordedAt.Local().Format(time.DateTime))
	fmt.Fprintf(&b, "  summary: %s\n", inert(c.Summary))
	if c.NextAction != "" {
		fmt.Fprintf(&b, "  next: %s\n", inert(c.NextAction))
	}
	if len(c.FilesChanged) > 0 {
		fmt.Fprintf(&b, "  files: %s\n", inert(strings.Join(c.FilesChanged, ", ")))
	}
	if c.BlockedReason != "" {
		fmt.Fprintf(&b, "  blocked: %s\n", inert(c.BlockedReason))
	}
	b.WriteString("(coordination-engine checkpoints --task " + inert(t.ID) + " lists them all)\n")
	return b.String()
}
