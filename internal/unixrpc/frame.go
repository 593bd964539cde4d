package unixrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/errs"
)

// FrameReader reads newline-terminated frames of at most MaxFrame bytes. It
// starts with a small buffer and grows only for a long frame: most frames are
// a few hundred bytes, and a connection per request makes a 64 KiB buffer per
// connection a steady stream of garbage.
type FrameReader struct {
	r    *bufio.Reader
	long []byte
}

// NewFrameReader wraps r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 4096)}
}

// Next returns the next frame without its newline. The slice is valid until the
// next call. A frame over the limit is errs.FrameTooLarge, after which the
// stream cannot be resynchronized and must be closed. A last frame without a
// newline counts as a frame.
func (fr *FrameReader) Next() ([]byte, error) {
	fr.long = fr.long[:0]
	for {
		chunk, err := fr.r.ReadSlice('\n')
		if len(fr.long)+len(chunk) > MaxFrame {
			return nil, errs.New(errs.FrameTooLarge, "frame exceeds %d bytes", MaxFrame)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			fr.long = append(fr.long, chunk...)
			continue
		case errors.Is(err, io.EOF) && len(fr.long)+len(chunk) > 0:
			if len(fr.long)+len(chunk)+1 > MaxFrame { // as if it had its newline
				return nil, errs.New(errs.FrameTooLarge, "frame exceeds %d bytes", MaxFrame)
			}
			return append(fr.long, chunk...), nil
		case err != nil:
			return nil, err
		}
		line := chunk
		if len(fr.long) > 0 {
			fr.long = append(fr.long, chunk...)
			line = fr.long
		}
		return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
	}
}

// DecodeRequest parses and checks one request frame. The request is returned
// even on error, as far as it was read, so the response can carry its id.
func DecodeRequest(frame []byte) (*Request, error) {
	var req Request
	// JSON is UTF-8. encoding/json would turn invalid bytes inside strings into
	// U+FFFD without a word, so a client that sent raw bytes (not every client
	// is written in Go) would have its text changed instead of refused.
	if at := InvalidUTF8At(frame); at >= 0 {
		return &req, errs.New(errs.BadRequest, "request is not valid UTF-8 (invalid byte at offset %d)", at)
	}
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

// InvalidUTF8At is the offset of the first byte of b that does not begin a
// valid UTF-8 sequence, or -1 when b is valid UTF-8.
func InvalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
