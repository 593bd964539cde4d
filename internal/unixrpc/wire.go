package unixrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Version is the protocol version this build speaks. It is versioned
// independently of the programs: a different major is refused, a different minor
// interoperates at the lower of the two.
const Version = "0.1"

// Names are what a program tells the transport about itself, so that
// messages and hints name the program and the variable that moves its socket.
type Names struct {
	Program   string // "tamq"
	SocketVar string // "TAMQ_SOCKET"; "" for a socket no variable moves
}

// Name is the name to use in messages.
func (n Names) Name() string {
	if n.Program == "" {
		return "the service"
	}
	return n.Program
}

// MoveSocket is the hint's advice for a socket path that cannot be used.
func (n Names) MoveSocket() string {
	if n.SocketVar == "" {
		return "choose a socket path of your own"
	}
	return "choose a socket path of your own with " + n.SocketVar + " or XDG_RUNTIME_DIR"
}

// MaxFrame is the largest frame, newline included, either side accepts.
const MaxFrame = 64 << 10

// Request is one frame from client to server.
type Request struct {
	Proto string          `json:"proto"`
	Op    string          `json:"op"`
	ID    string          `json:"id"`
	Args  json.RawMessage `json:"args,omitempty"`
}

// Response answers the Request with the same ID.
type Response struct {
	Proto  string          `json:"proto"`
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a failed request: a code from the closed list in docs/protocol.md.
type Error struct {
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
	Hint    string    `json:"hint,omitempty"`
}

// AsError turns a wire error into the error a caller handles.
func (e *Error) AsError() *errs.Error {
	return &errs.Error{Code: e.Code, Message: e.Message, Hint: e.Hint}
}

// version is a parsed major.minor.
type version struct{ major, minor int }

func parseVersion(s string) (version, error) {
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return version{}, fmt.Errorf("protocol version %q is not MAJOR.MINOR", s)
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return version{}, fmt.Errorf("protocol version %q is not MAJOR.MINOR", s)
	}
	return version{a, b}, nil
}

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// Negotiate returns the version both sides speak when a peer offers theirs: the
// same major is required, and the lower minor wins.
func Negotiate(ours, theirs string) (string, error) {
	o, err := parseVersion(ours)
	if err != nil {
		return "", errs.New(errs.Internal, "%v", err)
	}
	t, err := parseVersion(theirs)
	if err != nil {
		return "", errs.New(errs.BadRequest, "%v", err)
	}
	if o.major != t.major {
		return "", errs.New(errs.Incompatible, "protocol %s is incompatible with this service's %s", theirs, ours).
			WithHint("use client and service builds with the same protocol major version")
	}
	return version{o.major, min(o.minor, t.minor)}.String(), nil
}

// NoArgs refuses args for an operation that takes none: any field is an
// unknown one (DecodeArgs).
func NoArgs(req *Request) error { return DecodeArgs(req, &struct{}{}) }

// DecodeArgs unmarshals a request's args strictly: an unknown field is a bad
// request, so a typo in a client is caught rather than ignored.
func DecodeArgs(req *Request, v any) error {
	if len(req.Args) == 0 || string(req.Args) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(req.Args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errs.New(errs.BadRequest, "bad %s arguments: %v", req.Op, err)
	}
	return nil
}
