package cli

import (
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

	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/api"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/testutil"
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
	relay := &broker.Relay{Argv: []string{"sh", "-c", agent, rec}, Out: io.Discard}
	obs := &broker.Observer{Slugs: func() []string { return nil }, Emit: func(broker.Block) {}}
	model := broker.NewModel(80, 24, obs)
	sess := newSession(relay, model, obs, func() bool { return false }, "")
	done := make(chan struct{})
	go func() { relay.Run(); close(done) }()
	t.Cleanup(func() { relay.Signal(syscall.SIGKILL); <-done; model.Close() })
	testutil.WaitFor(t, "the agent's prompt", func() bool { return strings.HasPrefix(model.Snapshot().Rows[0], "$") })

	brokerEnd, service := net.Pipe()
	defer service.Close()
	go func() { sess.attach(brokerEnd); sess.serve(protocol.NewFrameReader(brokerEnd)) }()
	frames := make(chan []byte, 16)
	go func() {
		fr := protocol.NewFrameReader(service)
		for {
			f, err := fr.Next()
			if err != nil {
				close(frames)
				return
			}
			frames <- append([]byte(nil), f...)
		}
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case f := <-frames:
			var m map[string]any
			if err := json.Unmarshal(f, &m); err != nil {
				t.Fatalf("frame %q: %v", f, err)
			}
			return m
		case <-time.After(20 * time.Second):
			t.Fatal("no frame from the broker")
		}
		return nil
	}
	state := func(atPrompt bool, reason string) {
		t.Helper()
		m := next()
		args, _ := m["args"].(map[string]any)
		if m["op"] != api.OpBrokerState || args["at_prompt"] != atPrompt || !strings.Contains(fmt.Sprint(args["reason"]), reason) {
			t.Fatalf("got %v, want broker_state at_prompt=%v reason ~ %q", m, atPrompt, reason)
		}
	}
	deliver := func(id string) map[string]any {
		t.Helper()
		args, _ := json.Marshal(api.DeliverArgs{Text: "From:net: hello", PauseMS: 50, QuietMS: 20, MaxWaitMS: 500})
		frame, _ := protocol.EncodeFrame(protocol.Request{Proto: protocol.Version, Op: api.OpDeliver, ID: id, Args: args})
		if _, err := service.Write(frame); err != nil {
			t.Fatal(err)
		}
		for {
			m := next()
			if m["id"] == id {
				res, _ := m["result"].(map[string]any)
				return res
			}
		}
	}

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
