// Package top is `tamq top`: one snapshot of the whole system gathered from
// tamq's and coordination-engine's services, a pure rendering of it as text,
// and a thin Bubble Tea shell that refreshes it. Gathering and rendering are
// apart so the text is tested without a terminal or a service.
package top

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	tamq "github.com/tmux-amq/tamq/internal/tamqclient"
)

// ReceiptCount is how many of the engine's latest receipts a frame shows.
const ReceiptCount = 10

// Snapshot is everything one frame shows. Each source has its own section
// with its own error, so one service being down hides nothing of the other.
type Snapshot struct {
	At     time.Time    `json:"at"`
	Tamq   TamqSource   `json:"tamq"`
	Engine EngineSource `json:"coordination_engine"`
	// Versions are each service's change counter, read before the rest:
	// a change after it makes the next refresh (Watch).
	Versions Versions `json:"-"`
}

// Versions are the services' change counters (daemon.OpChanges); 0 for a
// service that did not answer.
type Versions struct{ Tamq, Engine uint64 }

// TamqSource is tamq's status document, or why there is none.
type TamqSource struct {
	Running bool `json:"running"`
	// Error is why the status could not be read: "" when Running, the
	// service's "not running" message when it is down, else the failure.
	Error  string                `json:"error,omitempty"`
	Status *tamqapi.StatusReport `json:"status,omitempty"`
}

// EngineSource is coordination-engine's status and latest receipts, or why
// there are none.
type EngineSource struct {
	Running bool                    `json:"running"`
	Error   string                  `json:"error,omitempty"`
	Status  *engineapi.StatusReport `json:"status,omitempty"`
	// Receipts are the latest ones, newest first; they never carry bodies.
	Receipts      []engineapi.Receipt `json:"receipts,omitempty"`
	ReceiptsError string              `json:"receipts_error,omitempty"`
	// Tasks are the tasks that need the person, then those an agent works
	// on, those that wait for a retry and those that wait for something
	// else: the loop as the person watches it.
	Tasks      []engineapi.TaskStanding `json:"tasks,omitempty"`
	TasksError string                   `json:"tasks_error,omitempty"`
}

// TaskRows is how many tasks of the loop a snapshot holds at most.
const TaskRows = 50

// inLoop are the kinds of standing the loop pane shows: what needs the
// person, the live work, and what waits and why (ready and done tasks are
// in `coordination-engine tasks`).
var inLoop = []string{"needs_you", "working", "retry", "waiting"}

// Sources says where the services are and how long each may take to answer.
type Sources struct {
	Tamq, Engine paths.Paths
	// Timeout bounds each call: a hung service costs a frame that long, not
	// the client's own, longer timeouts.
	Timeout time.Duration
	Now     func() time.Time
}

// Gather asks both services at once and returns what they said; it never
// fails as a whole, every problem is written into its section.
func Gather(ctx context.Context, s Sources) Snapshot {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	// JSON times are UTC to the millisecond, as every time tamq prints (docs/cli.md).
	snap := Snapshot{At: now().UTC().Truncate(time.Millisecond)}
	call := func(f func(context.Context)) func() {
		return func() {
			c, cancel := context.WithTimeout(ctx, s.Timeout)
			defer cancel()
			f(c)
		}
	}
	// The versions first: whatever changes while the rest is read is newer.
	var vg sync.WaitGroup
	vg.Go(call(func(c context.Context) { snap.Versions.Tamq, _ = daemon.WaitChange(c, s.Tamq, 0, 0) }))
	vg.Go(call(func(c context.Context) { snap.Versions.Engine, _ = daemon.WaitChange(c, s.Engine, 0, 0) }))
	vg.Wait()
	var (
		wg       sync.WaitGroup
		receipts engineapi.ReceiptsResult
		recErr   error
		tasks    engineapi.TasksResult
		tasksErr error
	)
	wg.Go(call(func(c context.Context) {
		r, err := tamq.New(s.Tamq).Status(c)
		snap.Tamq = TamqSource{Running: err == nil, Error: errText(err)}
		if err == nil {
			snap.Tamq.Status = &r
		}
	}))
	wg.Go(call(func(c context.Context) {
		r, err := engineclient.New(s.Engine).Status(c)
		snap.Engine.Running, snap.Engine.Error = err == nil, errText(err)
		if err == nil {
			snap.Engine.Status = &r
		}
	}))
	wg.Go(call(func(c context.Context) {
		receipts, recErr = engineclient.New(s.Engine).Receipts(c, engineapi.ReceiptsArgs{Limit: ReceiptCount})
	}))
	wg.Go(call(func(c context.Context) {
		// Ordered by what needs the person first, so the first rows are
		// the ones the pane keeps.
		tasks, tasksErr = engineclient.New(s.Engine).Tasks(c, engineapi.TasksArgs{Limit: TaskRows})
	}))
	wg.Wait()
	// Receipts are only worth a word when the engine itself answered: a
	// down engine is said once, in its section.
	if snap.Engine.Running {
		if recErr != nil {
			snap.Engine.ReceiptsError = errText(recErr)
		} else {
			// The engine lists the latest ones oldest first; a frame reads
			// from the top, so the newest comes first.
			rs := receipts.Receipts
			for i := len(rs) - 1; i >= 0; i-- {
				snap.Engine.Receipts = append(snap.Engine.Receipts, rs[i])
			}
		}
	}
	if snap.Engine.Running {
		if tasksErr != nil {
			snap.Engine.TasksError = errText(tasksErr)
		}
		for _, t := range tasks.Tasks {
			if slices.Contains(inLoop, t.Kind) && len(snap.Engine.Tasks) < TaskRows {
				snap.Engine.Tasks = append(snap.Engine.Tasks, t)
			}
		}
	}
	return snap
}

// Watch returns when either service's state is newer than the snapshot's
// versions, or after at most wait: what `tamq top` waits on between
// refreshes. A service that does not answer is waited for no longer than
// wait, so a stopped one never makes the view spin.
func Watch(ctx context.Context, s Sources, snap Snapshot, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	changed := make(chan struct{}, 2)
	watch := func(p paths.Paths, since uint64) {
		v, err := daemon.WaitChange(ctx, p, since, wait)
		if err == nil && v > since {
			changed <- struct{}{}
		}
	}
	go watch(s.Tamq, snap.Versions.Tamq)
	go watch(s.Engine, snap.Versions.Engine)
	select {
	case <-changed:
	case <-ctx.Done():
	}
}

// errText is err's message, with "not running" kept short: the clients'
// message names the socket and their hint says how to start the service,
// which a frame has no room for. Other unavailable errors (too many
// connections) keep their words.
func errText(err error) string {
	switch {
	case err == nil:
		return ""
	case errs.Is(err, errs.Unavailable) && strings.Contains(err.Error(), "not running"):
		return NotRunning
	}
	return err.Error()
}

// NotRunning is a source's error when its service does not answer on its socket.
const NotRunning = "not running"
