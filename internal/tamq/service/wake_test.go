package service_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func wakeRequest(lease string, attempt int, repo, prompt string) api.WakeRequest {
	return api.WakeRequest{
		LeaseID: lease, Attempt: attempt, TargetRepo: repo, CoordinationEndpointID: "ce-1",
		Trigger: api.WakeTrigger{ID: "t1", Source: "task", SourceID: "T-1", SourceRevision: "rev-7", TargetRepo: repo,
			Reason: "task_actionable", ObservedAt: time.Unix(1000, 0).UTC()},
		Prompt: prompt,
	}
}

func wake(t *testing.T, e *testutil.Env, req api.WakeRequest) (api.WakeAck, error) {
	t.Helper()
	return client.New(pathsOf(t, e)).Wake(context.Background(), req)
}

// A wake is queued once per (lease, attempt): the identical request again,
// at once, concurrently or after a restart of the service, answers with the
// original message; the same key with another request is a conflict; a new
// attempt is a new message. The prompt arrives as a coordination message in
// acknowledged mode with the trigger revision as its correlation id.
func TestWakeIsIdempotentByLeaseAndAttempt(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", e.RecorderCommand(), "net-kingdom")
	testutil.WaitFor(t, "the recorder", func() bool { _, ok := e.Recording("net-kingdom"); return ok })
	engine := startEngine(t, e)
	l1 := engine.offer("net-kingdom")

	req := wakeRequest(l1, 1, "net-kingdom", "wake up\nand continue")
	first, err := wake(t, e, req)
	if err != nil || first.Capability != api.WakeResumed || first.MessageID == "" || first.Duplicate || !strings.HasPrefix(first.SessionID, "tmux-amq-") {
		t.Fatalf("first wake: %+v %v", first, err)
	}
	var wg sync.WaitGroup
	acks := make([]api.WakeAck, 4)
	for i := range acks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := wake(t, e, req)
			if err != nil {
				t.Errorf("repeat %d: %v", i, err)
			}
			acks[i] = a
		}()
	}
	wg.Wait()
	for i, a := range acks {
		if a.MessageID != first.MessageID || !a.Duplicate {
			t.Errorf("repeat %d: %+v, want the original message %s", i, a, first.MessageID)
		}
	}
	other := req
	other.Prompt = "another prompt"
	if _, err := wake(t, e, other); !errs.Is(err, errs.Conflict) {
		t.Errorf("the same key with another prompt: %v, want a conflict", err)
	}
	waitState(t, e, first.MessageID, "awaiting_ack")
	m := stateOf(t, e, first.MessageID)
	if m.SenderKind != "coordination" || m.Sender != "coordination-engine" || m.AckMode != "acknowledged" ||
		m.CorrelationID != "rev-7" || m.CoordinationEndpointID != "ce-1" || m.IdempotencyKey != l1+"#1" {
		t.Errorf("the wake message: %+v", m)
	}
	// The Enter is sent before the state is written; the recorder takes it
	// in its own time.
	if got := waitRecorded(t, e, "net-kingdom", "\r"); got != "From:coordination-engine: wake up\nand continue\r" {
		t.Errorf("the agent received %q", got)
	}

	e.Tamq(t, "stop")
	e.Tamq(t, "start", "--detach")
	again, err := wake(t, e, req)
	if err != nil || again.MessageID != first.MessageID || !again.Duplicate {
		t.Errorf("after a restart: %+v %v", again, err)
	}
	engine.advance(l1, 2)
	next, err := wake(t, e, wakeRequest(l1, 2, "net-kingdom", "wake up\nand continue"))
	if err != nil || next.MessageID == first.MessageID || next.Duplicate {
		t.Errorf("attempt 2: %+v %v", next, err)
	}
	if n := len(history(t, e)); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
	// Attempt 1's prompt, never acknowledged, is cancelled by attempt 2:
	// it is not presented again at its ack deadline.
	if m := stateOf(t, e, first.MessageID); m.State != "cancelled" {
		t.Errorf("attempt 1's message after attempt 2: %s, want cancelled", m.State)
	}
	found := false
	for _, r := range receipts(t, e, "message.transition") {
		if r["subject_id"] == first.MessageID && r["reason"] == "superseded by a newer attempt of its lease" {
			found = true
		}
	}
	if !found {
		t.Error("no receipt says attempt 1's message was superseded")
	}
}

// What a wake cannot reach: an unregistered repo is refused; a repo with no
// window, or only a manual-mode one, is unavailable and nothing is queued; a
// malformed request or prompt is refused.
func TestWakeUnavailableAndRefused(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom") // opened in manual mode
	e.Gita(t, "railiance")
	startEngine(t, e)
	if _, err := wake(t, e, wakeRequest("L1", 1, "nowhere", "x")); !errs.Is(err, errs.UnknownTarget) {
		t.Errorf("unregistered repo: %v", err)
	}
	a, err := wake(t, e, wakeRequest("L2", 1, "net-kingdom", "x"))
	if err != nil || a.Capability != api.WakeUnavailable || !strings.Contains(a.Reason, "manual") || a.MessageID != "" {
		t.Errorf("manual window: %+v %v", a, err)
	}
	a, err = wake(t, e, wakeRequest("L3", 1, "railiance", "x"))
	if err != nil || a.Capability != api.WakeUnavailable || !strings.Contains(a.Reason, "no connected endpoint") {
		t.Errorf("no window: %+v %v", a, err)
	}
	for name, req := range map[string]api.WakeRequest{
		"attempt 0":       wakeRequest("L4", 0, "net-kingdom", "x"),
		"lease with ESC":  wakeRequest("L\x1b[2J", 1, "net-kingdom", "x"),
		"binary prompt":   wakeRequest("L5", 1, "net-kingdom", "x\x00y"),
		"oversize prompt": wakeRequest("L6", 1, "net-kingdom", strings.Repeat("x", 9000)),
	} {
		if _, err := wake(t, e, req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := len(history(t, e)); n != 0 {
		t.Errorf("%d messages queued, want none", n)
	}
}

// An agent whose program exited: a wake answers unavailable, unless tamq may
// start the window's recorded command again; then it runs again in the very
// same pane and the prompt reaches it.
func TestWakeStartsAnExitedAgentOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{false, true} {
		config := fastConfig
		if allowed {
			config += "[coordination]\nwake_restarts_agent = true\n"
		}
		e, tm := emptyWorkspace(t, config, "net-kingdom")
		// The first run exits at once; a second run records.
		ran := filepath.Join(e.Root, "ran")
		agent := "sh -c 'if [ ! -e " + ran + " ]; then touch " + ran + "; exit 0; fi; stty raw -echo; exec cat > \"" + e.Root + "/rec/$TAMQ_REPO\"'"
		e.Tamq(t, "open", "--tmux-socket", tm.Name, "--mode", "trigger", "--command", agent, "net-kingdom")
		pane := paneOf(t, tm, "net-kingdom")
		testutil.WaitFor(t, "the agent to exit", func() bool {
			return strings.TrimSpace(tm.Must(t, "display", "-p", "-t", pane, "#{pane_dead}")) == "1"
		})
		a, err := wake(t, e, wakeRequest(startEngine(t, e).offer("net-kingdom"), 1, "net-kingdom", "back to work"))
		if !allowed {
			if err != nil || a.Capability != api.WakeUnavailable || !strings.Contains(a.Reason, "exited") {
				t.Errorf("restart off: %+v %v", a, err)
			}
			continue
		}
		if err != nil || a.Capability != api.WakeStarted || a.MessageID == "" {
			t.Fatalf("restart on: %+v %v", a, err)
		}
		if got := paneOf(t, tm, "net-kingdom"); got != pane {
			t.Errorf("the agent runs in pane %s, not its own %s", got, pane)
		}
		testutil.WaitFor(t, "the prompt in the restarted agent", func() bool {
			got, _ := e.Recording("net-kingdom")
			return strings.Contains(got, "back to work")
		})
	}
}

// openJSON opens windows and returns their endpoint id.
func openJSON(t *testing.T, e *testutil.Env, args ...string) string {
	t.Helper()
	r := e.Tamq(t, append([]string{"open", "--json"}, args...)...)
	var rec struct {
		EndpointID string `json:"endpoint_id"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil || rec.EndpointID == "" {
		t.Fatalf("open --json: %v\n%s", err, r)
	}
	return rec.EndpointID
}

// Two tmux servers host the repo: a wake must name one. When that one's
// server dies, the identical wake repeated keeps its message, which moves to
// the endpoint that replaces the dead one on the same socket, never to the
// other server that hosts the repo.
func TestWakeAcrossEndpoints(t *testing.T) {
	t.Parallel()
	// A short ack deadline: the prompt, written into the dead server's
	// window, waits for it before it is delivered again.
	e, tm := emptyWorkspace(t, fastConfig+"[coordination]\nwake_ack_timeout_seconds = 1\nretry_backoff_seconds = [1]\nmax_attempts = 9\n", "alpha")
	recorder := "sh -c 'stty raw -echo; exec cat > \"" + filepath.Join(e.Root, "rec") + "/$TAMQ_REPO@$TAMQ_ENDPOINT\"'"
	first := openJSON(t, e, "--tmux-socket", tm.Name, "--mode", "trigger", "--command", recorder, "alpha")
	tm2 := testutil.NewTmux(t)
	second := openJSON(t, e, "--tmux-socket", tm2.Name, "--mode", "trigger", "--command", recorder, "alpha")
	req := wakeRequest(startEngine(t, e).offer("alpha"), 1, "alpha", "Carry on.")
	if _, err := wake(t, e, req); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "name one with endpoint_id") {
		t.Fatalf("wake with two endpoints: %v", err)
	}
	req.EndpointID = first
	ack, err := wake(t, e, req)
	if err != nil || ack.SessionID != first || ack.Capability != api.WakeResumed {
		t.Fatalf("wake naming the endpoint: %+v, %v", ack, err)
	}
	waitState(t, e, ack.MessageID, "awaiting_ack")

	killServer(t, e, tm, first)
	tm.Must(t, "new-session", "-d", "-s", "work")
	third := openJSON(t, e, "--tmux-socket", tm.Name, "--mode", "trigger", "--command", recorder, "alpha")
	a, err := wake(t, e, req)
	if err != nil || !a.Duplicate || a.MessageID != ack.MessageID {
		t.Fatalf("identical wake with a replacement: %+v, %v", a, err)
	}
	testutil.WaitFor(t, "the prompt in the replacement's window", func() bool {
		rec, _ := e.Recording("alpha@" + third)
		return strings.Contains(rec, "From:coordination-engine: Carry on.")
	})
	if rec, _ := e.Recording("alpha@" + second); rec != "" {
		t.Errorf("the other server's window received %q", rec)
	}
}
