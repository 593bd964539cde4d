package policy

import (
	"strings"
	"testing"
)

func TestDefaultProfileIsTheSpecs(t *testing.T) {
	p := Default()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Category{StatehubRead, RepoInspect, RepoEdit, LocalChecks, StateUpdates, CoordinationMessages, TmuxWake, TransientRetry} {
		if !p.Allows(c) {
			t.Errorf("default does not allow %s", c)
		}
	}
	for _, c := range []Category{Secrets, Destructive, LiveExternal, ScopeChange, AmbiguousOwnership, ExternalPublish, Financial, Legal, OrwellDiagnostics} {
		if !p.RequiresHuman(c) {
			t.Errorf("default does not require a human for %s", c)
		}
	}
	if p.SafetyGatedMaxRetries != 0 {
		t.Errorf("safety_gated_max_attempts = %d", p.SafetyGatedMaxRetries)
	}
}

func TestVersionIsStableAndOrderFree(t *testing.T) {
	a := Default()
	b := Default()
	b.Allow[0], b.Allow[1] = b.Allow[1], b.Allow[0]
	if a.Version() != b.Version() {
		t.Errorf("order changed the version: %s vs %s", a.Version(), b.Version())
	}
	if len(a.Version()) != 8 {
		t.Errorf("version %q is not 8 hex digits", a.Version())
	}
	c := Default()
	c.SafetyGatedMaxRetries = 1
	if c.Version() == a.Version() {
		t.Error("a content change kept the version")
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		p    Profile
		want string
	}{
		{Profile{Allow: []Category{"teleport"}}, `allow: unknown action category "teleport"`},
		{Profile{RequireHuman: []Category{"nope"}}, `require_human: unknown action category "nope"`},
		{Profile{Allow: []Category{RepoEdit, RepoEdit}}, `allow: "repo_edit" is listed twice`},
		{Profile{Allow: []Category{Secrets}, RequireHuman: []Category{Secrets}}, `"secrets" is in both allow and require_human`},
		{Profile{SafetyGatedMaxRetries: 10}, "safety_gated_max_attempts: 10 is out of range 0..9"},
		{Profile{SafetyGatedMaxRetries: -1}, "safety_gated_max_attempts: -1 is out of range 0..9"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.p, err, tt.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"default", "ci-2", "team.strict", "a_b"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Default", "-x", "has space", strings.Repeat("a", 64)} {
		if ValidateName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
