package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// FuzzFrames feeds arbitrary bytes to the frame reader and the request
// decoder, as a hostile or broken client would: nothing may panic, frames never
// exceed the limit, and every failure carries a protocol error code.
func FuzzFrames(f *testing.F) {
	f.Add([]byte(`{"proto":"0.1","op":"ping","id":"1"}` + "\n"))
	f.Add([]byte(`{"proto":"0.1","op":"send","id":"1","args":{"text":"To:x: y"}}` + "\r\n"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"proto":"9.9","op":"","id":null,"args":"x"}`))
	f.Add(bytes.Repeat([]byte("a"), MaxFrame+10))
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
			if _, err := json.Marshal(req); err != nil {
				t.Fatalf("accepted request does not re-encode: %v", err)
			}
		}
	})
}
