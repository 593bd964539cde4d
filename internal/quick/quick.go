// Package quick is what the commands agents run on every message need, kept
// lean: output and error reporting in the form every command of ours uses,
// and ping. tamq's front program (cmd/tamq) runs `tamq ping` and `tamq send`
// with it and links nothing else of tamq, because a command's start costs
// every package the binary links (docs/performance.md); the full programs'
// commands print through the same functions, so both print alike.
package quick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/rpc"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Output is where a command prints and how: the program's name and the global
// --json and --quiet flags.
type Output struct {
	Program string
	Out     io.Writer
	Err     io.Writer
	JSON    bool
	Quiet   bool
}

// PrintJSON writes v to stdout as one indented JSON document. Its strings are
// not escaped for a terminal: encoding/json writes control characters below
// U+0020 (ESC, BEL, CR...) and U+2028/U+2029 as \u escapes, but C1 controls,
// DEL and bidirectional format characters are valid UTF-8 and go out as they
// are. That is right for JSON, whose reader is a program that gets the value
// back exactly; a program that shows a value to a person escapes it itself.
func (o Output) PrintJSON(v any) error {
	enc := json.NewEncoder(o.Out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Printf writes human output to stdout. Commands escape the names they print;
// escaping the whole text again is the second line of defence for a field one
// forgot (a no-op on text that cannot act).
func (o Output) Printf(format string, args ...any) {
	io.WriteString(o.Out, textsafe.EscapeText(fmt.Sprintf(format, args...)))
}

// Report prints e on stderr, as one JSON record under --json, and returns the
// exit status its code maps to.
func (o Output) Report(e *errs.Error) int {
	status := errs.ExitStatus(e.Code)
	if o.JSON {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"code": e.Code, "message": e.Message, "hint": e.Hint, "exit_status": status,
		}})
		fmt.Fprintf(o.Err, "%s\n", b)
		return status
	}
	// Cobra's messages can span lines (suggestions); keep them, prefixed once.
	// A message may quote what came from anywhere (an argument, the registry,
	// a database row, a line being replayed): escaped, nothing in it can act
	// in the terminal, whichever error built it.
	fmt.Fprintf(o.Err, "%s: %s\n", o.Program, textsafe.EscapeText(strings.TrimRight(e.Message, "\n")))
	if e.Hint != "" {
		fmt.Fprintf(o.Err, "%s: hint: %s\n", o.Program, textsafe.EscapeText(e.Hint))
	}
	return status
}

// pingRecord is ping's --json record.
type pingRecord struct {
	rpc.PingResult
	RoundTripMS float64 `json:"round_trip_ms"`
}

// Ping is both programs' `ping`: one round trip to the service at p.
func Ping(ctx context.Context, p paths.Paths, o Output) error {
	start := time.Now()
	res, err := rpc.Ping(ctx, p)
	if err != nil {
		return err
	}
	rtt := float64(time.Since(start).Microseconds()) / 1000
	if o.JSON {
		return o.PrintJSON(pingRecord{PingResult: res, RoundTripMS: rtt})
	}
	if !o.Quiet {
		o.Printf("%s is alive (pid %d, version %s, protocol %s, %.2f ms)\n", o.Program, res.PID, res.ServerVersion, res.Proto, rtt)
	}
	return nil
}

// Fail reports err as Report does; an error without a code is a bug
// (internal).
func (o Output) Fail(err error) int {
	var e *errs.Error
	if !errors.As(err, &e) {
		e = &errs.Error{Code: errs.Internal, Message: err.Error(), Err: err}
	}
	return o.Report(e)
}
