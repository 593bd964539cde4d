package fakehub_test

import (
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/fakehub"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// The fake passes the suite every driver passes: what the engine's tests
// learn from it holds for the real trackers.
func TestConformance(t *testing.T) {
	hubtest.Run(t, hubtest.Harness{Open: func(t *testing.T, repos ...string) (statehub.Hub, hubtest.Tracker) {
		h := fakehub.New(repos...)
		return h, h
	}})
}
