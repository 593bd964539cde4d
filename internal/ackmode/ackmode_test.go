package ackmode

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, name := range Names() {
		if m, err := Parse(name); err != nil || string(m) != name {
			t.Errorf("Parse(%q) = %q, %v", name, m, err)
		}
	}
	if !slices.Equal(Names(), []string{"injected", "acknowledged"}) {
		t.Errorf("Names() = %q", Names())
	}
	for _, bad := range []string{"", "Injected", "maybe"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := Parse("maybe"); err == nil || err.Error() != `"maybe" is not injected or acknowledged` {
		t.Errorf("error %v", err)
	}
}
