package service

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil/standin"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// A window recorded in trigger mode whose command is a shell, or a wrapper
// that runs one (recorded before tamq refused that, and restored as
// recorded; issue 37: `script`), takes no wake: the shell would run the
// prompt. Nothing is queued.
func TestWakeRefusesAWindowThatRunsAShell(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// The test stands in for coordination-engine: only its process wakes.
	engine := paths.Paths{Program: paths.Engine, Socket: filepath.Join(root, "engine", "coordination-engine.sock")}
	standin.Serve(t, engine.Socket)
	svc, p, _ := inProcessService(t, root, Options{Writer: discardWriter{}, Engine: engine})
	ctx := context.Background()
	// The endpoint's pane %0 is tmux's first window, a shell: marked as the
	// repo's window, it is what a trigger-mode window without a command was.
	eps, err := svc.endpoints.known(ctx)
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints %v, %v", eps, err)
	}
	if out, err := exec.Command("tmux", "-S", eps[0].TmuxSocket, "set-option", "-w", "-t", "%0", tmux.RepoOption, "net-kingdom").CombinedOutput(); err != nil {
		t.Fatalf("marking the window: %v %s", err, out)
	}
	for i, command := range []string{"", "bash -l", "script -q /dev/null", "ssh -t host"} {
		eps, err := svc.endpoints.known(ctx)
		if err != nil || len(eps) != 1 {
			t.Fatalf("endpoints %v, %v", eps, err)
		}
		ep := eps[0]
		ep.Windows = []queue.Window{ep.Windows[0]}
		ep.Windows[0].Mode, ep.Windows[0].Command = queue.Trigger, command
		if err := svc.store.Endpoints.Register(ctx, ep); err != nil {
			t.Fatal(err)
		}
		svc.endpoints.changed()
		ack, err := client.New(p).Wake(ctx, api.WakeRequest{LeaseID: "L1", Attempt: i + 1, TargetRepo: "net-kingdom", CoordinationEndpointID: "ce-1",
			Trigger: api.WakeTrigger{ID: "t1", Source: "task", SourceID: "T-1", SourceRevision: "r1", TargetRepo: "net-kingdom",
				Reason: "task_actionable", ObservedAt: time.Unix(1000, 0).UTC()},
			Prompt: "Task T-1 \"$(id > /tmp/x)\""})
		want := "the window of net-kingdom runs a shell, not an agent"
		if i >= 2 {
			want = "the window of net-kingdom runs " + strings.Fields(command)[0] + " ("
		}
		if err != nil || ack.Capability != api.WakeUnavailable || ack.MessageID != "" || !strings.HasPrefix(ack.Reason, want) {
			t.Errorf("wake of a trigger-mode window running %q: %+v, %v", command, ack, err)
		}
	}
}

// Only coordination-engine's own process wakes: a wake from any other
// process of the user (here the test, while the engine is another process)
// is refused, and nothing is queued or typed.
func TestOnlyTheEngineWakes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	engine := paths.Paths{Program: paths.Engine, Socket: filepath.Join(root, "engine", "coordination-engine.sock")}
	standin.ServeAs(t, engine.Socket, 1) // the engine is pid 1, not the test
	svc, p, _ := inProcessService(t, root, Options{Writer: discardWriter{}, Engine: engine})
	ctx := context.Background()
	_, err := client.New(p).Wake(ctx, api.WakeRequest{LeaseID: "L1", Attempt: 1, TargetRepo: "net-kingdom", CoordinationEndpointID: "ce-1",
		Trigger: api.WakeTrigger{ID: "t1", Source: "task", SourceID: "T-1", SourceRevision: "r1", TargetRepo: "net-kingdom",
			Reason: "task_actionable", ObservedAt: time.Unix(1000, 0).UTC()},
		Prompt: "-----BEGIN OPENSSH PRIVATE KEY-----\nfake engine prompt"})
	if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), "only coordination-engine's own process may wake an agent") {
		t.Fatalf("a wake from another process: %v, want permission_denied", err)
	}
	if _, err := client.New(p).CancelWake(ctx, api.CancelWakeArgs{LeaseID: "L1", Attempt: 1}); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("a cancel from another process: %v, want permission_denied", err)
	}
	var n int
	if err := svc.db.Reader.QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d messages queued (%v), want none", n, err)
	}
}
