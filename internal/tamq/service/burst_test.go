package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/proc"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// heldRecorder is the recorder agent (RecorderCommand) with bracketed paste
// turned on, which also writes the path of its terminal next to its
// recording: a test prints on that terminal as the agent would, a dialog
// marker to hold the window's deliveries and a cleared screen to let them
// go, so messages pile up for the window as they do behind a busy agent.
func heldRecorder(e *testutil.Env) string {
	rec := filepath.Join(e.Root, "rec")
	return `printf '\033[?2004hready'; tty > "` + rec + `/$TAMQ_REPO.tty"; stty raw -echo; exec cat > "` + rec + `/$TAMQ_REPO"`
}

// heldWindow is a window running heldRecorder.
type heldWindow struct {
	e    *testutil.Env
	repo string
}

// openHeld opens heldRecorder windows for repos (extra open flags first)
// and waits until each records and its broker is attached and has seen the
// bracketed paste switch.
func openHeld(t testing.TB, e *testutil.Env, tm *testutil.Tmux, flags []string, repos ...string) map[string]*heldWindow {
	t.Helper()
	args := append(append([]string{"open", "--tmux-socket", tm.Name, "--command", heldRecorder(e)}, flags...), repos...)
	e.Tamq(t, args...)
	out := map[string]*heldWindow{}
	for _, r := range repos {
		pane := paneOf(t, tm, r)
		testutil.WaitFor(t, "the held recorder of "+r, func() bool {
			screen, _ := tm.Cmd("capture-pane", "-p", "-t", pane)
			_, recording := e.Recording(r)
			return recording && strings.Contains(string(screen), "ready")
		})
		out[r] = &heldWindow{e: e, repo: r}
	}
	testutil.WaitFor(t, "the brokers to attach", func() bool { return brokersAttached(t, e) == len(repos) })
	return out
}

// print writes s on the agent's terminal, as the agent printing it.
func (h *heldWindow) print(t testing.TB, s string) {
	t.Helper()
	path, err := os.ReadFile(filepath.Join(h.e.Root, "rec", h.repo+".tty"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(strings.TrimSpace(string(path)), os.O_WRONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// hold shows a dialog, and returns once the service holds the window's
// deliveries for it.
func (h *heldWindow) hold(t testing.TB) {
	t.Helper()
	h.print(t, "\r\nPress enter to continue")
	testutil.WaitFor(t, "the window to be held", func() bool {
		_, w := windowStatus(t, h.e, h.repo)
		return strings.Contains(w.WaitReason, "Press enter to continue")
	})
}

// release clears the screen: the agent is back at its prompt.
func (h *heldWindow) release(t testing.TB) { h.print(t, "\x1b[2J\x1b[H") }

// pastes splits a recording into its deliveries: each is a bracketed paste
// followed by one Enter. A recording that does not end a paste's Enter
// fails the test.
func pastes(t *testing.T, rec string) []string {
	t.Helper()
	var out []string
	for rec != "" {
		body, rest, ok := strings.Cut(rec, "\x1b[201~\r")
		if !ok || !strings.HasPrefix(body, "\x1b[200~") || strings.Count(body, "\x1b[200~") != 1 || strings.Contains(body, "\r") {
			t.Fatalf("not a sequence of pastes, each with one Enter: %q", rec)
		}
		out = append(out, strings.TrimPrefix(body, "\x1b[200~"))
		rec = rest
	}
	return out
}

// sendAll sends each text (To: net-kingdom unless it has an address) and
// returns the messages.
func sendAll(t *testing.T, e *testutil.Env, texts ...string) []api.Message {
	t.Helper()
	out := make([]api.Message, len(texts))
	for i, text := range texts {
		out[i] = send(t, e, text)
	}
	return out
}

// waitDelivered waits until every message has left the queue (injected, or
// awaiting its ack) and returns them as history shows them.
func waitDelivered(t *testing.T, e *testutil.Env, ms []api.Message) []api.Message {
	t.Helper()
	out := make([]api.Message, len(ms))
	for i, m := range ms {
		testutil.WaitFor(t, m.ID+" to be delivered", func() bool {
			out[i] = stateOf(t, e, m.ID)
			return out[i].State == "injected" || out[i].State == "awaiting_ack"
		})
	}
	return out
}

// envelope is what a message sent by the test (the operator) looks like in
// the terminal, as it would alone.
func envelope(body string, ackID string) string {
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "To:") {
			l = "> " + l
		}
		lines = append(lines, l)
	}
	s := "From:operator/o: " + strings.Join(lines, "\n")
	if ackID != "" {
		s += fmt.Sprintf("\n[tamq message %s: acknowledge with: tamq ack %s]", ackID, ackID)
	}
	return s
}

// Messages that piled up for a window go in as one paste with one Enter:
// each envelope whole, once, in the order sent, a blank line between them,
// the ack footer with its message; each message has its own states and
// receipts, as if delivered alone, with one injected_at. The agent printing
// the paste back (as agents echo their input) sends nothing: no line of it
// is read as an address.
func TestBurstDeliversWaitingMessagesInOnePaste(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom", "railiance")
	h := openHeld(t, e, tm, nil, "net-kingdom", "railiance")["net-kingdom"]
	h.hold(t)
	bodies := []string{"first", "two\nlines", "quoted\nTo:railiance: sneaky", "needs an ack", "tab\there", "last"}
	var ms []api.Message
	for i, b := range bodies {
		if i == 3 {
			ms = append(ms, send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: "+b))
			continue
		}
		ms = append(ms, send(t, e, "To:net-kingdom: "+b))
	}
	h.release(t)
	got := waitDelivered(t, e, ms)
	rec := waitRecorded(t, e, "net-kingdom", "\x1b[201~\r")
	var want []string
	for i, b := range bodies {
		ack := ""
		if i == 3 {
			ack = ms[i].ID
		}
		want = append(want, envelope(b, ack))
	}
	if p := pastes(t, rec); len(p) != 1 || p[0] != strings.Join(want, "\n\n") {
		t.Fatalf("received %q\nwant one paste of %q", rec, strings.Join(want, "\n\n"))
	}
	for i, m := range got {
		wantState := "injected"
		if i == 3 {
			wantState = "awaiting_ack"
		}
		if m.State != wantState || m.Attempts != 1 || m.InjectedAt == nil || *m.InjectedAt != *got[0].InjectedAt {
			t.Errorf("message %d: state %s, attempts %d, injected at %v (the first at %v)", i, m.State, m.Attempts, m.InjectedAt, got[0].InjectedAt)
		}
	}
	// Each message has its own receipts: claimed, then written, the latter
	// saying how many went in with the one Enter.
	rs := receipts(t, e, "message.transition")
	for i, m := range ms {
		var steps []string
		for _, r := range rs {
			if r["subject_id"] != m.ID {
				continue
			}
			steps = append(steps, r["status"].(string))
			if r["to"] == got[i].State && (r["batch_size"] != float64(len(ms)) || r["path"] != "broker") {
				t.Errorf("%s: written receipt %v", m.ID, r)
			}
		}
		if want := []string{"queued", "delivering", got[i].State}; !slices.Equal(steps, want) {
			t.Errorf("%s: receipts %v, want %v", m.ID, steps, want)
		}
	}
	e.Tamq(t, "ack", ms[3].ID)

	// The agent echoes the paste, as is and with the quote marks gone: no
	// block. The sentinel after it is the one message the window sends.
	echo := strings.Join(want, "\n\n")
	echo += "\n\n" + strings.ReplaceAll(echo, "> To:", "To:")
	h.print(t, strings.ReplaceAll(echo, "\n", "\r\n")+"\r\n\r\nTo:railiance: sentinel\r\n\r\n")
	defer func() {
		if t.Failed() {
			out, _ := tm.Cmd("capture-pane", "-p", "-t", paneOf(t, tm, "net-kingdom"))
			t.Logf("screen:\n%s", out)
			for _, m := range history(t, e, "--body") {
				t.Logf("%s %s %s %q", m.Sender, m.Target, m.State, *m.Body)
			}
		}
	}()
	testutil.WaitFor(t, "the sentinel", func() bool {
		return slices.ContainsFunc(history(t, e, "--body"), func(m api.Message) bool { return m.Body != nil && *m.Body == "sentinel" })
	})
	for _, m := range history(t, e, "--body") {
		if m.Sender == "net-kingdom" && (m.Body == nil || *m.Body != "sentinel") {
			t.Errorf("the echoed paste was read as a message: %+v", m)
		}
	}
}

// A batch takes at most delivery.max_batch messages and at most 8 KiB of
// terminal text; what does not fit goes in the next paste, in order.
func TestBurstSplitsAtTheCountAndSizeLimits(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig+"max_batch = 3\n", "net-kingdom")
	h := openHeld(t, e, tm, nil, "net-kingdom")["net-kingdom"]
	h.hold(t)
	var texts []string
	for i := range 7 {
		texts = append(texts, fmt.Sprintf("To:net-kingdom: small %d", i))
	}
	small := sendAll(t, e, texts...)
	h.release(t)
	waitDelivered(t, e, small)
	rec := waitRecorded(t, e, "net-kingdom", "small 6\x1b[201~\r")
	var sizes []int
	for _, p := range pastes(t, rec) {
		sizes = append(sizes, strings.Count(p, "From:"))
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("pastes of %v messages: %q", sizes, rec)
	}
	for i, m := range small {
		if !strings.Contains(rec, envelope(fmt.Sprintf("small %d", i), "")) || m.Attempts > 1 {
			t.Errorf("small %d missing or tried twice", i)
		}
	}

	// Three bodies of 3000 bytes: two fit in 8 KiB, the third goes alone.
	h.hold(t)
	before, _ := e.Recording("net-kingdom")
	texts = nil
	for i := range 3 {
		texts = append(texts, fmt.Sprintf("To:net-kingdom: big %d ", i)+strings.Repeat("x", 3000))
	}
	big := sendAll(t, e, texts...)
	h.release(t)
	waitDelivered(t, e, big)
	rec = waitRecorded(t, e, "net-kingdom", "big 2 "+strings.Repeat("x", 3000)+"\x1b[201~\r")
	p := pastes(t, rec[len(before):])
	if len(p) != 2 || p[0] != envelope(texts[0][len("To:net-kingdom: "):], "")+"\n\n"+envelope(texts[1][len("To:net-kingdom: "):], "") ||
		p[1] != envelope(texts[2][len("To:net-kingdom: "):], "") {
		t.Errorf("the big messages went in as %d pastes of %v bytes", len(p), lengths(p))
	}
}

func lengths(ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		out[i] = len(s)
	}
	return out
}

// A batch is one window's: messages for two windows that piled up together
// go to each in its own paste, never one's into the other.
func TestBurstNeverMixesTargets(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "alpha", "beta")
	hs := openHeld(t, e, tm, nil, "alpha", "beta")
	hs["alpha"].hold(t)
	hs["beta"].hold(t)
	var texts []string
	for i := range 8 {
		texts = append(texts, fmt.Sprintf("To:%s: m%d", []string{"alpha", "beta"}[i%2], i))
	}
	ms := sendAll(t, e, texts...)
	hs["alpha"].release(t)
	hs["beta"].release(t)
	waitDelivered(t, e, ms)
	for r, want := range map[string]string{
		"alpha": "From:operator/o: m0\n\nFrom:operator/o: m2\n\nFrom:operator/o: m4\n\nFrom:operator/o: m6",
		"beta":  "From:operator/o: m1\n\nFrom:operator/o: m3\n\nFrom:operator/o: m5\n\nFrom:operator/o: m7",
	} {
		if p := pastes(t, waitRecorded(t, e, r, "\x1b[201~\r")); len(p) != 1 || p[0] != want {
			t.Errorf("%s received %q, want %q", r, p, want)
		}
	}
}

// A wake goes alone: the messages before it go in a paste of their own,
// then the wake's prompt, which ends with the command that acknowledges it,
// then the ones after it.
func TestBurstSendsAWakeAlone(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	h := openHeld(t, e, tm, []string{"--mode", "trigger"}, "net-kingdom")["net-kingdom"]
	h.hold(t)
	ms := sendAll(t, e, "To:net-kingdom: before 1", "To:net-kingdom: before 2")
	l1 := startEngine(t, e).offer("net-kingdom")
	ack, err := client.New(pathsOf(t, e)).Wake(context.Background(), wakeRequest(l1, 1, "net-kingdom", "wake up\nlease ack L1"))
	if err != nil || ack.MessageID == "" {
		t.Fatalf("wake: %+v %v", ack, err)
	}
	ms = append(ms, sendAll(t, e, "To:net-kingdom: after 1", "To:net-kingdom: after 2")...)
	h.release(t)
	waitDelivered(t, e, ms)
	waitState(t, e, ack.MessageID, "awaiting_ack")
	want := []string{
		"From:operator/o: before 1\n\nFrom:operator/o: before 2",
		"From:coordination-engine: wake up\nlease ack L1",
		"From:operator/o: after 1\n\nFrom:operator/o: after 2",
	}
	if p := pastes(t, waitRecorded(t, e, "net-kingdom", "after 2\x1b[201~\r")); !slices.Equal(p, want) {
		t.Errorf("received %q, want %q", p, want)
	}
}

// The agent exits while a batch goes in: every message of it ends as it
// would alone (none left delivering, each with its one attempt, all alike),
// and what is queued behind waits for the window with the reason.
func TestBurstWhenTheAgentExitsMidBatch(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	rec := filepath.Join(e.Root, "rec")
	// The recorder reads once (part of the paste at most) and exits.
	agent := `printf '\033[?2004hready'; tty > "` + rec + `/$TAMQ_REPO.tty"; stty raw -echo; head -c 40 > "` + rec + `/$TAMQ_REPO"`
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	pane := paneOf(t, tm, "net-kingdom")
	testutil.WaitFor(t, "the agent", func() bool {
		screen, _ := tm.Cmd("capture-pane", "-p", "-t", pane)
		return strings.Contains(string(screen), "ready")
	})
	testutil.WaitFor(t, "the broker to attach", func() bool { return brokersAttached(t, e) == 1 })
	h := &heldWindow{e: e, repo: "net-kingdom"}
	h.hold(t)
	ms := sendAll(t, e, "To:net-kingdom: one "+strings.Repeat("a", 100), "To:net-kingdom: two "+strings.Repeat("b", 100))
	ms = append(ms, send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: three"))
	h.release(t)
	var got []api.Message
	testutil.WaitFor(t, "the batch's outcome", func() bool {
		got = got[:0]
		for _, m := range ms {
			got = append(got, stateOf(t, e, m.ID))
		}
		return !slices.ContainsFunc(got, func(m api.Message) bool { return m.State == "delivering" || m.State == "queued" && m.Attempts == 0 })
	})
	// Alone, a message whose text may have partly arrived fails in injected
	// mode and waits for its ack in acknowledged mode; one fully written is
	// injected; one not written at all is queued again after its backoff.
	outcome := func(m api.Message) string {
		switch {
		case m.State == "failed" && m.AckMode == "injected", m.State == "awaiting_ack" && m.LastError != "":
			return "maybe written"
		case m.State == "injected", m.State == "awaiting_ack":
			return "written"
		case m.State == "queued":
			return "not written"
		}
		return "unexpected " + m.State
	}
	for _, m := range got {
		if outcome(m) != outcome(got[0]) || strings.HasPrefix(outcome(m), "unexpected") || m.Attempts != 1 {
			t.Errorf("%s: %s (attempts %d, %q); the batch's first: %s", m.ID, outcome(m), m.Attempts, m.LastError, outcome(got[0]))
		}
	}
	// The window's agent is gone: a new message waits, saying why.
	later := send(t, e, "To:net-kingdom: later")
	testutil.WaitFor(t, "the later message to wait for the window", func() bool {
		return strings.Contains(stateOf(t, e, later.ID).LastError, "exited")
	})
}

// The service is killed (SIGKILL) while a batch sits between its paste and
// its Enter: the broker finishes the delivery and, when the next start's
// session opens, says what it wrote, so the batch arrives once, each of its
// messages is recorded as written by that answer (its receipt says so) with
// its one attempt, and messages sent later arrive once, after it.
func TestBurstInterruptedByACrashArrivesOnce(t *testing.T) {
	t.Parallel()
	// The broker holds the window for the Enter's pause, so the pause bounds
	// how slow the test may be between seeing the paste and the kill
	// (nothing but a poll: the pid is asked for before).
	e, tm := emptyWorkspace(t, "[delivery]\nenter_pause_ms = 2000\n", "net-kingdom")
	h := openHeld(t, e, tm, nil, "net-kingdom")["net-kingdom"]
	pid := pingPID(t, e)
	h.hold(t)
	var texts []string
	for i := range 5 {
		texts = append(texts, fmt.Sprintf("To:net-kingdom: crash %d", i))
	}
	ms := sendAll(t, e, texts...)
	h.release(t)
	// The paste is in; its Enter waits out the pause.
	waitRecorded(t, e, "net-kingdom", "crash 4\x1b[201~")
	syscall.Kill(pid, syscall.SIGKILL)
	testutil.WaitFor(t, "the service to die", func() bool { return proc.Exited(pid) })
	for _, m := range ms {
		if st := stateOf(t, e, m.ID); st.State != "delivering" {
			t.Fatalf("%s is %s at the crash, want delivering", m.ID, st.State)
		}
	}
	e.Tamq(t, "start", "--detach")
	got := waitDelivered(t, e, ms)
	// One window takes its deliveries in order: once a later message is in,
	// the batch written again would be too.
	after := send(t, e, "To:net-kingdom: after the crash")
	waitState(t, e, after.ID, "injected")
	rec := waitRecorded(t, e, "net-kingdom", "after the crash\x1b[201~\r")
	defer func() {
		if t.Failed() {
			t.Logf("%q", rec)
			for _, r := range receipts(t, e, "message.transition") {
				t.Logf("%v", r)
			}
		}
	}()
	batch := strings.Join([]string{envelope("crash 0", ""), envelope("crash 1", ""), envelope("crash 2", ""), envelope("crash 3", ""), envelope("crash 4", "")}, "\n\n")
	if p := pastes(t, rec); len(p) != 2 || p[0] != batch || p[1] != envelope("after the crash", "") {
		t.Errorf("received %d pastes, want the batch once, then the later message", len(p))
	}
	for i, m := range got {
		if m.State != "injected" || m.Attempts != 1 {
			t.Errorf("crash %d: %s after %d attempts, want injected after 1", i, m.State, m.Attempts)
		}
	}
	settled := map[any]bool{}
	for _, r := range receipts(t, e, "message.transition") {
		if r["to"] == "injected" && r["settled"] != nil && r["path"] == "broker" && r["batch_size"] == float64(len(ms)) {
			settled[r["subject_id"]] = true
		}
	}
	if len(settled) != len(ms) {
		t.Errorf("%d of %d messages recorded as written by their broker's answer after the restart", len(settled), len(ms))
	}
}

// BenchmarkBurstDrain queues 100 messages for one window while its agent
// shows a dialog, then clears it, and times from then until every message is
// injected and the agent has received every envelope whole: batched (the
// shipped delivery.max_batch) against one at a time (max_batch = 1) in the
// same run, both with the shipped delivery timing. Target: under 5 s.
func BenchmarkBurstDrain(b *testing.B) {
	const n = 100
	drain := func(config string) time.Duration {
		e := testutil.NewEnv(b)
		e.WriteConfig(b, config)
		e.Gita(b, "net-kingdom")
		tm := testutil.NewTmux(b)
		defer e.Run(b, "tamq", "stop")
		h := openHeld(b, e, tm, nil, "net-kingdom")["net-kingdom"]
		c := client.New(pathsOf(b, e))
		var total time.Duration
		var want []string
		for i := 0; i < b.N; i++ {
			h.hold(b)
			for j := range n {
				body := fmt.Sprintf("burst %d.%03d: the build of commit %07x is green; please rebase", i, j, j*7919)
				if _, err := c.Send(context.Background(), api.SendArgs{Text: "To:net-kingdom: " + body}); err != nil {
					b.Fatal(err)
				}
				want = append(want, envelope(body, ""))
			}
			start := time.Now()
			h.release(b)
			db := readerOf(b, e)
			// The drain's end, looked for every 5 ms at most: the deadline
			// is a safety net only.
			var left int
			if !testutil.WithinEvery(5*time.Minute, 5*time.Millisecond, func() bool {
				if err := db.QueryRow(`SELECT count(*) FROM messages WHERE state <> 'injected'`).Scan(&left); err != nil {
					b.Fatal(err)
				}
				rec, _ := e.Recording("net-kingdom")
				return left == 0 && strings.HasSuffix(rec, "\x1b[201~\r") && everyEnvelope(rec, want)
			}) {
				b.Fatalf("%d messages not injected after %v", left, time.Since(start))
			}
			total += time.Since(start)
		}
		return total / time.Duration(b.N)
	}
	b.ResetTimer()
	batched := drain("")
	single := drain("[delivery]\nmax_batch = 1\n")
	b.StopTimer()
	b.ReportMetric(batched.Seconds(), "s/100-batched")
	b.ReportMetric(single.Seconds(), "s/100-one-at-a-time")
	b.ReportMetric(single.Seconds()/batched.Seconds(), "speedup")
}

// everyEnvelope says whether rec holds each envelope of want whole, once,
// in order, each ending its line.
func everyEnvelope(rec string, want []string) bool {
	at := 0
	for _, w := range want {
		i := strings.Index(rec[at:], w)
		if i < 0 || strings.Count(rec, w) != 1 {
			return false
		}
		at += i + len(w)
		if !strings.HasPrefix(rec[at:], "\n\n") && !strings.HasPrefix(rec[at:], "\x1b[201~\r") {
			return false
		}
	}
	return true
}
