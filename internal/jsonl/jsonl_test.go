package jsonl

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func TestReaderNext(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	in := "one\n\n" + long + "\nafter the long one\nno newline at the end"
	r := NewReader(strings.NewReader(in))
	var got []string
	for {
		line, err := r.Next()
		if errors.Is(err, ErrLineTooLong) {
			if errs.CodeOf(err) != errs.BodyTooLarge {
				t.Errorf("a long line is %v", err)
			}
			got = append(got, "<too long>")
			continue
		}
		if err != nil && len(line) == 0 {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(line))
	}
	want := []string{"one", "", "<too long>", "after the long one", "no newline at the end"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestEncodeDecodesBack(t *testing.T) {
	body := "two\nlines\tand a tab"
	m := api.Message{ID: "m1", BatchID: "m1", Sender: "a", SenderKind: "worker", Target: "b", Body: &body,
		AckMode: "acknowledged", IdempotencyKey: "lease-1", CorrelationID: "rev-2", CoordinationEndpointID: "ce-3"}
	line, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(line), `{"v":1,"id":"m1",`) || strings.Contains(string(line), "\n") {
		t.Errorf("line %s", line)
	}
	e, err := DecodeLine(line)
	want := api.ReplayEntry{Original: "m1", Sender: "a", SenderKind: "worker", Target: "b", Body: body,
		AckMode: "acknowledged", IdempotencyKey: "lease-1", CorrelationID: "rev-2", CoordinationEndpointID: "ce-3"}
	if err != nil || e != want {
		t.Errorf("decoded %+v %v, want %+v", e, err, want)
	}
}

func TestDecodeLine(t *testing.T) {
	body := "hi"
	base := Envelope{V: 1, Message: api.Message{ID: "m1", Sender: "a", SenderKind: "worker", Target: "b", Body: &body}}
	ok, _ := json.Marshal(base)
	e, err := DecodeLine(ok)
	if err != nil || e.Original != "m1" || e.Body != "hi" || e.Target != "b" {
		t.Fatalf("%+v %v", e, err)
	}
	replayed := base
	replayed.ReplayOf = "m0"
	raw, _ := json.Marshal(replayed)
	if e, _ := DecodeLine(raw); e.Original != "m0" {
		t.Errorf("a replay's original is its replay_of, got %q", e.Original)
	}
	for _, c := range []struct {
		line string
		code errs.Code
		why  string // in the reason
	}{
		{string(ok[:len(ok)-3]), errs.BadRequest, "cut short"},
		{`{"v":1,"id":"m1" "sender"}`, errs.BadRequest, "invalid JSON at byte"},
		{`[1, 2]`, errs.BadRequest, "wrong type"},
		{`{"v": "one"}`, errs.BadRequest, `field "v" has the wrong type`},
		{`{"id": "m1", "sender": "a", "target": "b", "body": "x"}`, errs.BadRequest, `no version field "v"`},
		{`{"v": 9, "id": "m1", "sender": "a", "target": "b", "body": "x"}`, errs.Incompatible, "version 9"},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b"}`, errs.BodyInvalid, "no body"},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "\u0007"}`, errs.BodyInvalid, ""},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "` + strings.Repeat("x", 8193) + `"}`, errs.BodyTooLarge, ""},
		{`{"v": 1, "sender": "a", "target": "b", "body": "x"}`, errs.BadRequest, "lacks id"},
		{`{"v": 1, "id": "m1", "sender": "a\u001b[2J", "target": "b", "body": "x"}`, errs.BodyInvalid, "field sender"},
		// Raw bytes that are not UTF-8, in the body or anywhere else, are
		// refused before decoding (which would replace them with U+FFFD).
		{"{\"v\": 1, \"id\": \"m1\", \"sender\": \"a\", \"target\": \"b\", \"body\": \"caf\xe9\"}", errs.BodyInvalid, "offset 63"},
		{"{\"v\": 1, \"id\": \"m1\", \"sender\": \"a\xff\", \"target\": \"b\", \"body\": \"x\"}", errs.BodyInvalid, "not valid UTF-8"},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "lone\rCR"}`, errs.BodyInvalid, ""},
	} {
		_, err := DecodeLine([]byte(c.line))
		if errs.CodeOf(err) != c.code || err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%.80s: %v, want %s with %q", c.line, err, c.code, c.why)
		}
	}
}

// FuzzDecodeLine: any line either becomes an entry that passes the body
// rules or is rejected with a code and a reason that never quotes the line;
// an entry encoded again decodes to itself.
func FuzzDecodeLine(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","sender_kind":"worker","target":"b","body":"hi"}`))
	f.Add([]byte(`{"v":1,"id":"m1","replay_of":"m0","sender":"a","target":"b","body":"two\nlines"}`))
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","target":"b","body":"\u0000"}`))
	f.Add([]byte(`{"v":2,"id":"m1","sender":"a","target":"b","body":"x"}`))
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","target":"b","body":"x","idempotency_key":"\u001b]0;t\u0007"}`))
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","target":"b","body":"crlf\r\nline"}`))
	f.Add([]byte(`{"v":1,`))
	f.Add([]byte(`{"v":1,"body":{}}`))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte(""))
	// The lines of the tests above.
	f.Add([]byte(`{"v": 1, "sender": "a", "target": "b", "body": "x"}`))
	f.Add([]byte(`{"v": 1, "id": "m1", "sender": "a\u001b[2J", "target": "b", "body": "x"}`))
	f.Add([]byte("{\"v\": 1, \"id\": \"m1\", \"sender\": \"a\", \"target\": \"b\", \"body\": \"caf\xe9\"}"))
	f.Add([]byte(`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "lone\rCR"}`))
	f.Add([]byte(`{"v":1,"id":"m1","batch_id":"m1","sender":"a","sender_kind":"worker","target":"b","body":"two\nlines\tand a tab",` +
		`"ack_mode":"acknowledged","idempotency_key":"lease-1","correlation_id":"rev-2","coordination_endpoint_id":"ce-3"}`))
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","target":"b\u202e","body":"x"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := DecodeLine(line)
		if err != nil {
			if errs.CodeOf(err) == errs.Internal || err.Error() == "" {
				t.Fatalf("uncoded error %v", err)
			}
			if len(line) > 12 && strings.Contains(err.Error(), string(line)) {
				t.Fatalf("the reason quotes the line: %v", err)
			}
			return
		}
		if e.Original == "" || e.Target == "" || e.Sender == "" || !utf8.Valid(line) || len(e.Body) > 8192 {
			t.Fatalf("accepted a bad entry %+v", e)
		}
		for _, name := range []string{e.Original, e.Sender, e.Target} {
			if p := textsafe.NameProblem(name); p != "" {
				t.Fatalf("accepted the name %q: %s", name, p)
			}
		}
		if _, err := queue.CleanBody(e.Body); err != nil {
			t.Fatalf("accepted a body the queue refuses: %v", err)
		}
		again, err := Encode(api.Message{ID: e.Original, Sender: e.Sender, SenderKind: e.SenderKind, Target: e.Target,
			Body: &e.Body, AckMode: e.AckMode, IdempotencyKey: e.IdempotencyKey, CorrelationID: e.CorrelationID,
			CoordinationEndpointID: e.CoordinationEndpointID})
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeLine(again); err != nil || back != e {
			t.Fatalf("encoded again %s: %+v %v, want %+v", again, back, err, e)
		}
	})
}

// TestALineCarriesRetriesUnderBothNames: max_retries says what the number
// counts; max_attempts, its version-1 name, stays beside it with the same
// number for readers that require it.
func TestALineCarriesRetriesUnderBothNames(t *testing.T) {
	b, err := Encode(api.MessageOf(queue.Message{ID: "m1", MaxRetries: 3}, false))
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(b, &line); err != nil {
		t.Fatal(err)
	}
	if line["max_retries"] != 3.0 || line["max_attempts"] != 3.0 {
		t.Errorf("max_retries %v, max_attempts %v; want 3 and 3: %s", line["max_retries"], line["max_attempts"], b)
	}
}
