package kinds_test

import (
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/kinds"
)

// Each kind the configuration accepts opens its own driver, which says
// so; no other kind opens anything.
func TestOpenTheConfiguredKind(t *testing.T) {
	registry := func() (*gita.Registry, error) { return &gita.Registry{}, nil }
	for kind, base := range map[string]string{config.KindContract: "unix:///run/user/1000/statehub.sock", config.KindGitHub: "https://api.github.com", config.KindBeads: ""} {
		cfg := &config.Loaded{Config: config.Default()}
		cfg.StateHub.Kind, cfg.StateHub.APIBase = kind, base
		hub, err := kinds.Open(cfg, registry, nil)
		if err != nil || hub.Kind() != kind || hub.Report().Kind != kind {
			t.Errorf("%s: %v, %v", kind, hub, err)
		}
	}
	if len(config.Kinds) != 3 {
		t.Errorf("the kinds are %v: open each here", config.Kinds)
	}
	cfg := &config.Loaded{Config: config.Default()}
	cfg.StateHub.Kind = "jira"
	if hub, err := kinds.Open(cfg, registry, nil); err == nil {
		t.Errorf("kind jira opened %v", hub)
	}
}
