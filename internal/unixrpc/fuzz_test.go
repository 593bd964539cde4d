package unixrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// FuzzFrames feeds arbitrary bytes to the frame reader and the request
// decoder, as a hostile or broken client would: nothing may panic, frames never
// exceed the limit, every failure carries a protocol error code, and a request
// that decodes is encoded again (as the client does) into one frame that
// decodes to the same request.
func FuzzFrames(f *testing.F) {
	f.Add([]byte(`{"proto":"0.1","op":"ping","id":"1"}` + "\n"))
	f.Add([]byte(`{"proto":"0.1","op":"send","id":"1","args":{"text":"To:x: y"}}` + "\r\n"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"proto":"9.9","op":"","id":null,"args":"x"}`))
	f.Add(bytes.Repeat([]byte("a"), MaxFrame+10))
	// The frames of the protocol tests, one stream.
	f.Add([]byte("not json\n" +
		`{"proto":"0.1","op":"echo","id":"1","args":[1]}` + "\n" +
		`{"op":"echo","id":"1"}` + "\n" +
		`{"proto":"0.1","id":"1"}` + "\n" +
		`{"proto":"zero","op":"echo","id":"1"}` + "\n" +
		`{"proto":"1.0","op":"echo","id":"1"}` + "\n" +
		`{"proto":"0.1","op":"echo","id":"` + strings.Repeat("x", 200) + `"}` + "\n" +
		`{"proto":"0.1","op":"echo","id":"last","args":{"a":1}}` + "\n"))
	f.Add([]byte(`{"proto":"0.1","op":"echo","id":"1","args":{"text":"To:x: caf` + "\xe9" + `"}}` + "\n"))
	f.Add([]byte(`{"proto":"0.1","op":"echo","id":"2","args":{"text":"To:x: café <&>\u2028"}}` + "\n"))
	f.Add([]byte(`{"proto":"0.1","op":"echo","id":"\ud800","args":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data))
		for {
			frame, err := fr.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errs.Is(err, errs.FrameTooLarge) {
					t.Fatalf("unexpected reader error %v", err)
				}
				return
			}
			if len(frame) >= MaxFrame {
				t.Fatalf("frame of %d bytes passed the limit", len(frame))
			}
			req, err := DecodeRequest(frame)
			if req == nil {
				t.Fatal("DecodeRequest returned no request")
			}
			if err != nil {
				if c := errs.CodeOf(err); c != errs.BadRequest {
					t.Fatalf("decode error code %s", c)
				}
				continue
			}
			if _, err := Negotiate(Version, req.Proto); err != nil {
				if c := errs.CodeOf(err); c != errs.BadRequest && c != errs.Incompatible {
					t.Fatalf("negotiate error code %s", c)
				}
			}
			var args map[string]any
			if err := DecodeArgs(req, &args); err != nil && errs.CodeOf(err) != errs.BadRequest {
				t.Fatalf("args error code %s", errs.CodeOf(err))
			}
			checkReencodes(t, req)
		}
	})
}

// checkReencodes encodes an accepted request as a client would and reads it
// back through the same reader and decoder: the same request must come out.
func checkReencodes(t *testing.T, req *Request) {
	t.Helper()
	enc, err := EncodeFrame(req)
	if errs.Is(err, errs.FrameTooLarge) {
		// encoding/json escapes <, > and & as \u003c: a frame near the
		// limit may grow past it. The client refuses to send such a frame.
		return
	}
	if err != nil {
		t.Fatalf("accepted request does not re-encode: %v", err)
	}
	fr := NewFrameReader(bytes.NewReader(enc))
	frame, err := fr.Next()
	if err != nil {
		t.Fatalf("re-encoded request %q is no frame: %v", enc, err)
	}
	if _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("re-encoded request %q is more than one frame", enc)
	}
	back, err := DecodeRequest(frame)
	if err != nil {
		t.Fatalf("re-encoded request %q does not decode: %v", enc, err)
	}
	if back.Proto != req.Proto || back.Op != req.Op || back.ID != req.ID {
		t.Fatalf("re-encoded request decodes to %+v, want %+v", back, req)
	}
	// Args travel as raw JSON, which re-encoding compacts and escapes:
	// compare what they mean.
	if !sameJSON(back.Args, req.Args) {
		t.Fatalf("args %s came back as %s", req.Args, back.Args)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
