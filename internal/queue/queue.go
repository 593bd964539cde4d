// Package queue is the domain of tamq: what a message is, how its body and
// address are checked, how it is presented in a terminal, and the state
// machine of its delivery; and the endpoints and windows messages go to. It
// does no I/O and knows neither SQL nor the wire: the store maps its rows to
// these types, the api package maps these types to the wire, and the service
// drives the rules with a clock.
package queue

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// State is where a message is in its delivery.
type State string

const (
	Queued       State = "queued"
	Delivering   State = "delivering"
	Injected     State = "injected"
	AwaitingAck  State = "awaiting_ack"
	Acknowledged State = "acknowledged"
	Failed       State = "failed"
	// Cancelled: a wake whose lease ended before it was written (or while
	// it waited to be presented again), or a queued message the operator
	// cancelled (tamq cancel); it is never written.
	Cancelled State = "cancelled"
	// Held: the text is in the agent's input box but its Enter was held
	// back (a dialog came up, the agent turned busy, the paste did not show
	// as it should): nothing more is typed, never a second paste into the
	// box. A person presses Enter or clears the box; the reason says why.
	Held State = "held"
)

// Final reports whether no further delivery happens from s on its own.
func (s State) Final() bool {
	return s == Injected || s == Acknowledged || s == Failed || s == Cancelled || s == Held
}

// SenderKind is where a message came from.
type SenderKind string

const (
	FromWorker       SenderKind = "worker"
	FromOperator     SenderKind = "operator"
	FromCoordination SenderKind = "coordination"
	FromReplay       SenderKind = "replay"
)

// MaxBody is the largest body in bytes of UTF-8.
const MaxBody = 8 << 10

// Message is one message and its delivery state.
type Message struct {
	ID         string
	BatchID    string
	EndpointID string
	Sender     string
	SenderKind SenderKind
	Target     string
	Body       string
	AckMode    ackmode.Mode
	State      State
	// Attempts counts delivery attempts made; MaxRetries is how many
	// redeliveries may follow the first, so at most 1+MaxRetries are made.
	Attempts   int
	MaxRetries int

	IdempotencyKey         string
	CorrelationID          string
	CoordinationEndpointID string
	// ReplayOf is the original message a replayed one copies (the first
	// original, when the line was itself a replay).
	ReplayOf      string
	PolicyProfile string
	ConfigVersion string

	CreatedAt     time.Time
	UpdatedAt     time.Time
	NextAttemptAt time.Time
	AckDeadlineAt time.Time
	InjectedAt    time.Time
	AckedAt       time.Time
	FailedAt      time.Time
	LastError     string
}

// Timing is what the state machine needs from configuration.
type Timing struct {
	// AckTimeout is how long an acknowledged-mode message waits for its ack.
	AckTimeout time.Duration
	// Backoff is the delay before the attempt after attempt n (1-based).
	Backoff func(attempt int) time.Duration
}

// CleanBody normalizes line ends (CRLF becomes LF, as pasted text often has
// it) and checks the body: UTF-8, not empty, at most 8 KiB, no NUL or other
// control bytes but newline and tab. A lone CR is a control byte like the
// others: in a terminal it returns to the line's start, so text after it
// would overwrite what the receiver sees.
func CleanBody(body string) (string, error) {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	if len(body) > MaxBody {
		return "", errs.New(errs.BodyTooLarge, "message body is %d bytes; the limit is %d", len(body), MaxBody)
	}
	if !utf8.ValidString(body) {
		return "", errs.New(errs.BodyInvalid, "message body is not valid UTF-8")
	}
	for i, r := range body {
		if r == '\n' || r == '\t' {
			continue
		}
		if r == '\r' {
			return "", errs.New(errs.BodyInvalid, "message body has a carriage return (0x0d) without a newline after it at offset %d; only text, newlines and tabs are allowed", i)
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", errs.New(errs.BodyInvalid, "message body has control byte 0x%02x at offset %d; only text, newlines and tabs are allowed", r, i)
		}
	}
	if strings.TrimSpace(body) == "" {
		return "", errs.New(errs.BodyInvalid, "message body is empty")
	}
	return body, nil
}

// CheckFields holds envelope fields (ids, sender, target, keys) to the name
// rule of textsafe: each may reach a terminal (the sender and id are typed
// into the receiver's) or a person's screen, so none may hold a control or
// format character. Each field is its name and value; empty values are left
// to the caller.
func CheckFields(fields ...[2]string) error {
	for _, f := range fields {
		name, value := f[0], f[1]
		if value == "" {
			continue
		}
		if p := textsafe.NameProblem(value); p != "" {
			return errs.New(errs.BodyInvalid, "field %s \"%s\": %s", name, textsafe.Escape(value), p)
		}
	}
	return nil
}

// TerminalText is what is written into the receiver's terminal:
// "From:<sender>: <body>", with "/o" after an operator's label. No line of it
// can be read as an address: body lines that start with "To:" (after spaces)
// are quoted with "> ". In acknowledged mode a last line names the message id
// and the exact command that acknowledges it, except for a wake: its prompt
// ends with the commands that acknowledge the lease, and acknowledging the
// lease acknowledges the message.
func TerminalText(m Message) string {
	var b strings.Builder
	b.WriteString("From:")
	b.WriteString(m.Sender)
	if m.SenderKind == FromOperator {
		b.WriteString("/o")
	}
	b.WriteString(": ")
	for i, line := range strings.Split(m.Body, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), AddressPrefix) {
			b.WriteString("> ")
		}
		b.WriteString(line)
	}
	if m.AckMode == ackmode.Acknowledged && m.SenderKind != FromCoordination {
		fmt.Fprintf(&b, "\n[tamq message %s: acknowledge with: tamq ack %s]", m.ID, m.ID)
	}
	return b.String()
}

// MaxPaste bounds the terminal text of one delivery of several messages: the
// body limit, so a batch is never a bigger paste than one message may be. A
// message whose own text is longer (a full body and its envelope) goes alone.
const MaxPaste = MaxBody

// BatchSeparator goes between the envelopes of a batch: a blank line, so each
// "From:" line starts a paragraph of its own and the agent reads each message
// whole, as it would alone.
const BatchSeparator = "\n\n"

// Batchable reports whether m may share a paste with other messages. A wake
// (sender kind coordination) may not: its prompt ends with the command that
// acknowledges its lease, and the agent must read it alone and last, with
// nothing before it to act on first.
func (m Message) Batchable() bool { return m.SenderKind != FromCoordination }

// Batch returns how many messages from the head of queued (one window's
// queue: one endpoint and target, oldest first) one delivery takes at now:
// none when the head is not due; else the head and those behind it, up to
// limit, while each is due (a message waiting out a backoff holds back the
// ones behind it), is batchable, is for the head's endpoint and target, and
// the batch's text (BatchText) stays within MaxPaste. The head always goes,
// alone when it is not batchable or its text alone fills the paste.
func Batch(queued []Message, now time.Time, limit int) int {
	if len(queued) == 0 || queued[0].State != Queued || now.Before(queued[0].NextAttemptAt) {
		return 0
	}
	head := queued[0]
	if !head.Batchable() {
		return 1
	}
	n, size := 1, len(TerminalText(head))
	for ; n < len(queued) && n < limit; n++ {
		m := queued[n]
		if m.State != Queued || !m.Batchable() || now.Before(m.NextAttemptAt) ||
			m.EndpointID != head.EndpointID || m.Target != head.Target {
			break
		}
		size += len(BatchSeparator) + len(TerminalText(m))
		if size > MaxPaste {
			break
		}
	}
	return n
}

// BatchText is what one delivery of msgs writes: each message's own
// TerminalText, unchanged and in order, a blank line between them. The
// delivery ends with one Enter after it all.
func BatchText(msgs []Message) string {
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = TerminalText(m)
	}
	return strings.Join(texts, BatchSeparator)
}

func transitionError(m *Message, action string) error {
	return errs.New(errs.Conflict, "message %s is %s; cannot %s", m.ID, m.State, action)
}

// Claim starts a delivery attempt of a queued message that is due.
func (m *Message) Claim(now time.Time) error {
	if m.State != Queued {
		return transitionError(m, "claim it")
	}
	if now.Before(m.NextAttemptAt) {
		return errs.New(errs.Conflict, "message %s is not due until %s", m.ID, m.NextAttemptAt.Format(time.RFC3339))
	}
	m.State = Delivering
	m.Attempts++
	m.UpdatedAt = now
	return nil
}

// Written records that the bytes reached the terminal.
func (m *Message) Written(now time.Time, t Timing) error {
	if m.State != Delivering {
		return transitionError(m, "mark it written")
	}
	m.InjectedAt, m.UpdatedAt, m.LastError = now, now, ""
	if m.AckMode == ackmode.Acknowledged {
		m.State = AwaitingAck
		m.AckDeadlineAt = now.Add(t.AckTimeout)
		return nil
	}
	m.State = Injected
	return nil
}

// WriteFailed records a failed write. maybeWritten says whether any byte may
// have arrived: then a resend could double the text, so injected mode fails
// for the operator to retry and acknowledged mode waits for its deadline;
// otherwise the message is queued again after the backoff.
func (m *Message) WriteFailed(now time.Time, t Timing, maybeWritten bool, reason string) error {
	if m.State != Delivering {
		return transitionError(m, "record a failed write")
	}
	m.LastError, m.UpdatedAt = reason, now
	switch {
	case maybeWritten && m.AckMode == ackmode.Acknowledged:
		m.State = AwaitingAck
		m.AckDeadlineAt = now.Add(t.AckTimeout)
	case maybeWritten:
		m.fail(now, "write may have partly arrived; not resent blindly: "+reason)
	default:
		m.requeueOrFail(now, t)
	}
	return nil
}

// HeldBack records a write whose text went in but whose Enter was held
// back, with why. The attempt counts; nothing is written again.
func (m *Message) HeldBack(now time.Time, reason string) error {
	if m.State != Delivering {
		return transitionError(m, "record an Enter held back")
	}
	m.State, m.UpdatedAt, m.LastError = Held, now, reason
	m.AckDeadlineAt, m.NextAttemptAt = time.Time{}, time.Time{}
	return nil
}

// AckDeadlinePassed redelivers an unacknowledged message (same id) after the
// backoff, or fails it when its attempts are used up.
func (m *Message) AckDeadlinePassed(now time.Time, t Timing) error {
	if m.State != AwaitingAck {
		return transitionError(m, "expire its ack deadline")
	}
	if now.Before(m.AckDeadlineAt) {
		return errs.New(errs.Conflict, "message %s waits for its ack until %s", m.ID, m.AckDeadlineAt.Format(time.RFC3339))
	}
	m.LastError = "not acknowledged in time"
	m.requeueOrFail(now, t)
	return nil
}

// LeaseExpired returns a message whose delivery claim outlived its holder (a
// crash mid-delivery) to the queue, same id, due at once. The attempt counts.
func (m *Message) LeaseExpired(now time.Time) error {
	if m.State != Delivering {
		return transitionError(m, "expire its delivery lease")
	}
	m.State, m.NextAttemptAt, m.UpdatedAt = Queued, now, now
	m.LastError = "delivery interrupted"
	return nil
}

// Deferred returns a claimed message to the queue when its window could not
// take it (the agent has exited, the window is gone, or the agent shows a
// dialog rather than its input prompt). Nothing was written, so the attempt
// does not count; the message waits, with the reason, until the window can
// take it.
func (m *Message) Deferred(now time.Time, reason string) error {
	if m.State != Delivering {
		return transitionError(m, "put it back in the queue")
	}
	m.State, m.NextAttemptAt, m.UpdatedAt, m.LastError = Queued, now, now, reason
	m.Attempts = max(m.Attempts-1, 0)
	return nil
}

// Cancel ends a wake that must not be written any more (its lease ended, or
// a newer attempt was offered): from queued, or awaiting its ack (it would
// be presented again), or claimed by the writer that found it stale before
// writing it. Final states stay as they are.
func (m *Message) Cancel(now time.Time, reason string) error {
	if m.State != Queued && m.State != AwaitingAck && m.State != Delivering && m.State != Held {
		return transitionError(m, "cancel it")
	}
	m.State, m.UpdatedAt, m.LastError = Cancelled, now, reason
	m.AckDeadlineAt, m.NextAttemptAt = time.Time{}, time.Time{}
	return nil
}

// Abandon fails an undelivered message whose endpoint is gone for good (the
// operator forgot it); `tamq retry` can send it again through a live one.
func (m *Message) Abandon(now time.Time, reason string) {
	m.UpdatedAt = now
	m.fail(now, reason)
}

// Ack records the receiver's acknowledgement. It is accepted in every state,
// after failure too (a late ack wins), but a wake cancelled before it was
// ever written stays cancelled (nobody received it); acking twice changes
// nothing.
func (m *Message) Ack(now time.Time) (changed bool) {
	if m.State == Acknowledged || m.State == Cancelled && m.InjectedAt.IsZero() {
		return false
	}
	m.State, m.AckedAt, m.UpdatedAt = Acknowledged, now, now
	m.AckDeadlineAt, m.NextAttemptAt = time.Time{}, time.Time{}
	return true
}

// Retry is the only way out of failed, and out of held once a person has
// cleared the input box: the message is queued again, due at once, with a
// fresh budget of attempts.
func (m *Message) Retry(now time.Time) error {
	if m.State != Failed && m.State != Held {
		return transitionError(m, "retry it (only failed and held messages can be retried)")
	}
	m.State, m.Attempts, m.NextAttemptAt, m.UpdatedAt = Queued, 0, now, now
	m.FailedAt, m.LastError = time.Time{}, ""
	return nil
}

func (m *Message) requeueOrFail(now time.Time, t Timing) {
	if m.Attempts > m.MaxRetries {
		m.fail(now, fmt.Sprintf("gave up after %d attempts: %s", m.Attempts, m.LastError))
		return
	}
	m.State = Queued
	m.NextAttemptAt = now.Add(t.Backoff(m.Attempts))
	m.AckDeadlineAt = time.Time{}
}

func (m *Message) fail(now time.Time, reason string) {
	m.State, m.FailedAt, m.LastError = Failed, now, reason
	m.AckDeadlineAt, m.NextAttemptAt = time.Time{}, time.Time{}
}
