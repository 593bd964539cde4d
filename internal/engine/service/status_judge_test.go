package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/service"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
)

// The loop needs State Hub observed: a running engine whose observer has
// failed since its last good look, or whose credentials State Hub refuses,
// is not healthy; a pause State Hub asked for (a rate limit) is.
func TestJudgeStateHub(t *testing.T) {
	look := time.Date(2026, 12, 6, 10, 1, 58, 0, time.UTC)
	since := look.Add(5 * time.Second)
	tests := []struct {
		name string
		hub  api.StateHubStatus
		want errs.Code // "" healthy
		says string
	}{
		{"answers", api.StateHubStatus{Reachable: true, LastPoll: &look}, "", ""},
		{"unreachable", api.StateHubStatus{LastPoll: &look, UnreachableSince: &since, ObserveError: "connection refused", APIBase: "http://127.0.0.1:8000"},
			errs.Unavailable, "State Hub unreachable since " + since.Local().Format(time.TimeOnly) + "; standings as of " + look.Local().Format(time.TimeOnly) + ": connection refused"},
		{"credentials refused", api.StateHubStatus{Reachable: true, Paused: true, ObserveError: "401"}, errs.PermissionDeny, "refused the credentials"},
		// gh not installed: no token was sent, so nothing was refused.
		{"no token", api.StateHubStatus{Reachable: true, Paused: true, ObserveError: `statehub.credential_command "gh" failed: exec: "gh": executable file not found in $PATH`},
			errs.PermissionDeny, "statehub.credential_command gave no token: "},
		{"rate limited", api.StateHubStatus{Reachable: true, RetryAt: &since, ObserveError: "secondary rate limit"}, "", ""},
	}
	for _, tt := range tests {
		r := api.StatusReport{Service: api.ServiceStatus{Running: true}, Tamq: api.TamqStatus{Reachable: true}, StateHub: tt.hub}
		err := service.Judge(&r)
		switch {
		case tt.want == "" && (err != nil || !r.Healthy):
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (!errs.Is(err, tt.want) || r.Healthy || !strings.Contains(err.Error(), tt.says)):
			t.Errorf("%s: %v (healthy %v), want %s saying %q", tt.name, err, r.Healthy, tt.want, tt.says)
		}
	}
}
