package errs

import (
	"errors"
	"fmt"
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
