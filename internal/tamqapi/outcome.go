package tamqapi

import (
	"encoding/json"
	"errors"
	"time"
)

// DeliveryOutcome is what became of one delivery: the broker's gate says it
// (broker.Gate.Deliver), the broker answers the service with it (the result
// of OpDeliver, and LastDelivery.Result), and the service's writers report
// it to the deliverer, which records it.
//
// On the wire it keeps the JSON a broker and a service of earlier versions
// exchange: booleans (written, not_ready, cancelled, maybe_written), the
// held word, the reason and an error text, never Kind. A broker is a process
// of its own that may be older or newer than the service it talks to, the
// session carries no version of this result, and a service refuses session
// arguments it does not know (LastDelivery among them): see MarshalJSON.
type DeliveryOutcome struct {
	Kind DeliveryKind
	// Reason says in words why the delivery was not written: what the agent
	// showed instead of its prompt, why the window cannot take text, why
	// the delivery is no longer wanted, or why the Enter was held back.
	Reason string
	// Held names, when Kind is EnterHeld, why the Enter was held back in a
	// word: "dialog", "busy" or "unknown screen".
	Held string
	// Err is what failed, when Kind is Failed.
	Err error
	// MaybeWritten, when Kind is Failed, says whether any byte may have
	// arrived: then the text is never resent blindly.
	MaybeWritten bool
	// At is when the Enter went in (Kind Written); zero means when the
	// writer returned.
	At time.Time
	// Through a broker: Bracketed says the text went in as a bracketed
	// paste; Quiet says a quiet moment came before it (false: the wait for
	// one ran out); Waited is how long the broker waited.
	Bracketed bool
	Quiet     bool
	Waited    time.Duration
}

// DeliveryKind is the kind of a DeliveryOutcome.
type DeliveryKind string

// The kinds of outcome.
const (
	// Written: the text and its Enter went in.
	Written DeliveryKind = "written"
	// NotAtPrompt: nothing was written because no agent was at its input
	// prompt (a dialog, a menu, a busy agent, a screen not understood, or
	// no agent running); Reason says what showed. The message waits for
	// the window without spending its attempt; through a broker, until its
	// next BrokerState says the agent is at its prompt (on the wire:
	// not_ready).
	NotAtPrompt DeliveryKind = "not_at_prompt"
	// Unreachable: nothing was written because the window cannot take text
	// now (its pane is gone or is not the window's, its broker has not
	// attached or its session ended); Reason says which. The message waits
	// for the window without spending its attempt. A broker never answers
	// it.
	Unreachable DeliveryKind = "unreachable"
	// Cancelled: nothing was written because the delivery is no longer
	// wanted (a wake cancelled while the writer waited for the prompt).
	Cancelled DeliveryKind = "cancelled"
	// EnterHeld: the text went in but its Enter was held back (Held,
	// Reason): a person may press it.
	EnterHeld DeliveryKind = "enter_held"
	// Failed: the write failed (Err); MaybeWritten says whether any byte
	// may have arrived.
	Failed DeliveryKind = "failed"
)

// Deferred says nothing was written and the message waits for its window
// without spending its attempt.
func (o DeliveryOutcome) Deferred() bool {
	return o.Kind == NotAtPrompt || o.Kind == Unreachable
}

// deliverResultJSON is the JSON of a DeliveryOutcome, as every broker and
// service version reads and writes it.
type deliverResultJSON struct {
	Written      bool      `json:"written"`
	MaybeWritten bool      `json:"maybe_written"`
	WrittenAt    time.Time `json:"written_at"`
	Bracketed    bool      `json:"bracketed"`
	Quiet        bool      `json:"quiet"`
	WaitedMS     int64     `json:"waited_ms"`
	NotReady     bool      `json:"not_ready,omitempty"`
	Cancelled    bool      `json:"cancelled,omitempty"`
	Held         string    `json:"held,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// MarshalJSON writes o as a broker of any version answers a delivery:
// written, not_ready or cancelled for those kinds, maybe_written once the
// text may be in (a held Enter, a failure after the first byte), and the
// error text a service before DeliveryOutcome reads for a held Enter or a
// failure.
func (o DeliveryOutcome) MarshalJSON() ([]byte, error) {
	w := deliverResultJSON{Written: o.Kind == Written, MaybeWritten: o.Kind == EnterHeld || o.Kind == Failed && o.MaybeWritten,
		WrittenAt: o.At, Bracketed: o.Bracketed, Quiet: o.Quiet, WaitedMS: o.Waited.Milliseconds(),
		NotReady: o.Kind == NotAtPrompt || o.Kind == Unreachable, Cancelled: o.Kind == Cancelled, Held: o.Held, Reason: o.Reason}
	switch o.Kind {
	case Failed:
		if o.Err != nil {
			w.Error = o.Err.Error()
		}
	case Cancelled:
		w.Error = "not written: " + o.Reason
	case NotAtPrompt:
		w.Error = "the agent is not at its prompt: " + o.Reason
	case Unreachable:
		w.Error = "nothing written: " + o.Reason
	case EnterHeld:
		w.Error = "the text is in but the Enter was held back: " + o.Reason
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a broker's answer, of any version. It takes fields
// it does not know, as the service always did in an answer: a newer
// broker's may carry more.
func (o *DeliveryOutcome) UnmarshalJSON(b []byte) error {
	var w deliverResultJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = DeliveryOutcome{Reason: w.Reason, At: w.WrittenAt, Bracketed: w.Bracketed, Quiet: w.Quiet,
		Waited: time.Duration(w.WaitedMS) * time.Millisecond}
	switch {
	case w.Cancelled:
		o.Kind = Cancelled
	case w.NotReady:
		o.Kind = NotAtPrompt
	case w.Written:
		o.Kind = Written
	case w.Held != "":
		o.Kind, o.Held = EnterHeld, w.Held
	default:
		o.Kind, o.Err, o.MaybeWritten = Failed, errors.New(w.Error), w.MaybeWritten
	}
	return nil
}
