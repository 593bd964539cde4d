// Package jsonl is tamq's JSONL export format (docs/jsonl.md): one message
// envelope per line. It owns the line's version, how a message becomes a
// line, how a line is read back and checked into the entry a replay sends,
// and the reader that splits a file into lines of bounded length. The export
// and replay commands only move the bytes; the store's fast export path
// (store.ExportLines) builds the same line inside SQLite, and a test keeps
// the two equal.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Version is the version of the line. A reader refuses lines of a newer
// version.
const Version = 1

// Envelope is one line: the whole message, body included.
type Envelope struct {
	V int `json:"v"`
	api.Message
}

// Encode is the line of m, without its newline.
func Encode(m api.Message) ([]byte, error) {
	b, err := json.Marshal(Envelope{V: Version, Message: m})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "encode message %s", m.ID)
	}
	return b, nil
}

// MaxLine bounds one line: a valid envelope is far smaller (an 8 KiB body
// escapes to at most 48 KiB), so a longer line is rejected unread.
const MaxLine = 256 << 10

// ErrLineTooLong is what Reader.Next reports for a line over MaxLine: the
// line's rejection, as replay reports it.
var ErrLineTooLong = errs.New(errs.BodyTooLarge, "the line is longer than %d bytes", MaxLine)

// Reader reads a file line by line.
type Reader struct {
	br *bufio.Reader
}

// NewReader reads lines from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next reads one line without its newline; the line is valid until the
// next call. At the end it returns io.EOF, with the last line when that had
// no newline. A line over MaxLine is read to its end and dropped, with
// ErrLineTooLong; the next call reads the line after it.
func (r *Reader) Next() ([]byte, error) {
	var line []byte
	for {
		part, err := r.br.ReadSlice('\n')
		if len(line)+len(part) > MaxLine+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, ErrLineTooLong
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte{'\n'}), err
	}
}

// DecodeLine reads one line into the entry a replay sends. The line must
// carry its version, name its id, sender and target, and pass the rules of
// a new message (queue.CleanBody for the body, queue.CheckFields for the
// rest), so a bad line is named by its number before anything is sent and
// an oversized body never travels. Errors carry a code and never quote the
// line.
func DecodeLine(raw []byte) (api.ReplayEntry, error) {
	// Checked on the raw bytes, before decoding: encoding/json would replace
	// invalid bytes with U+FFFD and replay a body that was never sent.
	if at := unixrpc.InvalidUTF8At(raw); at >= 0 {
		return api.ReplayEntry{}, errs.New(errs.BodyInvalid, "the line is not valid UTF-8 (invalid byte at offset %d)", at)
	}
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return api.ReplayEntry{}, errs.New(errs.BadRequest, "not a JSON message envelope: %s", jsonProblem(err, len(raw)))
	}
	switch {
	case env.V == 0:
		return api.ReplayEntry{}, errs.New(errs.BadRequest, `the line has no version field "v"`)
	case env.V > Version:
		return api.ReplayEntry{}, errs.New(errs.Incompatible, "the line is version %d; this tamq reads up to %d", env.V, Version)
	}
	if env.Body == nil {
		return api.ReplayEntry{}, errs.New(errs.BodyInvalid, "the line has no body")
	}
	if _, err := queue.CleanBody(*env.Body); err != nil {
		return api.ReplayEntry{}, err
	}
	if env.ID == "" || env.Target == "" || env.Sender == "" {
		return api.ReplayEntry{}, errs.New(errs.BadRequest, "the line lacks id, sender or target")
	}
	if err := queue.CheckFields(fields(env)...); err != nil {
		return api.ReplayEntry{}, err
	}
	original := env.ReplayOf
	if original == "" {
		original = env.ID
	}
	return api.ReplayEntry{
		Original: original, Sender: env.Sender, SenderKind: env.SenderKind, Target: env.Target, Body: *env.Body,
		AckMode: env.AckMode, IdempotencyKey: env.IdempotencyKey, CorrelationID: env.CorrelationID,
		CoordinationEndpointID: env.CoordinationEndpointID,
	}, nil
}

// fields are the fields of a line that the replayed message keeps: the
// service checks them again; checking here names the line.
func fields(env Envelope) [][2]string {
	return [][2]string{{"id", env.ID}, {"replay_of", env.ReplayOf}, {"sender", env.Sender}, {"sender_kind", env.SenderKind},
		{"target", env.Target}, {"ack_mode", env.AckMode}, {"idempotency_key", env.IdempotencyKey},
		{"correlation_id", env.CorrelationID}, {"coordination_endpoint_id", env.CoordinationEndpointID}}
}

// jsonProblem describes a JSON error without quoting the line's content:
// the line may hold a body, which is never echoed into an error.
func jsonProblem(err error, size int) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && syn.Offset >= int64(size):
		return "the line is cut short"
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type", typ.Field)
	}
	return "invalid JSON"
}
