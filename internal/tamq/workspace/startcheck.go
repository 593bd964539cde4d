package workspace

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/proc"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// StartWatch is how long an open watches the command it started in a window
// for the shell's own failure: a command that is not there (127) or cannot
// be run (126) ends within it, a program that runs does not.
const StartWatch = time.Second

// StartFailure is a window whose command did not start, with the status of
// the shell that said so.
type StartFailure struct {
	Window api.EndpointWindow
	Status int
}

// StartFailures watches the pane processes of the windows ws started (a
// command run in a new window, or run again in a dead one) until each exits
// or the watch's time on clk has passed, and returns those whose shell
// answered 127 or 126. It waits on each process's exit (proc.WatchExit),
// never by looking again; only once a process has exited is tmux asked
// for its status.
func StartFailures(ctx context.Context, srv tmux.Server, ws []api.EndpointWindow, clk clock.Clock, within time.Duration) ([]StartFailure, error) {
	exits := make(chan int, len(ws))
	done := make(chan struct{})
	defer close(done)
	watching := 0
	for i, w := range ws {
		if w.Command == "" || w.Reused || w.PanePID <= 0 {
			continue
		}
		watch, err := proc.WatchExit(w.PanePID)
		if err != nil {
			return nil, err
		}
		defer watch.Stop()
		watching++
		go func() {
			select {
			case <-watch.Exited:
				exits <- i
			case <-done:
			}
		}()
	}
	var failed []StartFailure
	deadline := clk.After(within)
	for ; watching > 0; watching-- {
		select {
		case <-ctx.Done():
			return failed, ctx.Err()
		case <-deadline:
			return failed, nil
		case i := <-exits:
			status, err := deadStatus(ctx, srv, ws[i].PaneID)
			if err != nil {
				return failed, err
			}
			if status == 126 || status == 127 {
				failed = append(failed, StartFailure{Window: ws[i], Status: status})
			}
		}
	}
	return failed, nil
}

// deadStatus asks tmux for the exit status of a pane whose process has
// exited (-1: tmux does not know it). tmux records it when it reaps the
// process, which may come a moment after the exit was heard: it is asked
// again, briefly, until it has.
func deadStatus(ctx context.Context, srv tmux.Server, paneID string) (int, error) {
	again := backoff.Policy{Min: time.Millisecond, Max: time.Second}
	wait := again.Next(0)
	for tries := 0; ; tries++ {
		dead, status, err := srv.PaneExit(ctx, paneID)
		if err != nil || dead && status >= 0 || tries == 10 {
			return status, err
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(wait):
		}
		wait = again.Next(wait)
	}
}
