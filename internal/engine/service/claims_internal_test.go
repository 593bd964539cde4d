package service

import (
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
)

// A claim outlives its engine by the longest silence of a live lease: its
// ack deadline, or its renewals missed, whichever is longer.
func TestClaimTTLIsTheLongestSilenceOfALease(t *testing.T) {
	for _, c := range []struct {
		timing lease.Timing
		want   time.Duration
	}{
		{lease.Timing{AckTimeout: 30 * time.Second, RenewInterval: 10 * time.Second, MissedRenewals: 3}, 30 * time.Second},
		{lease.Timing{AckTimeout: 4 * time.Second, RenewInterval: 10 * time.Second, MissedRenewals: 3}, 30 * time.Second},
		{lease.Timing{AckTimeout: 4 * time.Second, RenewInterval: time.Second, MissedRenewals: 2}, 4 * time.Second},
	} {
		if got := ClaimTTL(c.timing); got != c.want {
			t.Errorf("ClaimTTL(%+v) = %v, want %v", c.timing, got, c.want)
		}
	}
}

// The cluster's name of the work: a task by its id, a message by its own,
// and nothing for an operator's wake of a repo without a task (no other
// host can see that work).
func TestWorkKeyNamesWhatOtherHostsSee(t *testing.T) {
	for _, c := range []struct {
		t    lease.Trigger
		want string
	}{
		{lease.Trigger{Source: lease.SourceTask, SourceID: "T-1", TaskID: "T-1"}, "T-1"},
		{lease.Trigger{Source: lease.SourceCheckpoint, SourceID: "cp-9", TaskID: "T-1"}, "T-1"},
		{lease.Trigger{Source: lease.SourceMessage, SourceID: "m-1"}, "message:m-1"},
		{lease.Trigger{Source: lease.SourceTask, SourceID: "manual:alpha"}, ""},
	} {
		if got := workKey(c.t); got != c.want {
			t.Errorf("workKey(%+v) = %q, want %q", c.t, got, c.want)
		}
	}
	var off *claimer
	if off.on() {
		t.Error("no claimer is on")
	}
	if (&claimer{}).on() {
		t.Error("a claimer without a cluster is on")
	}
}
