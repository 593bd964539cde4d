// Package errs gives every failure a stable code. The codes are shared by the CLI
// (which maps them to exit statuses here, once) and by the local socket protocol
// (which sends them on the wire), so a caller sees the same code either way.
package errs

import (
	"errors"
	"fmt"
)

// Code is a stable, documented identifier of a kind of failure. Never rename one:
// scripts and the socket protocol depend on them.
type Code string

const (
	Internal       Code = "internal"       // a bug or an unexpected condition
	Usage          Code = "usage"          // bad command line: unknown command, flag or argument
	ConfigInvalid  Code = "config_invalid" // config file unreadable, malformed, unknown key or bad value
	RegistryError  Code = "registry_error" // gita registry missing, unreadable or malformed
	UnknownTarget  Code = "unknown_target" // a repo slug that is not registered in gita
	Storage        Code = "storage_error"  // SQLite failure, unreadable or unwritable state dir
	SchemaTooNew   Code = "schema_too_new" // the database was written by a newer binary
	Unavailable    Code = "unavailable"    // the service (or a needed endpoint) is not running, or takes no more connections now
	PermissionDeny Code = "permission_denied"
	BodyTooLarge   Code = "body_too_large"
	BodyInvalid    Code = "body_invalid" // not UTF-8, or binary control bytes
	NotFound       Code = "not_found"
	Conflict       Code = "conflict" // e.g. an idempotency key reused for a different request
	PolicyRefused  Code = "policy_refused"
	BadRequest     Code = "bad_request" // malformed protocol frame or arguments
	Incompatible   Code = "incompatible_protocol"
	Timeout        Code = "timeout"
	FrameTooLarge  Code = "frame_too_large" // a protocol frame over the 64 KiB limit
	UnknownOp      Code = "unknown_op"      // a protocol operation the service does not have
	ShuttingDown   Code = "shutting_down"   // the service is stopping and takes no new work
	AlreadyRunning Code = "already_running" // another service holds the state dir or listens on the socket
	LeaseState     Code = "lease_state"     // a coordination lease is in a state that does not allow the request
	LeaseExpired   Code = "lease_expired"   // a coordination lease ran out before the request (a new attempt may follow)
	Unsupported    Code = "unsupported"     // the peer (State Hub) does not offer what was asked: it answered 404 or 405 to a route the contract makes optional
)

// exitStatus is the one table from codes to process exit statuses. 0 is success,
// 1 is reserved for Internal, 2 for usage errors (the convention of getopt tools).
var exitStatus = map[Code]int{
	Internal:       1,
	Usage:          2,
	ConfigInvalid:  3,
	RegistryError:  4,
	UnknownTarget:  5,
	Storage:        6,
	SchemaTooNew:   7,
	Unavailable:    8,
	PermissionDeny: 9,
	BodyTooLarge:   10,
	BodyInvalid:    11,
	NotFound:       12,
	Conflict:       13,
	PolicyRefused:  14,
	BadRequest:     15,
	Incompatible:   16,
	Timeout:        17,
	FrameTooLarge:  18,
	UnknownOp:      19,
	ShuttingDown:   20,
	AlreadyRunning: 21,
	LeaseState:     22,
	LeaseExpired:   23,
	Unsupported:    24,
}

// Codes lists every code in exit-status order, for documentation and tests.
func Codes() []Code {
	out := make([]Code, 0, len(exitStatus))
	for status := 1; status <= len(exitStatus); status++ {
		for code, s := range exitStatus {
			if s == status {
				out = append(out, code)
			}
		}
	}
	return out
}

// ExitStatus maps a code to the process exit status; unknown codes are internal errors.
func ExitStatus(code Code) int {
	if s, ok := exitStatus[code]; ok {
		return s
	}
	return exitStatus[Internal]
}

// Error is a failure with a stable code, a one-line message for people and an
// optional hint saying what to do about it.
type Error struct {
	Code    Code
	Message string
	Hint    string
	Err     error // the underlying cause, if any; never shown unless Message omits it
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// New builds an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an Error whose message is "<message>: <cause>".
func Wrap(code Code, cause error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &Error{Code: code, Message: msg, Err: cause}
}

// During names what was being done (op) when err happened, under code,
// unless err already carries a code of its own (a refused transition, a
// missing row), which passes unchanged; nil stays nil. A driver's error
// says what went wrong, not what the program was doing.
func During(code Code, err error, op string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return Wrap(code, err, "%s", op)
}

// WithHint returns e with a hint attached.
func (e *Error) WithHint(format string, args ...any) *Error {
	e.Hint = fmt.Sprintf(format, args...)
	return e
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
