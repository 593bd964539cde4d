// Package front is the `tamq` program people and agents run (cmd/tamq). It
// runs `tamq send` and `tamq ping` itself and hands every other command line,
// unchanged, to the full program, tamq-full, installed in the same directory.
//
// Why two binaries: agents run `tamq send` for every message they send, and a
// Go program's start pays for every package it links, whichever command runs.
// The full program links SQLite, tmux, the broker and the terminal UI, and
// starts more than twice as slowly as a hello-world; this front links only
// what send and ping need (docs/performance.md).
//
// The front understands only the plain forms of those two commands: a flag or
// argument it does not know, --help, or a wrong count of arguments goes to
// tamq-full, whose command line says what is wrong exactly as for any other
// command. What send and ping do and print is the same code in both programs
// (Send here, quick.Ping).
package front

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/quick"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// FullProgram is the name of the full tamq program, next to this one.
const FullProgram = "tamq-full"

// Main runs tamq's command line and returns the exit status; for a command
// the front does not run itself it does not return, but becomes tamq-full.
func Main(args []string) int {
	o := quick.Output{Program: string(paths.Tamq), Out: os.Stdout, Err: os.Stderr}
	line, ok := parse(args)
	if !ok {
		o.JSON = slices.Contains(args, "--json") // for the one error it may print
		return o.Fail(execFull(args))
	}
	o.JSON, o.Quiet = line.json, line.quiet
	p, err := paths.Resolve(paths.Tamq, os.Getenv)
	if err == nil {
		if line.command == "ping" {
			err = quick.Ping(context.Background(), p, o)
		} else {
			err = Send(context.Background(), p, os.Stdin, line.text, line.send, o)
		}
	}
	var e *errs.Error
	if errors.As(err, &e) && e.Code == errs.Usage && e.Hint == "" {
		e.Hint = "run 'tamq " + line.command + " --help' for usage" // as for any command
	}
	if err != nil {
		return o.Fail(err)
	}
	return 0
}

// commandLine is a send or ping command line the front runs itself.
type commandLine struct {
	command              string // "send" or "ping"
	text                 string // send's argument
	send                 SendOptions
	json, quiet, verbose bool
}

// parse reads args as pflag would for `tamq send` and `tamq ping` (flags
// anywhere, `--flag value` and `--flag=value`, the last of a repeated flag
// wins), and says false for anything else: those go to tamq-full.
func parse(args []string) (commandLine, bool) {
	var l commandLine
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "--json":
			l.json = true
		case "--quiet", "-q":
			l.quiet = true
		case "--verbose", "-v":
			l.verbose = true
		case "--endpoint", "--ack-mode":
			if !hasValue {
				// A value that looks like a flag is left to pflag's judgement.
				if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") {
					return l, false
				}
				i++
				value = args[i]
			}
			if name == "--endpoint" {
				l.send.Endpoint = value
			} else {
				l.send.AckMode = value
			}
			continue
		default:
			return l, false // --help, --, combined short flags, a flag of another command
		}
		if hasValue {
			return l, false // --json=false and the like
		}
	}
	if l.quiet && l.verbose || len(positional) == 0 {
		return l, false
	}
	l.command = positional[0]
	switch {
	case l.command == "ping" && len(positional) == 1 && l.send == (SendOptions{}):
		return l, true
	case l.command == "send" && len(positional) == 2:
		l.text = positional[1]
		return l, true
	}
	return l, false
}

// SendOptions are tamq send's own flags.
type SendOptions struct {
	Endpoint string // --endpoint
	AckMode  string // --ack-mode
}

// Send is `tamq send`: text is the message, or "-" to read it from in.
func Send(ctx context.Context, p paths.Paths, in io.Reader, text string, opt SendOptions, o quick.Output) error {
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(in, queue.MaxBody*2))
		if err != nil {
			return errs.Wrap(errs.BodyInvalid, err, "cannot read standard input")
		}
		// The line end a shell or editor adds is not part of the message.
		var ended bool
		if text, ended = strings.CutSuffix(string(b), "\n"); ended {
			text = strings.TrimSuffix(text, "\r")
		}
	}
	// Checked here, on the raw bytes: encoding the request as JSON would
	// silently turn invalid bytes into U+FFFD.
	if at := protocol.InvalidUTF8At([]byte(text)); at >= 0 {
		return errs.New(errs.BodyInvalid, "the message is not valid UTF-8 (invalid byte at offset %d); bodies are UTF-8 text", at)
	}
	m, err := client.New(p).Send(ctx, api.SendArgs{Text: text, EndpointID: opt.Endpoint, AckMode: opt.AckMode})
	if err != nil {
		return err
	}
	if o.JSON {
		return o.PrintJSON(m) // last_error says why it waits
	}
	if !o.Quiet {
		o.Printf("queued %s for %s (%s mode)\n", textsafe.Escape(m.ID), textsafe.Escape(m.Target), textsafe.Escape(m.AckMode))
		if note := waitNote(m); note != "" {
			// Queued is not delivered: the sender learns now that the window
			// cannot take it, and why (a shell there, a dialog open).
			io.WriteString(o.Err, textsafe.EscapeText(o.Program+": queued; it waits: "+note+"\n"))
		}
	}
	return nil
}

// NoAgentRunning is the wait reason of a window without an agent: the
// service's program.NoAgentRunning, which the front does not link (it links
// only what send needs).
const NoAgentRunning = "no agent running"

// waitNote says why a message just queued waits for its window, or "" when
// it does not: "no agent running in beta's window".
func waitNote(m api.Message) string {
	if m.State != "queued" || m.LastError == "" {
		return ""
	}
	target := textsafe.Escape(m.Target)
	if m.LastError == NoAgentRunning {
		return NoAgentRunning + " in " + target + "'s window"
	}
	return target + "'s window: " + m.LastError
}

// execFull replaces this process with tamq-full and the same arguments; it
// returns only when that cannot be done.
func execFull(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot find where tamq is installed")
	}
	full := filepath.Join(filepath.Dir(self), FullProgram)
	err = syscall.Exec(full, append([]string{full}, args...), os.Environ())
	if errors.Is(err, syscall.ENOENT) {
		return errs.New(errs.Unavailable, "%s is missing: tamq runs it for every command but send and ping, from the directory tamq is in", full).
			WithHint("install both programs: `make install`, or `go install ./cmd/...` in tamq's source")
	}
	return errs.Wrap(errs.Internal, err, "cannot run %s", full)
}
