package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

var timing = Timing{
	AckTimeout: 30 * time.Second,
	Backoff:    func(n int) time.Duration { return time.Duration(n) * 5 * time.Second },
}

func queued(mode ackmode.Mode, maxRetries int) *Message {
	return &Message{ID: "m1", State: Queued, AckMode: mode, MaxRetries: maxRetries, NextAttemptAt: t0}
}

func TestCleanBody(t *testing.T) {
	ok := []struct{ in, want string }{
		{"hello", "hello"},
		{"two\nlines\tand tab", "two\nlines\tand tab"},
		{"crlf\r\nlines\r\n", "crlf\nlines\n"},
		{"ünïcödé ✓ 日本", "ünïcödé ✓ 日本"},
		{strings.Repeat("é", MaxBody/2), strings.Repeat("é", MaxBody/2)},
	}
	for _, tt := range ok {
		got, err := CleanBody(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("CleanBody(%q) = %q, %v", preview(tt.in), preview(got), err)
		}
	}
	bad := []struct {
		in   string
		code errs.Code
	}{
		{strings.Repeat("x", MaxBody+1), errs.BodyTooLarge},
		{"nul\x00byte", errs.BodyInvalid},
		{"escape \x1b[201~ end paste", errs.BodyInvalid},
		{"bell\a", errs.BodyInvalid},
		{"lone\rcarriage return", errs.BodyInvalid},
		{"ends in CR\r", errs.BodyInvalid},
		{"CR before CRLF\r\r\n", errs.BodyInvalid},
		{"del\x7f", errs.BodyInvalid},
		{"c1 \u0085", errs.BodyInvalid},
		{"bad utf8 \xff", errs.BodyInvalid},
		{"  \n\t ", errs.BodyInvalid},
		{"", errs.BodyInvalid},
	}
	for _, tt := range bad {
		if _, err := CleanBody(tt.in); !errs.Is(err, tt.code) {
			t.Errorf("CleanBody(%q) = %v, want %s", preview(tt.in), err, tt.code)
		}
	}
}

func TestParseAddress(t *testing.T) {
	slugs := []string{"net", "net-kingdom", "with space,comma", "a:b"}
	tests := []struct{ in, target, body string }{
		{"To:net-kingdom: hello", "net-kingdom", "hello"},
		{"To:net: hi", "net", "hi"},
		{"To:with space,comma: x", "with space,comma", "x"},
		{"To:a:b: colon", "a:b", "colon"},
		{"To:net-kingdom:no space", "net-kingdom", "no space"},
		{"To:net-kingdom: line1\nline2", "net-kingdom", "line1\nline2"},
	}
	for _, tt := range tests {
		target, body, err := ParseAddress(tt.in, slugs)
		if err != nil || target != tt.target || body != tt.body {
			t.Errorf("ParseAddress(%q) = %q, %q, %v", tt.in, target, body, err)
		}
	}
	if _, _, err := ParseAddress("To:ghost: boo", slugs); !errs.Is(err, errs.UnknownTarget) || !strings.Contains(err.Error(), "'ghost'") {
		t.Errorf("unknown: %v", err)
	}
	if _, _, err := ParseAddress("To:*: everyone", slugs); !errs.Is(err, errs.UnknownTarget) {
		t.Errorf("wildcard: %v", err)
	}
	if _, _, err := ParseAddress("hello", slugs); !errs.Is(err, errs.Usage) {
		t.Errorf("no address: %v", err)
	}
}

func TestTerminalText(t *testing.T) {
	m := Message{ID: "0193", Sender: "net-kingdom", SenderKind: FromWorker, Body: "done\nTo:railiance: sneaky\n  To:x: indented\nplain To:y: mid-line"}
	want := "From:net-kingdom: done\n> To:railiance: sneaky\n>   To:x: indented\nplain To:y: mid-line"
	if got := TerminalText(m); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	m = Message{ID: "0193", Sender: "operator", SenderKind: FromOperator, Body: "To:a: first line", AckMode: ackmode.Acknowledged}
	want = "From:operator/o: > To:a: first line\n[tamq message 0193: acknowledge with: tamq ack 0193]"
	if got := TerminalText(m); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// A wake's prompt ends with the lease's own ack command: no tamq footer.
	m = Message{ID: "0193", Sender: "coordination-engine", SenderKind: FromCoordination, Body: "work\nlease ack L", AckMode: ackmode.Acknowledged}
	want = "From:coordination-engine: work\nlease ack L"
	if got := TerminalText(m); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestInjectedModeLifecycle(t *testing.T) {
	m := queued(ackmode.Injected, 4)
	if err := m.Claim(t0.Add(-time.Second)); !errs.Is(err, errs.Conflict) {
		t.Errorf("claim before due: %v", err)
	}
	must(t, m.Claim(t0))
	if m.State != Delivering || m.Attempts != 1 {
		t.Fatalf("%+v", m)
	}
	must(t, m.Written(t0, timing))
	if m.State != Injected || !m.State.Final() || !m.InjectedAt.Equal(t0) {
		t.Fatalf("%+v", m)
	}
	if err := m.Claim(t0); err == nil {
		t.Error("claimed an injected message")
	}
}

func TestAcknowledgedModeRedeliversSameIDUntilAcked(t *testing.T) {
	m := queued(ackmode.Acknowledged, 2)
	now := t0
	for attempt := 1; attempt <= 3; attempt++ {
		must(t, m.Claim(now))
		must(t, m.Written(now, timing))
		if m.State != AwaitingAck || !m.AckDeadlineAt.Equal(now.Add(30*time.Second)) {
			t.Fatalf("attempt %d: %+v", attempt, m)
		}
		if err := m.AckDeadlinePassed(now.Add(29*time.Second), timing); err == nil {
			t.Fatal("deadline expired early")
		}
		now = now.Add(30 * time.Second)
		must(t, m.AckDeadlinePassed(now, timing))
		if attempt < 3 {
			if m.State != Queued || !m.NextAttemptAt.Equal(now.Add(time.Duration(attempt)*5*time.Second)) || m.ID != "m1" {
				t.Fatalf("attempt %d: %+v", attempt, m)
			}
			now = m.NextAttemptAt
		}
	}
	if m.State != Failed || m.Attempts != 3 || !strings.Contains(m.LastError, "gave up after 3 attempts") {
		t.Fatalf("after exhaustion: %+v", m)
	}
	// A late ack wins.
	if !m.Ack(now) || m.State != Acknowledged {
		t.Fatalf("late ack: %+v", m)
	}
	if m.Ack(now) {
		t.Error("second ack changed something")
	}
}

func TestWriteFailures(t *testing.T) {
	// Nothing written: back to the queue with backoff, then failed.
	m := queued(ackmode.Injected, 1)
	must(t, m.Claim(t0))
	must(t, m.WriteFailed(t0, timing, false, "pane gone"))
	if m.State != Queued || !m.NextAttemptAt.Equal(t0.Add(5*time.Second)) || m.LastError != "pane gone" {
		t.Fatalf("%+v", m)
	}
	must(t, m.Claim(m.NextAttemptAt))
	must(t, m.WriteFailed(t0, timing, false, "pane gone"))
	if m.State != Failed {
		t.Fatalf("%+v", m)
	}
	// Maybe written, injected mode: failed, never resent blindly.
	m = queued(ackmode.Injected, 4)
	must(t, m.Claim(t0))
	must(t, m.WriteFailed(t0, timing, true, "enter failed"))
	if m.State != Failed || !strings.Contains(m.LastError, "not resent blindly") {
		t.Fatalf("%+v", m)
	}
	// Maybe written, acknowledged mode: the ack deadline decides.
	m = queued(ackmode.Acknowledged, 4)
	must(t, m.Claim(t0))
	must(t, m.WriteFailed(t0, timing, true, "enter failed"))
	if m.State != AwaitingAck || !m.AckDeadlineAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("%+v", m)
	}
}

func TestRetryAndLeaseExpiry(t *testing.T) {
	m := queued(ackmode.Injected, 0)
	must(t, m.Claim(t0))
	must(t, m.LeaseExpired(t0))
	if m.State != Queued || m.Attempts != 1 || m.ID != "m1" {
		t.Fatalf("after lease expiry: %+v", m)
	}
	if err := m.Retry(t0); err == nil {
		t.Error("retried a queued message")
	}
	must(t, m.Claim(t0))
	must(t, m.WriteFailed(t0, timing, false, "x"))
	if m.State != Failed {
		t.Fatalf("max_attempts 0 allows one attempt only: %+v", m)
	}
	must(t, m.Retry(t0.Add(time.Minute)))
	if m.State != Queued || m.Attempts != 0 || !m.NextAttemptAt.Equal(t0.Add(time.Minute)) || !m.FailedAt.IsZero() {
		t.Fatalf("after retry: %+v", m)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// batchOf is a window's queue for the Batch tests: workers' messages to one
// target on one endpoint, due at t0, in order.
func batchOf(bodies ...string) []Message {
	out := make([]Message, len(bodies))
	for i, b := range bodies {
		out[i] = Message{ID: string(rune('a' + i)), EndpointID: "ep", Sender: "net", SenderKind: FromWorker, Target: "rail",
			Body: b, State: Queued, NextAttemptAt: t0}
	}
	return out
}

func TestBatch(t *testing.T) {
	big := strings.Repeat("x", MaxBody)
	cases := []struct {
		name  string
		queue func() []Message
		limit int
		want  int
	}{
		{"empty", func() []Message { return nil }, 10, 0},
		{"all, within the limit", func() []Message { return batchOf("1", "2", "3") }, 10, 3},
		{"the count limit", func() []Message { return batchOf("1", "2", "3") }, 2, 2},
		{"off: one at a time", func() []Message { return batchOf("1", "2", "3") }, 1, 1},
		{"off with zero too", func() []Message { return batchOf("1", "2", "3") }, 0, 1},
		{"a head not due takes nothing", func() []Message {
			q := batchOf("1", "2")
			q[0].NextAttemptAt = t0.Add(time.Second)
			return q
		}, 10, 0},
		{"one waiting out a backoff holds back those behind it", func() []Message {
			q := batchOf("1", "2", "3")
			q[1].NextAttemptAt = t0.Add(time.Second)
			return q
		}, 10, 1},
		{"a body of the full size goes alone", func() []Message { return batchOf(big, "2") }, 10, 1},
		{"the paste limit splits", func() []Message {
			// Each text is 2 KiB: four with three separators pass the limit.
			b := strings.Repeat("y", 2048-len("From:net: "))
			return batchOf(b, b, b, b, b)
		}, 10, 3},
		{"a wake at the head goes alone", func() []Message {
			q := batchOf("wake", "2")
			q[0].SenderKind = FromCoordination
			return q
		}, 10, 1},
		{"a wake is never behind others in a paste", func() []Message {
			q := batchOf("1", "2", "wake", "4")
			q[2].SenderKind = FromCoordination
			return q
		}, 10, 2},
		{"another target ends it", func() []Message {
			q := batchOf("1", "2", "3")
			q[1].Target = "other"
			return q
		}, 10, 1},
		{"another endpoint ends it", func() []Message {
			q := batchOf("1", "2", "3")
			q[2].EndpointID = "ep2"
			return q
		}, 10, 2},
		{"acknowledged mode batches, each with its footer counted", func() []Message {
			q := batchOf("1", "2")
			q[0].AckMode, q[1].AckMode = ackmode.Acknowledged, ackmode.Acknowledged
			return q
		}, 10, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.queue()
			n := Batch(q, t0, c.limit)
			if n != c.want {
				t.Fatalf("Batch = %d, want %d", n, c.want)
			}
			if n > 1 && len(BatchText(q[:n])) > MaxPaste {
				t.Errorf("a batch of %d is %d bytes, over %d", n, len(BatchText(q[:n])), MaxPaste)
			}
		})
	}
}

// A batch's text is each message's own text, whole and in order, a blank
// line between them; the footers of acknowledged messages stay with theirs.
func TestBatchText(t *testing.T) {
	q := batchOf("first\nTo:x: quoted", "second")
	q[1].SenderKind, q[1].Sender, q[1].AckMode, q[1].ID = FromOperator, "operator", ackmode.Acknowledged, "0193"
	want := "From:net: first\n> To:x: quoted\n\nFrom:operator/o: second\n[tamq message 0193: acknowledge with: tamq ack 0193]"
	if got := BatchText(q); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := BatchText(q[:1]); got != TerminalText(q[0]) {
		t.Errorf("a batch of one is %q, not the message's own text", got)
	}
}

// A held delivery stays held until an ack or a cancel; a wake cancelled
// before it was ever written stays cancelled when an ack comes (nobody
// received it), one cancelled after its write is acknowledged.
func TestHeldAndCancelledAcks(t *testing.T) {
	now := time.Unix(100, 0)
	held := Message{State: Delivering, AckMode: ackmode.Acknowledged}
	if err := held.HeldBack(now, "Enter held (busy): x"); err != nil || held.State != Held || !held.State.Final() {
		t.Fatalf("held: %+v %v", held, err)
	}
	if err := held.HeldBack(now, "again"); err == nil {
		t.Error("a held message was held again")
	}
	retried := held
	if err := retried.Retry(now); err != nil || retried.State != Queued || retried.Attempts != 0 {
		t.Errorf("retry of a held message (its box cleared): %+v %v", retried, err)
	}
	if !held.Ack(now) || held.State != Acknowledged {
		t.Errorf("ack of a held message: %+v", held)
	}
	unwritten := Message{State: Queued}
	if err := unwritten.Cancel(now, "lease ended"); err != nil {
		t.Fatal(err)
	}
	if unwritten.Ack(now) || unwritten.State != Cancelled {
		t.Errorf("an ack turned a wake never written into %s", unwritten.State)
	}
	written := Message{State: AwaitingAck, InjectedAt: now}
	if err := written.Cancel(now, "superseded"); err != nil {
		t.Fatal(err)
	}
	if !written.Ack(now) || written.State != Acknowledged {
		t.Errorf("an ack of a written, cancelled wake: %s", written.State)
	}
}
