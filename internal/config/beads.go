package config

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Beads is [statehub.beads]: each gita repo's beads database (`.beads/` at
// the repo's root, github.com/steveyegge/beads) as State Hub (kind
// "beads"). The issues of a repo's database are its tasks; their labels
// carry the gates.
type Beads struct {
	// Command is the bd program: a name looked up on PATH or an absolute
	// path. Default "bd".
	Command string `toml:"command" json:"command,omitempty"`
	// The labels that carry a task's gates (any one of each list).
	NeedsHumanLabels      []string `toml:"needs_human_labels" json:"needs_human_labels,omitempty"`
	SecretsRequiredLabels []string `toml:"secrets_required_labels" json:"secrets_required_labels,omitempty"`
	DestructiveLabels     []string `toml:"destructive_labels" json:"destructive_labels,omitempty"`
	// TimeoutSeconds bounds one bd command.
	TimeoutSeconds int `toml:"timeout_seconds" json:"timeout_seconds,omitempty"`
}

// The defaults of [statehub.beads], filled in when the kind is beads.
var (
	DefaultBeadsCommand        = "bd"
	DefaultBeadsNeedsHuman     = []string{"human", "needs-human"}
	DefaultBeadsSecrets        = []string{"secret", "secrets-required"}
	DefaultBeadsDestructive    = []string{"destructive"}
	DefaultBeadsTimeoutSeconds = 30
)

// IsZero says whether nothing of the section is set (omitzero).
func (b Beads) IsZero() bool {
	return b.Command == "" && len(b.NeedsHumanLabels) == 0 && len(b.SecretsRequiredLabels) == 0 &&
		len(b.DestructiveLabels) == 0 && b.TimeoutSeconds == 0
}

func (b *Beads) fillDefaults() {
	if b.Command == "" {
		b.Command = DefaultBeadsCommand
	}
	if b.NeedsHumanLabels == nil {
		b.NeedsHumanLabels = slices.Clone(DefaultBeadsNeedsHuman)
	}
	if b.SecretsRequiredLabels == nil {
		b.SecretsRequiredLabels = slices.Clone(DefaultBeadsSecrets)
	}
	if b.DestructiveLabels == nil {
		b.DestructiveLabels = slices.Clone(DefaultBeadsDestructive)
	}
	if b.TimeoutSeconds == 0 {
		b.TimeoutSeconds = DefaultBeadsTimeoutSeconds
	}
}

// validateBeads checks [statehub.beads]: a program name or an absolute
// path, labels that are names, a timeout in range.
func (b Beads) validate() error {
	switch {
	case b.Command != "" && strings.ContainsAny(b.Command, " \t\n"):
		return bad("statehub.beads.command", "%q: one program, a name on PATH or an absolute path, no arguments", textsafe.Escape(b.Command))
	case b.Command != "" && strings.Contains(b.Command, "/") && !filepath.IsAbs(b.Command):
		return bad("statehub.beads.command", "%q: a relative path would depend on where the engine starts; give a name on PATH or an absolute path", textsafe.Escape(b.Command))
	case b.TimeoutSeconds != 0 && (b.TimeoutSeconds < 1 || b.TimeoutSeconds > 600):
		return bad("statehub.beads.timeout_seconds", "%d: must be 1..600", b.TimeoutSeconds)
	}
	seen := map[string]string{}
	for key, list := range map[string][]string{"needs_human_labels": b.NeedsHumanLabels,
		"secrets_required_labels": b.SecretsRequiredLabels, "destructive_labels": b.DestructiveLabels} {
		for _, l := range list {
			if p := textsafe.NameProblem(l); p != "" || l == "" {
				return bad("statehub.beads."+key, "%q: a label's name (%s)", textsafe.Escape(l), p)
			}
			if other, dup := seen[strings.ToLower(l)]; dup && other != key {
				return bad("statehub.beads."+key, "%q is also in statehub.beads.%s; a label carries one gate", l, other)
			}
			seen[strings.ToLower(l)] = key
		}
	}
	return nil
}
