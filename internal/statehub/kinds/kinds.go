// Package kinds opens the State Hub driver a configuration names
// ([statehub] kind): the one place that knows every kind, so that the
// engine, its doctor and its status hold a statehub.Hub and nothing more.
package kinds

import (
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/statehub/github"
)

// Open makes the driver of cfg's kind of State Hub. registry is gita's
// registry, which a tracker of repositories (GitHub) watches; clk its
// clock (nil: the system's).
func Open(cfg *config.Loaded, registry func() (*gita.Registry, error), clk clock.Clock) (statehub.Hub, error) {
	h := cfg.StateHub
	switch h.HubKind() {
	case config.KindContract:
		return &statehub.Client{Base: h.APIBase, Credential: h.CredentialCommand}, nil
	case config.KindGitHub:
		return github.New(github.Options{APIBase: h.APIBase, Credential: h.CredentialCommand, Settings: h.GitHub, Registry: registry, Clock: clk})
	case config.KindBeads:
		return beads.New(beads.Options{Settings: h.Beads, Registry: registry, Clock: clk})
	}
	// Validation accepts no other kind.
	return nil, errs.New(errs.ConfigInvalid, "statehub.kind %q has no driver in this build", h.Kind)
}
