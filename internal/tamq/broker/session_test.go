package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/tamq/program"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// The broker's side of its session, over a real connection, with a real
// agent under a real PTY: the service's end is the test. The broker says
// where its agent is when the session opens and whenever that changes,
// refuses a delivery while a dialog shows (writing nothing), and delivers
// once the dialog is gone.
func TestSessionReportsTheAgentAndHoldsDeliveries(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	agent := `printf '$ '; read a; printf 'Pick one:\n> 1. One\n  2. Two\nPress enter to continue\n'; read b; ` +
		`clear; stty raw -echo; exec cat > "$0"`
	relay := &Relay{Argv: []string{"sh", "-c", agent, rec}, Out: io.Discard}
	obs := &Observer{Slugs: func() []string { return nil }, Emit: func(Block) {}}
	model := NewModel(80, 24, obs)
	fg := &Foreground{PID: relay.ChildPID, Argv: relay.Argv, Command: program.ArgvCommand(relay.Argv)}
	sess := newSession(relay, model, obs, func() bool { return false }, fg)
	done := make(chan struct{})
	go func() { relay.Run(); close(done) }()
	t.Cleanup(func() { relay.Signal(syscall.SIGKILL); <-done; model.Close() })
	testutil.WaitFor(t, "the agent's prompt", func() bool { return strings.HasPrefix(model.Snapshot().Rows[0], "$") })

	h := attachSession(t, sess)
	state, deliver := h.state, func(id string) map[string]any { return h.deliver(id, "From:net: hello") }
	state(true, "") // on attach
	relay.WriteInput([]byte("go\r"))
	state(false, `a dialog shows: "> 1. One"`)
	if res := deliver("1"); res["not_ready"] != true || res["written"] != false || !strings.Contains(res["reason"].(string), "a dialog shows") {
		t.Fatalf("delivery into a dialog: %v", res)
	}
	// After a not_ready answer the view goes out again, unchanged or not: the
	// service holds the window on the answer until a report after it.
	state(false, `a dialog shows: "> 1. One"`)
	relay.WriteInput([]byte("2\r"))
	state(true, "")
	testutil.WaitFor(t, "the recorder", func() bool { _, err := os.Stat(rec); return err == nil })
	if res := deliver("2"); res["written"] != true {
		t.Fatalf("delivery at the prompt: %v", res)
	}
	testutil.WaitFor(t, "the delivery to arrive", func() bool { b, _ := os.ReadFile(rec); return string(b) == "From:net: hello\r" })
}

// sessionEnd is the service's end of a broker session, for tests.
type sessionEnd struct {
	t       *testing.T
	service net.Conn
	frames  chan []byte
}

// attachSession attaches sess to a pipe whose other end the test holds.
func attachSession(t *testing.T, sess *session) *sessionEnd {
	brokerEnd, service := net.Pipe()
	t.Cleanup(func() { service.Close() })
	go func() { sess.attach(brokerEnd); sess.serve(unixrpc.NewFrameReader(brokerEnd)) }()
	h := &sessionEnd{t: t, service: service, frames: make(chan []byte, 16)}
	go func() {
		fr := unixrpc.NewFrameReader(service)
		for {
			f, err := fr.Next()
			if err != nil {
				close(h.frames)
				return
			}
			h.frames <- append([]byte(nil), f...)
		}
	}()
	return h
}

// next is the next frame the broker sent.
func (h *sessionEnd) next() map[string]any {
	h.t.Helper()
	select {
	case f := <-h.frames:
		var m map[string]any
		if err := json.Unmarshal(f, &m); err != nil {
			h.t.Fatalf("frame %q: %v", f, err)
		}
		return m
	case <-time.After(20 * time.Second):
		h.t.Fatal("no frame from the broker")
	}
	return nil
}

// state expects the next frame to be a broker_state notification.
func (h *sessionEnd) state(atPrompt bool, reason string) map[string]any {
	h.t.Helper()
	m := h.next()
	args, _ := m["args"].(map[string]any)
	if m["op"] != api.OpBrokerState || args["at_prompt"] != atPrompt || !strings.Contains(fmt.Sprint(args["reason"]), reason) {
		h.t.Fatalf("got %v, want broker_state at_prompt=%v reason ~ %q", m, atPrompt, reason)
	}
	return args
}

// deliver asks the broker to write text and returns its answer.
func (h *sessionEnd) deliver(id, text string) map[string]any {
	h.t.Helper()
	args, _ := json.Marshal(api.DeliverArgs{Text: text, PauseMS: 50, QuietMS: 20, MaxWaitMS: 500})
	frame, _ := unixrpc.EncodeFrame(unixrpc.Request{Proto: unixrpc.Version, Op: api.OpDeliver, ID: id, Args: args})
	if _, err := h.service.Write(frame); err != nil {
		h.t.Fatal(err)
	}
	for {
		m := h.next()
		if m["id"] == id {
			res, _ := m["result"].(map[string]any)
			return res
		}
	}
}

// A window whose foreground program is a shell gets no delivery: the broker
// says no agent runs, and answers a delivery not_ready without writing a
// byte (a multi-line message would run line by line). An agent started by
// hand in that shell (here cat, named in delivery.agent_programs) is the
// window's agent while it runs: the broker says so, and the delivery goes in;
// once it exits the window is a shell again.
func TestSessionDeliversOnlyToAnAgentInTheForeground(t *testing.T) {
	dir := t.TempDir()
	rec, ran := filepath.Join(dir, "rec"), filepath.Join(dir, "ran")
	relay := &Relay{Argv: []string{"sh", "-i"}, Env: append(os.Environ(), "PS1=$ ", "ENV="), Dir: dir, Out: io.Discard}
	obs := &Observer{Slugs: func() []string { return nil }, Emit: func(Block) {}}
	model := NewModel(80, 24, obs)
	fg := &Foreground{PID: relay.ChildPID, Argv: relay.Argv, Command: program.ArgvCommand(relay.Argv), Extra: []string{"cat"}}
	sess := newSession(relay, model, obs, func() bool { return false }, fg)
	done := make(chan struct{})
	go func() { relay.Run(); close(done) }()
	t.Cleanup(func() { relay.Signal(syscall.SIGKILL); <-done; model.Close() })
	testutil.WaitFor(t, "the shell's prompt", func() bool { return strings.HasPrefix(model.Snapshot().Rows[0], "$") })

	// The foreground changes without output (cat starts and prints
	// nothing): the broker looks again on a timer.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go sess.watch(ctx, 50*time.Millisecond)
	h := attachSession(t, sess)
	if st := h.state(false, program.NoAgentRunning); st["no_agent"] != true || st["program"] != "sh" {
		t.Fatalf("the shell's state: %v", st)
	}
	res := h.deliver("1", "From:operator/o: hello\ntouch "+ran)
	if res["not_ready"] != true || res["written"] != false || res["maybe_written"] != false || res["reason"] != program.NoAgentRunning {
		t.Fatalf("delivery into a shell: %v", res)
	}
	h.state(false, program.NoAgentRunning) // the view after every not_ready
	// The operator starts an agent by hand in the shell.
	relay.WriteInput([]byte("cat > rec\r"))
	if st := h.state(true, ""); st["no_agent"] == true || st["program"] != "cat" {
		t.Fatalf("the agent's state: %v", st)
	}
	if res := h.deliver("2", "From:operator/o: hello\ntouch "+ran); res["written"] != true {
		t.Fatalf("delivery to the agent: %v", res)
	}
	h.state(true, "") // the view after every answer
	testutil.WaitFor(t, "the delivery to arrive", func() bool {
		b, _ := os.ReadFile(rec)
		return string(b) == "From:operator/o: hello\ntouch "+ran+"\n"
	})
	relay.WriteInput([]byte{4}) // ^D: the agent exits, the shell is back
	h.state(false, program.NoAgentRunning)
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the shell ran a line of a message: %v", err)
	}
}
