package cli

import (
	"context"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	engine "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
)

// printTmuxLine prints the line of `tamq status --tmux-line`: what needs the
// person, from coordination-engine's tasks. tmux runs it every few seconds
// and shows whatever it prints, so a failure prints nothing rather than an
// error in the status bar; `tamq status` and `coordination-engine status`
// say what is wrong. The one failure it shows is State Hub's, as a leading
// "State Hub down": the counts are then old, and the engine still answers.
func printTmuxLine(ctx context.Context, a *app.App) error {
	ep, err := paths.Resolve(paths.Engine, a.Getenv)
	if err != nil {
		return nil
	}
	res, err := engine.New(ep).Tasks(ctx, api.TasksArgs{Limit: 1})
	if err != nil {
		return nil
	}
	if line := res.TmuxLine(); line != "" {
		a.Printf("%s\n", line)
	}
	return nil
}
