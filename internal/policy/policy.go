// Package policy holds the named policy profiles of spec section 6.1: which action
// categories a profile allows automatically and which always need a human. It is
// pure domain logic; config loads profiles from TOML and validates them here.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Category is an action category a profile can allow or send to a human.
type Category string

// The categories the spec names. A category that a profile neither allows nor
// lists under require_human is treated as requiring a human: profiles grant, they
// never take away a gate by omission.
const (
	StatehubRead         Category = "statehub_read"
	RepoInspect          Category = "repo_inspect"
	RepoEdit             Category = "repo_edit"
	LocalChecks          Category = "local_checks"
	StateUpdates         Category = "state_updates"
	CoordinationMessages Category = "coordination_messages"
	TmuxWake             Category = "tmux_wake"
	TransientRetry       Category = "transient_retry"

	Secrets            Category = "secrets"
	Destructive        Category = "destructive"
	LiveExternal       Category = "live_external"
	ScopeChange        Category = "scope_change"
	AmbiguousOwnership Category = "ambiguous_ownership"
	ExternalPublish    Category = "external_publish"
	Financial          Category = "financial"
	Legal              Category = "legal"

	// OrwellDiagnostics permits the unsafe --orwell diagnostic mode (spec section 10).
	// No built-in profile allows it.
	OrwellDiagnostics Category = "orwell_diagnostics"
)

// Known lists every category, in the order documented.
var Known = []Category{
	StatehubRead, RepoInspect, RepoEdit, LocalChecks, StateUpdates, CoordinationMessages, TmuxWake, TransientRetry,
	Secrets, Destructive, LiveExternal, ScopeChange, AmbiguousOwnership, ExternalPublish, Financial, Legal,
	OrwellDiagnostics,
}

// MaxRetriesLimit is the largest max_attempts the spec allows ("up to
// nine"), which counts retries after the first attempt.
const MaxRetriesLimit = 9

// DefaultName is the profile selected when configuration names none.
const DefaultName = "default"

// Profile is one named policy profile.
type Profile struct {
	Allow                 []Category `toml:"allow" json:"allow"`
	RequireHuman          []Category `toml:"require_human" json:"require_human"`
	SafetyGatedMaxRetries int        `toml:"safety_gated_max_attempts" json:"safety_gated_max_attempts"`
}

// Default returns the conservative default profile exactly as spec section 6.1 writes it.
func Default() Profile {
	return Profile{
		Allow: []Category{StatehubRead, RepoInspect, RepoEdit, LocalChecks, StateUpdates,
			CoordinationMessages, TmuxWake, TransientRetry},
		RequireHuman: []Category{Secrets, Destructive, LiveExternal, ScopeChange,
			AmbiguousOwnership, ExternalPublish, Financial, Legal},
		SafetyGatedMaxRetries: 0,
	}
}

// Allows reports whether the profile lets c happen without a human.
func (p Profile) Allows(c Category) bool { return slices.Contains(p.Allow, c) }

// RequiresHuman reports whether c must stop for a human under this profile.
func (p Profile) RequiresHuman(c Category) bool { return !p.Allows(c) }

// Version is a short hash of the profile's content, so receipts can say exactly
// which rules were in force ("default@1a2b3c4d") even when a profile is edited
// without being renamed.
func (p Profile) Version() string {
	norm := Profile{
		Allow:                 sortedCopy(p.Allow),
		RequireHuman:          sortedCopy(p.RequireHuman),
		SafetyGatedMaxRetries: p.SafetyGatedMaxRetries,
	}
	b, _ := json.Marshal(norm) // a struct of strings and ints always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

func sortedCopy(cs []Category) []Category {
	out := slices.Clone(cs)
	if out == nil {
		out = []Category{}
	}
	slices.Sort(out)
	return out
}

// namePattern is compiled on first use: every command start pays for package
// initialization, and most commands never validate a profile name.
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`) })

// ValidateName checks a profile name: lower-case letters, digits, '_', '.', '-'.
func ValidateName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("invalid profile name %q: use lower-case letters, digits, '_', '.' and '-'", name)
	}
	return nil
}

// Validate checks the profile's own content; the error names the offending key.
func (p Profile) Validate() error {
	seen := map[Category]string{}
	for _, list := range []struct {
		key string
		cs  []Category
	}{{"allow", p.Allow}, {"require_human", p.RequireHuman}} {
		for _, c := range list.cs {
			if !slices.Contains(Known, c) {
				return fmt.Errorf("%s: unknown action category %q (known: %s)", list.key, c, knownList())
			}
			if prev, dup := seen[c]; dup {
				if prev == list.key {
					return fmt.Errorf("%s: %q is listed twice", list.key, c)
				}
				return fmt.Errorf("%q is in both allow and require_human", c)
			}
			seen[c] = list.key
		}
	}
	if p.SafetyGatedMaxRetries < 0 || p.SafetyGatedMaxRetries > MaxRetriesLimit {
		return fmt.Errorf("safety_gated_max_attempts: %d is out of range 0..%d", p.SafetyGatedMaxRetries, MaxRetriesLimit)
	}
	return nil
}

func knownList() string {
	names := make([]string, len(Known))
	for i, c := range Known {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
