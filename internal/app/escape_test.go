package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// An error message quotes what it was given (an argument, a registry row, a
// database row): whatever built it, Run prints it escaped, keeping its lines.
func TestRunEscapesErrors(t *testing.T) {
	var out, errb bytes.Buffer
	a := &App{Program: paths.Tamq, Out: &out, Err: &errb}
	root := NewRoot(a)
	root.AddCommand(&cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error {
		return errs.New(errs.UnknownTarget, "unknown target 'evil\x1b]52;c;aGk=\a'\n\tsecond line").
			WithHint("did you mean 'txt\u202egnp.exe'?")
	}})
	if status := Run(a, root, []string{"fail"}); status != errs.ExitStatus(errs.UnknownTarget) {
		t.Errorf("exit status %d", status)
	}
	want := "tamq: unknown target 'evil\\x1b]52;c;aGk=\\x07'\n\tsecond line\n" +
		"tamq: hint: did you mean 'txt\\u202egnp.exe'?\n"
	if errb.String() != want {
		t.Errorf("stderr\n got %q\nwant %q", errb.String(), want)
	}
	if !textsafe.Inert(errb.String()) {
		t.Errorf("stderr %q could act in a terminal", errb.String())
	}
}

// Printf and Notef escape whatever a command forgot to; text that cannot act
// goes out unchanged.
func TestPrintfAndNotefEscape(t *testing.T) {
	var out, errb bytes.Buffer
	a := &App{Program: paths.Tamq, Out: &out, Err: &errb}
	a.Printf("opened %s\n\tok\n", "evil\x1b[201~\r")
	a.Printf("plain\\path\n")
	a.Notef("window %s", "w\u202e\x07")
	if want := "opened evil\\x1b[201~\\x0d\n\tok\nplain\\path\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if want := "tamq: window w\\u202e\\x07\n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
	if strings.ContainsRune(out.String()+errb.String(), 0x1b) {
		t.Error("an ESC got through")
	}
}
