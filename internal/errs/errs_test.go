package errs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestExitStatusesAreDistinct(t *testing.T) {
	seen := map[int]Code{}
	for _, c := range Codes() {
		s := ExitStatus(c)
		if s == 0 {
			t.Errorf("%s maps to success", c)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("%s and %s share exit status %d", prev, c, s)
		}
		seen[s] = c
	}
	if len(Codes()) != len(exitStatus) {
		t.Errorf("Codes() lists %d of %d codes", len(Codes()), len(exitStatus))
	}
	if ExitStatus(Usage) != 2 || ExitStatus(Internal) != 1 {
		t.Error("usage must exit 2 and internal 1")
	}
	if ExitStatus("no_such_code") != 1 {
		t.Error("unknown codes must map to the internal status")
	}
}

func TestCodeOfFindsWrappedErrors(t *testing.T) {
	base := New(UnknownTarget, "unknown target %q", "x").WithHint("see gita ls")
	wrapped := fmt.Errorf("sending: %w", base)
	if CodeOf(wrapped) != UnknownTarget || !Is(wrapped, UnknownTarget) {
		t.Errorf("CodeOf(%v) = %s", wrapped, CodeOf(wrapped))
	}
	if CodeOf(errors.New("plain")) != Internal {
		t.Error("an untyped error must be internal")
	}
	cause := errors.New("disk full")
	w := Wrap(Storage, cause, "write %s", "/db")
	if w.Error() != "write /db: disk full" || !errors.Is(w, cause) {
		t.Errorf("Wrap = %q", w.Error())
	}
}

// docs/cli.md's table of exit statuses lists every code with its status, and
// nothing else: scripts read the table, not this file.
func TestExitStatusTableInDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| ([0-9]+) \\| `([a-z_]+)` \\|")
	documented := map[Code]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		status, _ := strconv.Atoi(m[1])
		documented[Code(m[2])] = status
	}
	for _, c := range Codes() {
		if got, ok := documented[c]; !ok || got != ExitStatus(c) {
			t.Errorf("docs/cli.md: %s is listed with status %d (listed: %v), want %d", c, got, ok, ExitStatus(c))
		}
	}
	if len(documented) != len(Codes()) {
		t.Errorf("docs/cli.md lists %d codes, the table here %d", len(documented), len(Codes()))
	}
	if ExitStatus(Unsupported) != 24 {
		t.Errorf("unsupported exits %d, want 24 (appended after lease_expired)", ExitStatus(Unsupported))
	}
}

// During wraps a driver's error under the code, naming what was being
// done, and lets an error that has its own code through unchanged.
func TestDuringKeepsAnErrorsOwnCode(t *testing.T) {
	if During(Storage, nil, "read") != nil {
		t.Error("nil did not stay nil")
	}
	plain := During(Storage, io.ErrUnexpectedEOF, "read receipts")
	if CodeOf(plain) != Storage || !strings.Contains(plain.Error(), "read receipts") || !errors.Is(plain, io.ErrUnexpectedEOF) {
		t.Errorf("a driver's error: %v (%s)", plain, CodeOf(plain))
	}
	coded := New(NotFound, "no lease L")
	if got := During(Storage, coded, "read a lease"); got != error(coded) {
		t.Errorf("a coded error came back as %v", got)
	}
}
