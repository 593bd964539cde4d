package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/api"
)

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", maxReplayLine+1)
	in := "one\n\n" + long + "\nafter the long one\nno newline at the end"
	br := bufio.NewReaderSize(strings.NewReader(in), 4096)
	var got []string
	for {
		line, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			got = append(got, "<too long>")
			continue
		}
		if err != nil && len(line) == 0 {
			break
		}
		got = append(got, string(line))
	}
	want := []string{"one", "", "<too long>", "after the long one", "no newline at the end"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestParseEnvelope(t *testing.T) {
	body := "hi"
	base := api.Envelope{V: 1, Message: api.Message{ID: "m1", Sender: "a", SenderKind: "worker", Target: "b", Body: &body}}
	ok, _ := json.Marshal(base)
	e, err := parseEnvelope(ok)
	if err != nil || e.Original != "m1" || e.Body != "hi" || e.Target != "b" {
		t.Fatalf("%+v %v", e, err)
	}
	replayed := base
	replayed.ReplayOf = "m0"
	raw, _ := json.Marshal(replayed)
	if e, _ := parseEnvelope(raw); e.Original != "m0" {
		t.Errorf("a replay's original is its replay_of, got %q", e.Original)
	}
	for _, c := range []struct {
		line string
		code errs.Code
	}{
		{string(ok[:len(ok)-3]), errs.BadRequest},
		{`[1, 2]`, errs.BadRequest},
		{`{"v": "one"}`, errs.BadRequest},
		{`{"id": "m1", "sender": "a", "target": "b", "body": "x"}`, errs.BadRequest},
		{`{"v": 9, "id": "m1", "sender": "a", "target": "b", "body": "x"}`, errs.Incompatible},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b"}`, errs.BodyInvalid},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "\u0007"}`, errs.BodyInvalid},
		{`{"v": 1, "sender": "a", "target": "b", "body": "x"}`, errs.BadRequest},
		// Raw bytes that are not UTF-8, in the body or anywhere else, are
		// refused before decoding (which would replace them with U+FFFD).
		{"{\"v\": 1, \"id\": \"m1\", \"sender\": \"a\", \"target\": \"b\", \"body\": \"caf\xe9\"}", errs.BodyInvalid},
		{"{\"v\": 1, \"id\": \"m1\", \"sender\": \"a\xff\", \"target\": \"b\", \"body\": \"x\"}", errs.BodyInvalid},
		{`{"v": 1, "id": "m1", "sender": "a", "target": "b", "body": "lone\rCR"}`, errs.BodyInvalid},
	} {
		if _, err := parseEnvelope([]byte(c.line)); errs.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.line, err, c.code)
		}
	}
}

// FuzzParseEnvelope: any line either becomes an entry that passes the body
// rules or is rejected with a code and a reason that never quotes the line.
func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","sender_kind":"worker","target":"b","body":"hi"}`))
	f.Add([]byte(`{"v":1,"id":"m1","replay_of":"m0","sender":"a","target":"b","body":"two\nlines"}`))
	f.Add([]byte(`{"v":1,"id":"m1","sender":"a","target":"b","body":"\u0000"}`))
	f.Add([]byte(`{"v":1,`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseEnvelope(line)
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
	})
}
