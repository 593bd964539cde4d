package tamqapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A delivery's outcome travels as the JSON brokers and services have always
// exchanged (a broker may be older or newer than its service): each kind
// writes the booleans, reason and error text an earlier broker wrote, and
// reads back as the same outcome.
func TestADeliveryOutcomeKeepsItsJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 7, 2, 12, 731e6, time.UTC)
	const notSent = `"written_at":"0001-01-01T00:00:00Z","bracketed":true,"quiet":false,"waited_ms":2000`
	for _, c := range []struct {
		name string
		out  DeliveryOutcome
		json string
	}{
		{"written", DeliveryOutcome{Kind: Written, At: at, Bracketed: true, Quiet: true, Waited: 12 * time.Millisecond},
			`{"written":true,"maybe_written":false,"written_at":"2026-12-06T07:02:12.731Z","bracketed":true,"quiet":true,"waited_ms":12}`},
		{"not at its prompt", DeliveryOutcome{Kind: NotAtPrompt, Reason: "a dialog shows", Bracketed: true, Waited: 2 * time.Second},
			`{"written":false,"maybe_written":false,` + notSent + `,"not_ready":true,"reason":"a dialog shows","error":"the agent is not at its prompt: a dialog shows"}`},
		{"cancelled", DeliveryOutcome{Kind: Cancelled, Reason: "the lease ended", Bracketed: true, Waited: 2 * time.Second},
			`{"written":false,"maybe_written":false,` + notSent + `,"cancelled":true,"reason":"the lease ended","error":"not written: the lease ended"}`},
		{"Enter held", DeliveryOutcome{Kind: EnterHeld, Held: "dialog", Reason: "a hook event came", Bracketed: true, Waited: 2 * time.Second},
			`{"written":false,"maybe_written":true,` + notSent + `,"held":"dialog","reason":"a hook event came","error":"the text is in but the Enter was held back: a hook event came"}`},
		{"failed, maybe written", DeliveryOutcome{Kind: Failed, Err: errors.New("broken pipe"), MaybeWritten: true, Bracketed: true, Waited: 2 * time.Second},
			`{"written":false,"maybe_written":true,` + notSent + `,"error":"broken pipe"}`},
		{"failed, nothing written", DeliveryOutcome{Kind: Failed, Err: errors.New("refusing to type a control character")},
			`{"written":false,"maybe_written":false,"written_at":"0001-01-01T00:00:00Z","bracketed":false,"quiet":false,"waited_ms":0,"error":"refusing to type a control character"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(c.out)
			if err != nil || string(b) != c.json {
				t.Errorf("marshalled\n%s (%v), want\n%s", b, err, c.json)
			}
			var back DeliveryOutcome
			if err := json.Unmarshal([]byte(c.json), &back); err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%+v", back), fmt.Sprintf("%+v", c.out); got != want {
				t.Errorf("read back\n%s, want\n%s", got, want)
			}
		})
	}
}
