package app

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Run executes the command line and returns the process exit status. Every error
// leaves here: usage errors (unknown command, flag or argument) exit 2 with a hint
// to --help; all others exit with the status their code maps to.
func Run(a *App, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetIn(a.In)
	root.SetOut(a.Out)
	root.SetErr(a.Err)
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
	return a.Output().Report(e)
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
