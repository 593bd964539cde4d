package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Run executes the command line and returns the process exit status. Every error
// leaves here: usage errors (unknown command, flag or argument) exit 2 with a hint
// to --help; all others exit with the status their code maps to.
func Run(a *App, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetIn(a.In)
	root.SetOut(a.Out)
	root.SetErr(a.Err)
	explainBashCompletion(root, args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var pass PassStatus
	if errors.As(err, &pass) {
		return int(pass)
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		// Cobra's own errors (unknown command, bad flag, wrong argument count) are
		// untyped and arise before any command ran; anything untyped after that is a bug.
		code := errs.Internal
		if !started(root) {
			code = errs.Usage
		}
		e = &errs.Error{Code: code, Message: err.Error(), Err: err}
	}
	if e.Code == errs.Usage && e.Hint == "" && cmd != nil {
		e.Hint = fmt.Sprintf("run '%s --help' for usage", cmd.CommandPath())
	}
	status := errs.ExitStatus(e.Code)
	if a.JSON {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"code": e.Code, "message": e.Message, "hint": e.Hint, "exit_status": status,
		}})
		fmt.Fprintf(a.Err, "%s\n", b)
		return status
	}
	// Cobra's messages can span lines (suggestions); keep them, prefixed once.
	// A message may quote what came from anywhere (an argument, the registry,
	// a database row, a line being replayed): escaped, nothing in it can act
	// in the terminal, whichever error built it.
	fmt.Fprintf(a.Err, "%s: %s\n", a.Name(), textsafe.EscapeText(strings.TrimRight(e.Message, "\n")))
	if e.Hint != "" {
		fmt.Fprintf(a.Err, "%s: hint: %s\n", a.Name(), textsafe.EscapeText(e.Hint))
	}
	return status
}

// startedAnnotation marks, on the root, that argument parsing succeeded and a
// command began to run.
const startedAnnotation = "cli.started"

func markStarted(root *cobra.Command) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[startedAnnotation] = "yes"
}

func started(root *cobra.Command) bool { return root.Annotations[startedAnnotation] == "yes" }

// PassStatus is returned by a command that passes on another program's exit
// status (the broker passes on its agent's): Run exits with it and prints
// nothing.
type PassStatus int

func (p PassStatus) Error() string { return fmt.Sprintf("exit status %d", int(p)) }

// UsageError is for a command's own argument checks that cobra cannot express.
func UsageError(format string, args ...any) error {
	return errs.New(errs.Usage, format, args...)
}
