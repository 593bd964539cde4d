package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/tmux-amq/tamq/internal/errs"
)

// FrameReader reads newline-terminated frames of at most MaxFrame bytes.
type FrameReader struct{ r *bufio.Reader }

// NewFrameReader wraps r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, MaxFrame)}
}

// Next returns the next frame without its newline. The slice is valid until the
// next call. A frame over the limit is errs.FrameTooLarge, after which the
// stream cannot be resynchronized and must be closed. A last frame without a
// newline counts as a frame.
func (fr *FrameReader) Next() ([]byte, error) {
	line, err := fr.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, errs.New(errs.FrameTooLarge, "frame exceeds %d bytes", MaxFrame)
	case errors.Is(err, io.EOF) && len(line) > 0:
		return line, nil
	case err != nil:
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

// DecodeRequest parses and checks one request frame. The request is returned
// even on error, as far as it was read, so the response can carry its id.
func DecodeRequest(frame []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(frame, &req); err != nil {
		return &req, errs.New(errs.BadRequest, "malformed request: %v", err)
	}
	switch {
	case req.Proto == "":
		return &req, errs.New(errs.BadRequest, "request has no proto")
	case req.Op == "":
		return &req, errs.New(errs.BadRequest, "request has no op")
	case len(req.ID) > 128:
		return &req, errs.New(errs.BadRequest, "request id longer than 128 bytes")
	}
	if len(req.Args) > 0 && req.Args[0] != '{' && string(req.Args) != "null" {
		return &req, errs.New(errs.BadRequest, "args must be a JSON object")
	}
	return &req, nil
}

// EncodeFrame marshals v as one frame, newline included.
func EncodeFrame(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxFrame {
		return nil, errs.New(errs.FrameTooLarge, "frame of %d bytes exceeds %d", len(b)+1, MaxFrame)
	}
	return append(b, '\n'), nil
}
