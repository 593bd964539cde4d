package notify

import (
	"reflect"
	"testing"
)

func TestTransitions(t *testing.T) {
	gate := Need{Task: "A", Repo: "net-kingdom", Gate: "human", Words: "needs you: human gate (review)"}
	dialog := Need{Task: "B", Repo: "api", Dialog: "api", Words: "needs you: dialog open in window api"}

	// Nothing told, two tasks need someone: one notice each.
	got, told := Transitions(nil, []Need{dialog, gate})
	if len(got) != 2 || got[0].Task != "A" || got[0].Event != NeedsYou || got[0].Reason != "gate_human" || got[0].Repo != "net-kingdom" ||
		got[1].Task != "B" || got[1].Reason != "dialog" {
		t.Fatalf("first look: %+v", got)
	}
	if want := map[string]Told{"A": {"net-kingdom", "gate_human"}, "B": {"api", "dialog"}}; !reflect.DeepEqual(told, want) {
		t.Errorf("told %+v", told)
	}

	// The same standings again: nothing.
	if got, told = Transitions(told, []Need{gate, dialog}); len(got) != 0 {
		t.Errorf("an unchanged look notifies: %+v", got)
	}

	// A's reason changes (its gate cleared, then its retries ran out): a new
	// needs_you; B stops needing anyone: resolved, with the reason told.
	exhausted := Need{Task: "A", Repo: "net-kingdom", Words: "needs you: retries exhausted (lease L1, 4 attempts)"}
	got, told = Transitions(told, []Need{exhausted})
	want := []Notice{
		{Event: Resolved, Task: "B", Repo: "api", Reason: "dialog", Action: "nothing to do; coordination-engine explain B shows what happened"},
		{Event: NeedsYou, Task: "A", Repo: "net-kingdom", Reason: "retries_exhausted",
			Action: "look at why its attempts failed, then wake it again; coordination-engine explain A"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// Nothing needs anyone: A resolved, nothing left told.
	got, told = Transitions(told, nil)
	if len(got) != 1 || got[0].Event != Resolved || got[0].Task != "A" || len(told) != 0 {
		t.Errorf("last look: %+v %+v", got, told)
	}
	if got, _ = Transitions(told, nil); len(got) != 0 {
		t.Errorf("resolved twice: %+v", got)
	}
}

func TestReasonCodes(t *testing.T) {
	for _, tt := range []struct {
		n    Need
		want string
	}{
		{Need{Gate: "secret"}, "gate_secret"},
		{Need{Gate: "policy"}, "gate_policy"},
		{Need{Skipped: true, Words: "needs you: skipped by the engine: bad deps"}, "skipped"},
		{Need{Dialog: "w"}, "dialog"},
		{Need{Wait: "no_agent"}, "no_agent"},
		{Need{Wait: "no_window"}, "no_window"},
		{Need{Words: "needs you: blocked (waiting on infra); woken again"}, "blocked"},
		{Need{Words: "needs you: blocked in State Hub"}, "blocked"},
		{Need{Words: "needs you: something new"}, "needs_you"},
	} {
		if got := tt.n.Reason(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.n, got, tt.want)
		}
	}
	if a := Action(NeedsYou, "T-1", "alpha", "gate_human"); a != "decide the gate in State Hub, or wake it through the gate (coordination-engine wake alpha --task T-1 --override-gate human); coordination-engine explain T-1" {
		t.Errorf("action %q", a)
	}
}
