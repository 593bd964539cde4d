// Package githubcheck holds the doctor's checks of GitHub Issues as State
// Hub ([statehub] kind = "github"): GitHub's API answers, whose the token is
// and what it may do, each watched repository (there, issues on, the agent
// label defined, the token allowed to label), the repos not watched and
// why, and the request budget. They are apart from internal/doctor because
// that package is tamq's too, and the GitHub client it would pull in is
// the engine's alone.
package githubcheck

import (
	"context"
	"fmt"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"slices"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/github"
)

// LowBudget is the share of the request budget left below which the
// doctor warns: the engine's looks cost nothing when nothing changed, so a
// budget that low means something else spends it.
const LowBudget = 0.1

// Run checks GitHub as the engine reads it, through d, the driver of cfg.
func Run(ctx context.Context, d *github.Driver, cfg *config.Loaded) []doctor.Check {
	base := textsafe.RedactURL(cfg.StateHub.APIBase) // printed only
	if err := d.Probe(ctx, doctor.HTTPTimeout); err != nil {
		checks := []doctor.Check{fail("statehub", err.Error(), fixOf(err, fmt.Sprintf("check the network, or statehub.api_base (%s) in %s", base, cfg.File)))}
		if len(cfg.StateHub.CredentialCommand) > 0 {
			// Offline, the token's command is still worth running: a
			// missing `gh` would otherwise show only once the network is back.
			checks = append(checks, commandCheck(ctx, cfg))
		}
		return checks
	}
	checks := []doctor.Check{ok("statehub", fmt.Sprintf("GitHub's API answers at %s (kind github, label %q)", base, cfg.StateHub.GitHub.Label))}
	token := tokenCheck(ctx, d, cfg)
	checks = append(checks, token)
	if token.Status == doctor.Fail {
		return checks
	}
	checks = append(checks, repoChecks(ctx, d, cfg)...)
	return append(checks, budgetCheck(ctx, d))
}

// commandCheck runs statehub.credential_command alone, for a GitHub that
// cannot be asked whose token it prints.
func commandCheck(ctx context.Context, cfg *config.Loaded) doctor.Check {
	const name = "github-token"
	ctx, cancel := context.WithTimeout(ctx, doctor.CredentialTimeout)
	defer cancel()
	if _, err := statehub.Token(ctx, cfg.StateHub.CredentialCommand); err != nil {
		return fail(name, err.Error(), "run `"+strings.Join(cfg.StateHub.CredentialCommand, " ")+"` yourself to see why (is gh installed, and `gh auth login` done?): it must print one token")
	}
	return ok(name, "the credential command prints a token (not tried on GitHub: it is not reachable)")
}

// tokenCheck says whose the token is and whether its scopes will do.
func tokenCheck(ctx context.Context, d *github.Driver, cfg *config.Loaded) doctor.Check {
	const name = "github-token"
	if len(cfg.StateHub.CredentialCommand) == 0 {
		return warn(name, "no statehub.credential_command: the engine asks GitHub without a token (public repositories only, 60 requests an hour, and no writes)",
			fmt.Sprintf("set credential_command = [\"gh\", \"auth\", \"token\"] under [statehub] in %s (after `gh auth login`)", cfg.File))
	}
	ctx, cancel := context.WithTimeout(ctx, doctor.CredentialTimeout+doctor.HTTPTimeout)
	defer cancel()
	id, err := d.Whoami(ctx)
	switch {
	case errs.Is(err, errs.PermissionDeny):
		return fail(name, err.Error(), "`gh auth login` (or renew the token statehub.credential_command prints), then `gh auth status`")
	case err != nil:
		return fail(name, err.Error(), fixOf(err, "run `"+strings.Join(cfg.StateHub.CredentialCommand, " ")+"` yourself to see that it prints a token"))
	case !id.Classic:
		return ok(name, fmt.Sprintf("a fine-grained token of %s (GitHub does not list its permissions: it needs Issues: read and write, and Metadata: read, on the watched repositories)", id.Login))
	case !slices.Contains(id.Scopes, "repo") && !slices.Contains(id.Scopes, "public_repo"):
		return warn(name, fmt.Sprintf("a token of %s with scopes %q: without repo (or public_repo) it cannot label, close or comment on issues", id.Login, strings.Join(id.Scopes, ", ")),
			"`gh auth refresh -s repo`, or a token with the repo scope")
	case !slices.Contains(id.Scopes, "repo"):
		return ok(name, fmt.Sprintf("a token of %s with public_repo: it reaches public repositories only", id.Login))
	}
	return ok(name, fmt.Sprintf("a token of %s with scopes %s", id.Login, strings.Join(id.Scopes, ", ")))
}

// repoChecks checks each watched repository, and says which repos are not
// watched and why: one without a GitHub origin is fine (it is simply not
// watched); the others are worth a look.
func repoChecks(ctx context.Context, d *github.Driver, cfg *config.Loaded) []doctor.Check {
	watched, notWatched, err := d.Watch(ctx)
	if err != nil {
		return []doctor.Check{fail("github-repos", err.Error(), fixOf(err, "see `coordination-engine doctor`'s registry check"))}
	}
	var checks []doctor.Check
	if len(watched) == 0 {
		checks = append(checks, warn("github-repos", "no gita repo's origin is a GitHub repository: nothing is watched",
			"add a GitHub origin (`git remote add origin git@github.com:OWNER/NAME.git`), or map repos under [statehub.github] repos in "+cfg.File))
	}
	label := cfg.StateHub.GitHub.Label
	for _, w := range watched {
		name := "github-repo " + w.Repo
		rctx, cancel := context.WithTimeout(ctx, 2*doctor.HTTPTimeout)
		f, err := d.Inspect(rctx, w.Where)
		cancel()
		switch {
		case errs.Is(err, errs.NotFound):
			checks = append(checks, fail(name, fmt.Sprintf("GitHub has no %s for this token: %v", w.Where, err),
				"check the origin remote of "+w.Repo+" (`git -C <path> remote -v`), or the token's access to the repository"))
		case err != nil:
			checks = append(checks, fail(name, err.Error(), fixOf(err, "see `coordination-engine status`")))
		case !f.HasIssues:
			checks = append(checks, fail(name, w.Where+" has issues turned off", "turn on Issues in the repository's settings on GitHub"))
		case !f.LabelExists:
			checks = append(checks, fail(name, fmt.Sprintf("%s has no label %q: no issue there can be a task", w.Where, label),
				fmt.Sprintf("gh label create %s --repo %s --description \"a task for the repository's agent\"", label, w.Where)))
		case !f.CanTriage:
			checks = append(checks, warn(name, fmt.Sprintf("watched as %s, but the token's user may not label or close its issues", w.Where),
				"give the token's user triage (or write) access to "+w.Where))
		default:
			checks = append(checks, ok(name, fmt.Sprintf("watched as %s (%s), issues on, label %q there", w.Where, w.Link, label)))
		}
	}
	var plain, odd []string
	for _, w := range notWatched {
		line := w.Repo + ": " + w.Problem
		if w.Elsewhere {
			plain = append(plain, line)
		} else {
			odd = append(odd, line)
		}
	}
	if len(plain) > 0 {
		checks = append(checks, ok("github-not-watched", "not watched (no GitHub origin): "+strings.Join(plain, "; ")))
	}
	if len(odd) > 0 {
		checks = append(checks, warn("github-not-watched", strings.Join(odd, "; "), "each says what to change; [statehub.github] repos in "+cfg.File+" maps a repo by hand"))
	}
	return checks
}

// budgetCheck says how much of GitHub's request budget is left.
func budgetCheck(ctx context.Context, d *github.Driver) doctor.Check {
	const name = "github-rate"
	ctx, cancel := context.WithTimeout(ctx, doctor.HTTPTimeout)
	defer cancel()
	b, err := d.RateBudget(ctx)
	switch {
	case err != nil:
		return warn(name, "cannot read the rate limit: "+err.Error(), fixOf(err, "see `coordination-engine status`"))
	case b.Limit > 0 && float64(b.Remaining) < LowBudget*float64(b.Limit):
		return warn(name, fmt.Sprintf("%d of %d requests left until %s: the engine's unchanged looks are free, so something else spends them", b.Remaining, b.Limit, b.Reset.Local().Format(time.TimeOnly)),
			"look for other programs using the same token (`gh api rate_limit` shows the budget); the engine pauses by itself when it runs out")
	}
	return ok(name, fmt.Sprintf("%d of %d requests left until %s", b.Remaining, b.Limit, b.Reset.Local().Format(time.TimeOnly)))
}

// The doctor's own makers of checks, by their short names.
var (
	ok    = doctor.Passed
	warn  = doctor.Warning
	fail  = doctor.Failed
	fixOf = doctor.FixOf
)
