package broker

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestParseHook(t *testing.T) {
	tests := []struct {
		name, in string
		want     HookEvent
		err      bool
	}{
		{"Claude PermissionRequest", `{"session_id":"s","cwd":"/r","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf x"}}`,
			HookEvent{Event: "PermissionRequest", Tool: "Bash"}, false},
		{"Claude Notification", `{"hook_event_name":"Notification","message":"Claude needs your permission","notification_type":"permission_prompt"}`,
			HookEvent{Event: "Notification", Type: "permission_prompt"}, false},
		{"Codex notify", `{"type":"agent-turn-complete","turn-id":"1","input-messages":["hi"]}`, HookEvent{Event: "agent-turn-complete"}, false},
		{"cut short after the event", `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"content":"aaaa`,
			HookEvent{Event: "PreToolUse", Tool: "Write"}, false},
		{"values of other types", `{"hook_event_name":7,"type":"Stop","tool_name":{"x":1}}`, HookEvent{Event: "Stop"}, false},
		{"no event", `{"cwd":"/r"}`, HookEvent{}, true},
		{"not JSON", `PermissionRequest`, HookEvent{}, true},
		{"an array", `["hook_event_name"]`, HookEvent{}, true},
		{"long names are cut", `{"hook_event_name":"` + strings.Repeat("x", 500) + `"}`, HookEvent{Event: strings.Repeat("x", 64)}, false},
	}
	for _, tt := range tests {
		got, err := ParseHook([]byte(tt.in))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%s: ParseHook = %+v, %v; want %+v (error %v)", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestHookState(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var h HookState
	if d := h.Dialog(true, t0); d != "" {
		t.Fatalf("a dialog before any event: %q", d)
	}
	h.Apply(HookEvent{Event: "PermissionRequest", Tool: "Bash"}, t0)
	if d := h.Dialog(false, t0); d != "the agent asks permission for Bash (hook PermissionRequest)" {
		t.Fatalf("after PermissionRequest: %q", d)
	}
	// The screen showing the prompt does not outvote a fresh event...
	if d := h.Dialog(true, t0.Add(time.Second)); d == "" {
		t.Fatal("a fresh permission request was dropped on one screen read")
	}
	// ...but a prompt that stays HookStale retires it (Esc fires no hook).
	if d := h.Dialog(true, t0.Add(time.Second+HookStale)); d != "" {
		t.Fatalf("stale dialog kept: %q", d)
	}
	// A dialog the screen showed, then the prompt again (a person closed
	// it): retired sooner.
	h.Apply(HookEvent{Event: "PermissionRequest", Tool: "Bash"}, t0)
	if d := h.Dialog(false, t0); d == "" {
		t.Fatal("the new permission request was not taken")
	}
	h.Dialog(true, t0.Add(time.Second))
	if d := h.Dialog(true, t0.Add(time.Second+HookStaleSeen/2)); d == "" {
		t.Fatal("the prompt retired a dialog it showed before HookStaleSeen")
	}
	if d := h.Dialog(true, t0.Add(time.Second+HookStaleSeen)); d != "" {
		t.Fatalf("a dialog closed on the screen kept: %q", d)
	}
	h.Apply(HookEvent{Event: "Notification", Type: "permission_prompt"}, t0)
	h.Apply(HookEvent{Event: "PostToolUse", Tool: "Bash"}, t0)
	if d := h.Dialog(false, t0); d != "" {
		t.Fatalf("the tool ran, the dialog is answered: %q", d)
	}
	h.Apply(HookEvent{Event: "Notification", Type: "elicitation_dialog"}, t0)
	h.Apply(HookEvent{Event: "Stop"}, t0)
	if d := h.Dialog(false, t0); d != "" {
		t.Fatalf("after Stop: %q", d)
	}
	if h.Seq() != 6 {
		t.Fatalf("Seq = %d, want 6 events", h.Seq())
	}
}

func TestHookListener(t *testing.T) {
	dir, err := os.MkdirTemp("", "tamq-hk-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	got := make(chan HookEvent, 1)
	h, err := ListenHooks(HookSocketFor(dir, 4242), os.Getpid(), func(e HookEvent) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for path, mode := range map[string]os.FileMode{h.Path(): 0o600, filepath.Dir(h.Path()): 0o700} {
		if st, err := os.Lstat(path); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", path, st.Mode(), err, mode)
		}
	}
	if err := SendHook(h.Path(), HookEvent{Event: "PermissionRequest", Tool: "Bash"}, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e != (HookEvent{Event: "PermissionRequest", Tool: "Bash"}) {
			t.Errorf("got %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event never arrived")
	}
	h.Close()
	testutil.WaitFor(t, "the socket to be removed", func() bool { _, err := os.Lstat(h.Path()); return os.IsNotExist(err) })
}

// A broker that could not close (killed) leaves its socket behind; the next
// broker to listen removes it, and nothing of a process that still runs.
func TestListenHooksRemovesSocketsOfBrokersGone(t *testing.T) {
	dir, err := os.MkdirTemp("", "tamq-hk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	leave := func(pid int) string {
		path := HookSocketFor(dir, pid)
		os.MkdirAll(filepath.Dir(path), 0o700)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false) // as a killed process leaves it
		ln.Close()
		return path
	}
	stale := leave(gone.Process.Pid)
	// A live process's socket that is listened on stays (a broker run as a
	// test's process is not named tamq).
	live := HookSocketFor(dir, os.Getppid())
	lln, err := net.ListenUnix("unix", &net.UnixAddr{Name: live, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer lln.Close()
	other := filepath.Join(dir, "hooks", "notes.sock")
	plain := HookSocketFor(dir, gone.Process.Pid+1) // not a socket: not ours to remove
	for _, f := range []string{other, plain} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ListenHooks(HookSocketFor(dir, 4242), os.Getpid(), func(HookEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the socket of a broker gone is still there: %v", err)
	}
	for _, f := range []string{live, other, plain, h.Path()} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}

// Issue 37: a hook socket hears only its own window. Any process of the
// user's could write another window's socket (its path is in the agent's
// environment and the state directory), and a fake permission event made
// that window's broker hold its deliveries, keep its lease renewed and show
// the operator a dialog that did not exist. Here the broker's process is a
// sleep: this test process, not under it, is another window's.
func TestHookSocketHearsOnlyItsWindow(t *testing.T) {
	dir, err := os.MkdirTemp("", "tamq-hk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	broker := exec.Command("sleep", "60")
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Process.Kill(); broker.Wait() })
	got := make(chan HookEvent, 4)
	h, err := ListenHooks(HookSocketFor(dir, broker.Process.Pid), broker.Process.Pid, func(e HookEvent) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The write may fail: the socket may close the connection first.
	SendHook(h.Path(), HookEvent{Event: "PermissionRequest", Tool: "Bash"}, time.Second)
	testutil.WaitFor(t, "the connection to be refused", func() bool { return h.Refused() == 1 })
	select {
	case e := <-got:
		t.Errorf("an event from outside the window was heard: %+v", e)
	default:
	}
}

// Gemini CLI's hooks: a Notification of type ToolPermission opens a dialog
// (its input as Gemini CLI 0.61.0 passes it), the tool's AfterTool or the
// turn's AfterAgent answers it.
func TestGeminiHooks(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	e, err := ParseHook([]byte(`{"session_id":"s","transcript_path":"/t","cwd":"/r","hook_event_name":"Notification","timestamp":"2026-12-02T12:00:00Z","notification_type":"ToolPermission","message":"Tool run_shell_command requires editing","details":{"type":"exec","command":"touch x"}}`))
	if err != nil || e != (HookEvent{Event: "Notification", Type: "ToolPermission"}) {
		t.Fatalf("ParseHook = %+v, %v", e, err)
	}
	var h HookState
	for _, closing := range []string{"AfterTool", "AfterAgent", "BeforeAgent"} {
		h.Apply(e, t0)
		if d := h.Dialog(false, t0); d != "the agent waits for an answer (hook Notification ToolPermission)" {
			t.Fatalf("after ToolPermission: %q", d)
		}
		h.Apply(HookEvent{Event: closing, Tool: "run_shell_command"}, t0)
		if d := h.Dialog(false, t0); d != "" {
			t.Errorf("after %s the dialog is still open: %q", closing, d)
		}
	}
}

// Issue 40: a tmux server killed with its windows takes every broker with
// it and leaves their sockets; the service sweeps them as it starts. A
// socket whose pid runs again as another program (not a broker, nobody
// listening) goes too; a live broker's stays.
func TestSweepHooksAtServiceStart(t *testing.T) {
	dir, err := os.MkdirTemp("", "tamq-hk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	leave := func(pid int) string {
		path := HookSocketFor(dir, pid)
		os.MkdirAll(filepath.Dir(path), 0o700)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false) // as a killed process leaves it
		ln.Close()
		return path
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// A process that is no broker, under a pid a broker once had.
	other := exec.Command("sleep", "60")
	// A live broker: its command line is `tamq broker --repo r -- agent`
	// (sh reading the script "broker", run with argv[0] "tamq").
	if err := os.WriteFile(filepath.Join(dir, "broker"), []byte("sleep 60\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	live := &exec.Cmd{Path: "/bin/sh", Args: []string{"tamq", "broker", "--repo", "r", "--", "agent"}, Dir: dir}
	for _, c := range []*exec.Cmd{other, live} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	testutil.WaitFor(t, "the broker's command line", func() bool { return runsBroker(live.Process.Pid) })
	stale, reused, kept := leave(gone.Process.Pid), leave(other.Process.Pid), leave(live.Process.Pid)
	SweepHooks(dir)
	for _, f := range []string{stale, reused} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", f, err)
		}
	}
	if _, err := os.Lstat(kept); err != nil {
		t.Errorf("a live broker's socket was removed: %v", err)
	}
}
