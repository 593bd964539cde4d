package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The status report comes from the service, the database and tmux: every
// name, path and error in it is printed escaped, one line each.
func TestPrintStatusEscapes(t *testing.T) {
	const evil = "evil\x1b]52;c;aGk=\a\u202e\n"
	var out bytes.Buffer
	a := &app.App{Program: paths.Tamq, Out: &out}
	printStatus(a, api.StatusReport{
		Config:   api.ConfigStatus{Error: "config " + evil},
		Service:  api.ServiceStatus{Socket: "/run/" + evil, PolicyProfile: evil},
		SQLite:   api.SQLiteStatus{Error: "db " + evil},
		Registry: api.RegistryStatus{Error: "registry " + evil},
		Queue:    api.QueueStatus{Error: "queue " + evil},
		Endpoints: []api.Endpoint{{ID: "tmux-amq-1" + evil, State: "connected", TmuxSocket: "/tmp/" + evil,
			Windows: []api.EndpointWindow{{Repo: evil, WindowID: "@1" + evil, PaneID: "%1", Command: evil, WaitReason: evil, Waiting: 1}}}},
	})
	got := out.String()
	if !textsafe.Inert(got) {
		t.Errorf("status output could act in a terminal:\n%q", got)
	}
	if !strings.Contains(got, `  evil\x1b]52;c;aGk=\x07\u202e\x0a: window @1evil`) {
		t.Errorf("the window's repo is not shown escaped:\n%s", got)
	}
	// Escaped line breaks keep one line per item.
	if n := strings.Count(got, "\n"); n != 14 {
		t.Errorf("%d lines, want 14:\n%s", n, got)
	}
}
