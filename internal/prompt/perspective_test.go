package prompt

import (
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The fourth built-in template names the configured hall-of-helix
// destination; with none configured it says so and where the entry goes
// instead. A repository's own templates replace all four.
func TestThePerspectiveDestinationFillsTheFourthTemplate(t *testing.T) {
	in := input(nil)
	in.PerspectiveDestination = "~/halls/helix/net-kingdom.md"
	p := Build(in)
	if !strings.Contains(p, " 4. if no safe work remains, close the session and write a perspective entry to the configured hall-of-helix destination: ~/halls/helix/net-kingdom.md.\n") {
		t.Errorf("prompt with a destination:\n%s", p)
	}
	if strings.Contains(p, "none is configured") {
		t.Errorf("a configured destination is said to be unset:\n%s", p)
	}
	in.PerspectiveDestination = ""
	if p := Build(in); !strings.Contains(p, "hall-of-helix destination; none is configured (coordination.perspective_destination), so put the entry in your last checkpoint's --summary instead.\n") {
		t.Errorf("prompt without a destination does not say what to do:\n%s", p)
	}
	in.PerspectiveDestination, in.Templates = "~/halls/x", []string{"stop."}
	if p := Build(in); strings.Contains(p, "hall-of-helix") {
		t.Errorf("the destination shows beside the repository's own templates:\n%s", p)
	}
}

func TestCheckDestination(t *testing.T) {
	for d, ok := range map[string]bool{
		"": true, "~/halls/helix.md": true, "https://helix.example/halls/net": true,
		" padded": false, "a\nb": false, "bell\a": false, strings.Repeat("d", MaxDestinationBytes+1): false, "\xff": false,
	} {
		err := CheckDestination(d)
		if (err == nil) != ok || (err != nil && !errs.Is(err, errs.ConfigInvalid)) {
			t.Errorf("CheckDestination(%q) = %v", d, err)
		}
	}
}
