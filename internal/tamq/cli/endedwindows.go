package cli

import (
	"strings"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// endedWindows are the windows, on each tmux socket's newest endpoint
// (eps newest first), whose agent exited or that were closed: what doctor
// warns of and what `tamq start` left as it was. n counts every window
// looked at; ended says each in words and repos names them, escaped.
type endedWindows struct {
	n     int
	ended []string
	repos []string
}

func endedWindowsOf(eps []api.Endpoint) endedWindows {
	var out endedWindows
	seen := map[string]bool{}
	for _, ep := range eps {
		if seen[ep.TmuxSocket] {
			continue
		}
		seen[ep.TmuxSocket] = true
		for _, w := range ep.Windows {
			out.n++
			if end := w.EndText(); end != "" {
				out.ended = append(out.ended, "the window of "+textsafe.Escape(w.Repo)+": "+end)
				out.repos = append(out.repos, textsafe.Escape(w.Repo))
			}
		}
	}
	return out
}

// rerunHint says how to run the agents of the ended windows again.
func (e endedWindows) rerunHint() string {
	return "`tamq open --command CMD " + strings.Join(e.repos, " ") + "` runs the agent again in its window"
}
