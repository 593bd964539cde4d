package service

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/tmux-amq/tamq/internal/engine/notify"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// notifiedKey is the observer_state key under which the notifier keeps
// what it told a person last (task → repo and reason), so a restart does
// not tell them again of a standing they heard of.
const notifiedKey = "notify_told"

// notifier runs the operator's [notify] command when a task starts or stops
// needing a person (internal/engine/notify decides which). The observer
// wakes it after each look; it reads the standings and runs the commands in
// its own goroutine, one at a time, so a slow command never holds a look.
type notifier struct {
	store     *store.Store
	log       *slog.Logger
	runner    notify.Runner
	standings func(ctx context.Context) ([]api.TaskStanding, bool, error)
	// looked is the observer's word that a look is done.
	looked wakeup.Signal
}

// Run is the notifier's worker: each look, the transitions since what was
// told, kept before the commands run (a person hears at most once of each;
// a command that fails is logged, not run again).
func (n *notifier) Run(ctx context.Context) {
	told, err := n.told(ctx)
	if err != nil {
		n.log.Warn("cannot read what was notified; notifying from scratch", "error", err.Error())
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.looked.C():
		}
		all, observed, err := n.standings(ctx)
		if err != nil || !observed {
			if err != nil && ctx.Err() == nil {
				n.log.Warn("cannot read the tasks' standings to notify", "error", err.Error())
			}
			continue
		}
		var needs []notify.Need
		for _, t := range all {
			if t.Kind == string(standing.NeedsYou) {
				needs = append(needs, notify.Need{Task: t.ID, Repo: t.Repo, Gate: t.Gate, Wait: t.Wait, Dialog: t.Dialog,
					Skipped: t.Skipped != "", Words: t.Words})
			}
		}
		notices, next := notify.Transitions(told, needs)
		if len(notices) == 0 {
			continue
		}
		b, _ := json.Marshal(next)
		if err := n.store.Observer.SetObserverValue(ctx, notifiedKey, string(b)); err != nil {
			n.log.Warn("cannot keep what is notified; it is tried at the next look", "error", err.Error())
			continue
		}
		told = next
		for _, nc := range notices {
			res := n.runner.Run(ctx, nc)
			if ctx.Err() != nil {
				return
			}
			if !res.OK() {
				n.log.Warn("the notify command failed", "event", string(nc.Event), "task", nc.Task, "result", res.String(),
					"output", res.Excerpt)
				continue
			}
			n.log.Info("notified", "event", string(nc.Event), "task", nc.Task, "reason", nc.Reason)
		}
	}
}

// told is what was notified before this run of the engine.
func (n *notifier) told(ctx context.Context) (map[string]notify.Told, error) {
	v, err := n.store.Observer.ObserverValue(ctx, notifiedKey)
	if err != nil || v == "" {
		return nil, err
	}
	var told map[string]notify.Told
	return told, json.Unmarshal([]byte(v), &told)
}

// run is Run for the plan of workers: nothing to do without [notify].
func (n *notifier) run(ctx context.Context) {
	if n != nil {
		n.Run(ctx)
	}
}
