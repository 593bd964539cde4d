package engineapi

import (
	"testing"
	"time"
)

// Standings frozen by State Hub's outage say their age; while State Hub
// answers nothing is added.
func TestStaleLineAndTmuxLine(t *testing.T) {
	look := time.Date(2026, 12, 6, 10, 1, 58, 0, time.UTC)
	since := look.Add(5 * time.Second)
	clock := func(t time.Time) string { return t.Local().Format(time.TimeOnly) }
	if got := StaleLine(nil, &look); got != "" {
		t.Errorf("State Hub up: %q", got)
	}
	if got, want := StaleLine(&since, &look), "State Hub unreachable since "+clock(since)+"; standings as of "+clock(look); got != want {
		t.Errorf("StaleLine = %q, want %q", got, want)
	}
	if got, want := StaleLine(&since, nil), "State Hub unreachable since "+clock(since)+"; no standings yet"; got != want {
		t.Errorf("StaleLine with no look = %q, want %q", got, want)
	}
	tests := []struct {
		res  TasksResult
		want string
	}{
		{TasksResult{Counts: TaskCounts{"needs_you": 3, "working": 1}}, "3 need you · 1 working"},
		{TasksResult{Counts: TaskCounts{}}, ""},
		{TasksResult{Counts: TaskCounts{"needs_you": 3}, StateHubUnreachableSince: &since}, "State Hub down · 3 need you"},
		{TasksResult{Counts: TaskCounts{"done": 2}, StateHubUnreachableSince: &since}, "State Hub down"},
	}
	for _, tt := range tests {
		if got := tt.res.TmuxLine(); got != tt.want {
			t.Errorf("TmuxLine(%+v) = %q, want %q", tt.res, got, tt.want)
		}
	}
}
