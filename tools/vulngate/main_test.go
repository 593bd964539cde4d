package main

import (
	"strings"
	"testing"
)

func TestGate(t *testing.T) {
	const (
		stdlibReached = `{"finding":{"osv":"GO-2026-6599","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get"}]}}`
		depImported   = `{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.2.4","trace":[{"module":"example.com/dep","version":"v1.2.3","package":"example.com/dep"}]}}`
		depReached    = `{"finding":{"osv":"GO-2026-0002","fixed_version":"v1.2.5","trace":[{"module":"example.com/dep","version":"v1.2.3","package":"example.com/dep","function":"Parse"},{"module":"github.com/tmux-amq/tamq","function":"main"}]}}`
		others        = `{"config":{"protocol_version":"v1.0.0"}}` + "\n" + `{"osv":{"id":"GO-2026-0002"}}`
	)
	for _, c := range []struct {
		name   string
		in     string
		status int
		says   string
	}{
		{"nothing found", others, 0, "no vulnerability reached in a dependency; 0 in the standard library"},
		{"the standard library only: a warning", others + "\n" + stdlibReached + "\n" + stdlibReached, 0, "warning: GO-2026-6599 in the standard library of v1.26.8, fixed in v1.26.9"},
		{"a dependency imported, never called", depImported, 0, "no vulnerability reached"},
		{"a dependency's function reached", stdlibReached + depReached + depImported, 1, "GO-2026-0002 in example.com/dep@v1.2.3, fixed in v1.2.5: move to the fixed version (go get example.com/dep@v1.2.5)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			status, err := gate(strings.NewReader(c.in), &out)
			if err != nil || status != c.status || !strings.Contains(out.String(), c.says) {
				t.Errorf("status %d, err %v, want %d saying %q:\n%s", status, err, c.status, c.says, out.String())
			}
			if c.status == 1 && strings.Contains(out.String(), "GO-2026-0001") {
				t.Errorf("an imported, uncalled vulnerability was reported:\n%s", out.String())
			}
		})
	}
	if _, err := gate(strings.NewReader(`{"finding":`), &strings.Builder{}); err == nil {
		t.Error("a cut stream read as clean")
	}
}

// TestAFailedScanFails: govulncheck's own failure is never a clean scan.
func TestAFailedScanFails(t *testing.T) {
	t.Setenv("GO", "false")
	if code, err := run([]string{"./..."}); err == nil {
		t.Errorf("a scan that failed passed with status %d", code)
	}
}
