package githubcheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/doctor/githubcheck"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
)

// setup registers repos (name → origin remote) with gita and returns the
// engine's config for kind github against gh, and its driver.
func setup(t *testing.T, gh *githubdouble.Server, credential []string, repos map[string]string) (*github.Driver, *config.Loaded) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "gita")
	os.MkdirAll(dir, 0o700)
	var rows strings.Builder
	for name, origin := range repos {
		path := filepath.Join(root, name)
		if b, err := exec.Command("git", "init", "-q", path).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, b)
		}
		if origin != "" {
			if b, err := exec.Command("git", "-C", path, "remote", "add", "origin", origin).CombinedOutput(); err != nil {
				t.Fatalf("git remote: %v %s", err, b)
			}
		}
		rows.WriteString(testutil.GitaRow(path, name))
	}
	if err := os.WriteFile(filepath.Join(dir, "repos.csv"), []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Default(), File: filepath.Join(root, "config.toml")}
	cfg.StateHub.Kind, cfg.StateHub.APIBase, cfg.StateHub.CredentialCommand = config.KindGitHub, gh.URL(), credential
	cfg.StateHub.GitHub = config.GitHub{Label: "agent", InProgressLabel: "in-progress", BlockedLabel: "blocked",
		NeedsHumanLabel: "needs-human", SecretsRequiredLabel: "secrets-required", DestructiveLabel: "destructive"}
	d, err := github.New(github.Options{APIBase: gh.URL(), Credential: credential, Settings: cfg.StateHub.GitHub, Registry: gita.NewReader(dir).Load})
	if err != nil {
		t.Fatal(err)
	}
	return d, cfg
}

func byName(checks []doctor.Check) map[string]doctor.Check {
	out := map[string]doctor.Check{}
	for _, c := range checks {
		out[c.Name] = c
	}
	return out
}

func token(t *testing.T, gh *githubdouble.Server) []string {
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte(gh.Token()), 0o600)
	return []string{"cat", file}
}

// A good setup and each thing a person gets wrong, with the fix doctor
// offers: the missing label comes with the `gh label create` to run.
func TestGitHubChecks(t *testing.T) {
	gh := githubdouble.Start(t, githubdouble.Options{})
	gh.AddRepo("octo/alpha", githubdouble.RepoOptions{})
	gh.CreateLabel("octo/alpha", "agent")
	gh.AddRepo("octo/beta", githubdouble.RepoOptions{})
	gh.AddRepo("octo/quiet", githubdouble.RepoOptions{IssuesDisabled: true})
	gh.CreateLabel("octo/quiet", "agent")
	d, cfg := setup(t, gh, token(t, gh), map[string]string{
		"alpha": "git@github.com:octo/alpha.git", "beta": "https://github.com/octo/beta", "quiet": "git@github.com:octo/quiet.git",
		"gone": "git@github.com:octo/gone.git", "local": "",
	})
	got := byName(githubcheck.Run(context.Background(), d, cfg))
	for name, want := range map[string]struct {
		status doctor.Status
		words  string
	}{
		"statehub":           {doctor.OK, "GitHub's API answers"},
		"github-token":       {doctor.OK, "a token of octocat with scopes repo"},
		"github-repo alpha":  {doctor.OK, "watched as octo/alpha"},
		"github-repo beta":   {doctor.Fail, `no label "agent"`},
		"github-repo quiet":  {doctor.Fail, "issues turned off"},
		"github-repo gone":   {doctor.Fail, "GitHub has no octo/gone"},
		"github-not-watched": {doctor.OK, "local: it has no origin remote"},
		"github-rate":        {doctor.OK, "of 5000 requests left"},
	} {
		c, ok := got[name]
		if !ok || c.Status != want.status || !strings.Contains(c.Detail, want.words) {
			t.Errorf("%s: %+v, want %s saying %q", name, c, want.status, want.words)
		}
	}
	if fix := got["github-repo beta"].Fix; fix != `gh label create agent --repo octo/beta --description "a task for the repository's agent"` {
		t.Errorf("the label's fix: %q", fix)
	}
}

func TestGitHubTokenChecks(t *testing.T) {
	gh := githubdouble.Start(t, githubdouble.Options{Scopes: []string{"read:org"}})
	gh.AddRepo("octo/alpha", githubdouble.RepoOptions{})
	repos := map[string]string{"alpha": "git@github.com:octo/alpha.git"}
	d, cfg := setup(t, gh, token(t, gh), repos)
	if c := byName(githubcheck.Run(context.Background(), d, cfg))["github-token"]; c.Status != doctor.Warn || !strings.Contains(c.Fix, "gh auth refresh -s repo") {
		t.Errorf("a token without repo: %+v", c)
	}
	gh.SetToken("rotated")
	checks := githubcheck.Run(context.Background(), d, cfg)
	if c := byName(checks)["github-token"]; c.Status != doctor.Fail || !strings.Contains(c.Fix, "gh auth login") || len(checks) != 2 {
		t.Errorf("a refused token: %+v (%d checks)", c, len(checks))
	}
	d, cfg = setup(t, gh, nil, repos)
	if c := byName(githubcheck.Run(context.Background(), d, cfg))["github-token"]; c.Status != doctor.Warn || !strings.Contains(c.Fix, `"gh", "auth", "token"`) {
		t.Errorf("no credential command: %+v", c)
	}
	unreachable, err := github.New(github.Options{APIBase: "http://127.0.0.1:9", Settings: cfg.StateHub.GitHub,
		Registry: func() (*gita.Registry, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if c := githubcheck.Run(context.Background(), unreachable, cfg); len(c) != 1 || c[0].Status != doctor.Fail || !strings.Contains(c[0].Detail, "not reachable") {
		t.Errorf("GitHub unreachable: %+v", c)
	}
	// Offline, the credential command still runs: one that cannot (gh not
	// installed) fails now, not once the network is back.
	cfg.StateHub.CredentialCommand = []string{"gh-that-is-not-installed", "auth", "token"}
	c := githubcheck.Run(context.Background(), unreachable, cfg)
	if len(c) != 2 || c[1].Name != "github-token" || c[1].Status != doctor.Fail || !strings.Contains(c[1].Detail, "gh-that-is-not-installed") {
		t.Errorf("GitHub unreachable, no gh: %+v", c)
	}
	cfg.StateHub.CredentialCommand = token(t, gh)
	if c := githubcheck.Run(context.Background(), unreachable, cfg); len(c) != 2 || c[1].Status != doctor.OK || !strings.Contains(c[1].Detail, "not tried on GitHub") {
		t.Errorf("GitHub unreachable, a token: %+v", c)
	}
}
