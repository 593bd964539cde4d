package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// GitHub is [statehub.github]: GitHub Issues as State Hub (kind "github").
// Each gita repo whose origin is a GitHub repository is watched; its issues
// that carry Label are its tasks. The labels are the trust boundary: only
// people with triage access to a repository can set them, so an issue a
// stranger opens wakes nobody, whatever it says (docs/trackers.md).
type GitHub struct {
	// Label marks the issues that are tasks.
	Label string `toml:"label" json:"label,omitempty"`
	// The labels that carry a task's status and gates.
	InProgressLabel      string `toml:"in_progress_label" json:"in_progress_label,omitempty"`
	BlockedLabel         string `toml:"blocked_label" json:"blocked_label,omitempty"`
	NeedsHumanLabel      string `toml:"needs_human_label" json:"needs_human_label,omitempty"`
	SecretsRequiredLabel string `toml:"secrets_required_label" json:"secrets_required_label,omitempty"`
	DestructiveLabel     string `toml:"destructive_label" json:"destructive_label,omitempty"`
	// Repos maps gita slugs to GitHub repositories ("owner/name"): it
	// overrides what a repo's origin remote says, or adds a repo whose
	// origin is elsewhere.
	Repos map[string]string `toml:"repos" json:"repos,omitempty"`
	// CommentOn lists the receipt kinds the engine posts as one short
	// comment on the task's issue (GitHubCommentKinds); empty: receipts
	// stay local.
	CommentOn []string `toml:"comment_on" json:"comment_on,omitempty"`
}

// The defaults of [statehub.github], filled in when the kind is github.
const (
	DefaultGitHubAPIBase          = "https://api.github.com"
	DefaultGitHubLabel            = "agent"
	DefaultInProgressLabel        = "in-progress"
	DefaultBlockedLabel           = "blocked"
	DefaultNeedsHumanLabel        = "needs-human"
	DefaultSecretsRequiredLabel   = "secrets-required"
	DefaultDestructiveLabel       = "destructive"
	maxGitHubLabel                = 50 // GitHub's own limit on a label's name
	maxGitHubRepos                = 1000
	maxGitHubOwner, maxGitHubRepo = 39, 100
)

// GitHubCommentKinds are the receipts that may become a comment on the
// task's issue: those a person watching the issue acts on.
var GitHubCommentKinds = []string{
	"trigger.stopped",  // stopped at a gate: a person decides
	"trigger.gated",    // held at a gate, checked again
	"lease.stopped",    // the work stopped: retries exhausted, a gate, released blocked or failed
	"lease.completed",  // the agent released its work completed
	"lease.retry_wait", // an attempt ended and the next one waits
}

// IsZero says whether nothing of the section is set (omitzero).
func (g GitHub) IsZero() bool {
	return g.Label == "" && g.InProgressLabel == "" && g.BlockedLabel == "" && g.NeedsHumanLabel == "" &&
		g.SecretsRequiredLabel == "" && g.DestructiveLabel == "" && len(g.Repos) == 0 && len(g.CommentOn) == 0
}

// fillDefaults sets the defaults of the section when the kind is github,
// so that `config show` prints what the engine uses.
func (g *GitHub) fillDefaults() {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&g.Label, DefaultGitHubLabel)
	def(&g.InProgressLabel, DefaultInProgressLabel)
	def(&g.BlockedLabel, DefaultBlockedLabel)
	def(&g.NeedsHumanLabel, DefaultNeedsHumanLabel)
	def(&g.SecretsRequiredLabel, DefaultSecretsRequiredLabel)
	def(&g.DestructiveLabel, DefaultDestructiveLabel)
}

// Labels are the section's labels by key, in the order of the file.
func (g GitHub) labels() []struct{ key, value string } {
	return []struct{ key, value string }{
		{"label", g.Label}, {"in_progress_label", g.InProgressLabel}, {"blocked_label", g.BlockedLabel},
		{"needs_human_label", g.NeedsHumanLabel}, {"secrets_required_label", g.SecretsRequiredLabel},
		{"destructive_label", g.DestructiveLabel},
	}
}

// GitHub's rules for names: an owner (user or organization) is letters,
// digits and single hyphens, neither first nor last; a repository's name
// letters, digits, '.', '-' and '_'. Plain loops, not regular expressions:
// this package is every command's, and a pattern compiled at start costs
// each of them.
func githubOwner(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case alnum(c):
		case c == '-' && i > 0 && i < len(s)-1 && s[i-1] != '-':
		default:
			return false
		}
	}
	return s != ""
}

func githubName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return s != ""
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// ParseGitHubRepo splits "owner/name" as GitHub spells a repository.
func ParseGitHubRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	switch {
	case !ok || strings.Contains(name, "/"):
		return "", "", fmt.Errorf("%q is not owner/name", textsafe.Escape(s))
	case len(owner) > maxGitHubOwner || !githubOwner(owner):
		return "", "", fmt.Errorf("%q: the owner must be letters, digits and single hyphens (at most %d)", textsafe.Escape(s), maxGitHubOwner)
	case len(name) > maxGitHubRepo || !githubName(name) || name == "." || name == "..":
		return "", "", fmt.Errorf("%q: the name must be letters, digits, '.', '-' and '_' (at most %d)", textsafe.Escape(s), maxGitHubRepo)
	}
	return owner, name, nil
}

// validateHub checks [statehub] as its kind needs it: a known kind, no
// section of another kind, and for GitHub an API root the token may go to
// and labels and repositories GitHub allows.
func (c *Config) validateHub() error {
	h := c.StateHub
	if !slices.Contains(Kinds, h.HubKind()) {
		return bad("statehub.kind", "%q is not one of %s", textsafe.Escape(h.Kind), strings.Join(Kinds, ", "))
	}
	if h.HubKind() != KindBeads && !h.Beads.IsZero() {
		return bad("statehub.beads", "is set but statehub.kind is %q; set kind = \"beads\" to use it", h.HubKind())
	}
	if h.HubKind() != KindGitHub && !h.GitHub.IsZero() {
		return bad("statehub.github", "is set but statehub.kind is %q; set kind = \"github\" to use it", h.HubKind())
	}
	switch h.HubKind() {
	case KindBeads:
		return h.Beads.validate()
	case KindContract:
		return nil
	}
	if err := githubAPIBase(h.APIBase); err != nil {
		return bad("statehub.api_base", "%v", err)
	}
	g := h.GitHub
	if g.IsZero() {
		return nil // tamq's view: the section is the engine's
	}
	seen := map[string]string{}
	for _, l := range g.labels() {
		switch {
		case l.value == "" || len(l.value) > maxGitHubLabel:
			return bad("statehub.github."+l.key, "must be a label's name, 1..%d characters", maxGitHubLabel)
		case strings.Contains(l.value, ","):
			return bad("statehub.github."+l.key, "%q: a label the engine reads cannot hold a comma (GitHub's labels filter splits on it)", textsafe.Escape(l.value))
		case textsafe.NameProblem(l.value) != "":
			return bad("statehub.github."+l.key, "%q: %s", textsafe.Escape(l.value), textsafe.NameProblem(l.value))
		}
		if other, dup := seen[strings.ToLower(l.value)]; dup {
			return bad("statehub.github."+l.key, "%q is also statehub.github.%s; each must be its own label", l.value, other)
		}
		seen[strings.ToLower(l.value)] = l.key
	}
	if len(g.Repos) > maxGitHubRepos {
		return bad("statehub.github.repos", "%d repos; at most %d", len(g.Repos), maxGitHubRepos)
	}
	for slug, repo := range g.Repos {
		if p := textsafe.NameProblem(slug); p != "" {
			return bad("statehub.github.repos", "the repo %q: %s", textsafe.Escape(slug), p)
		}
		if _, _, err := ParseGitHubRepo(repo); err != nil {
			return bad("statehub.github.repos", "%s: %v", textsafe.Escape(slug), err)
		}
	}
	for _, k := range g.CommentOn {
		if !slices.Contains(GitHubCommentKinds, k) {
			return bad("statehub.github.comment_on", "%q is not one of %s", textsafe.Escape(k), strings.Join(GitHubCommentKinds, ", "))
		}
	}
	return nil
}

// githubAPIBase accepts GitHub's API root: https (api.github.com, or a
// GitHub Enterprise Server's https://HOST/api/v3), or http on a loopback
// address, for tests, since the token would cross the network in clear.
func githubAPIBase(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q must be GitHub's API root, as %s or https://HOST/api/v3", textsafe.RedactURL(raw), DefaultGitHubAPIBase)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if a, err := netip.ParseAddr(u.Hostname()); (err == nil && a.Unmap().IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("%q is http:// to another machine: GitHub's token goes over https only (http:// is for a loopback address, in tests)", textsafe.RedactURL(raw))
	}
	return fmt.Errorf("%q must be an https:// URL (GitHub's API root, as %s)", textsafe.RedactURL(raw), DefaultGitHubAPIBase)
}
