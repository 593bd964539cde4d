package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// StateHub checks that State Hub answers HTTP at statehub.api_base. Whether
// that is a warning or a failure is the program's: tamq works without State
// Hub, the engine watches it. reachable says whether it answered.
func StateHub(ctx context.Context, cfg *config.Loaded, unreachable Status, why string) (c Check, reachable bool) {
	const name = "statehub"
	// base is printed only: Probe takes the address itself.
	base := textsafe.RedactURL(cfg.StateHub.APIBase)
	err := statehub.Probe(ctx, cfg.StateHub.APIBase, HTTPTimeout)
	if errs.Is(err, errs.PermissionDeny) {
		// Another user's listener where State Hub should be: a failure for
		// both programs, whatever they do without State Hub.
		return fail(name, err.Error(), fixOf(err, "point statehub.api_base at your own State Hub")), false
	}
	if err != nil {
		return Check{Name: name, Status: unreachable, Detail: err.Error() + " (" + cfg.APIBaseOrigin() + ")" + why,
			Fix: unansweredFix(ctx, cfg, base)}, false
	}
	return ok(name, "State Hub answers at "+base), true
}

// unansweredFix is the fix for a State Hub that does not answer at base.
// The default address is the spec's loopback port, while the reference
// server listens on its socket by default: when a State Hub answers there,
// the fix is to point the programs at it.
func unansweredFix(ctx context.Context, cfg *config.Loaded, base string) string {
	point := fmt.Sprintf("point statehub.api_base in %s (or %s) at it", cfg.File, paths.StateHubAPIBaseVar)
	ref := cfg.Reference
	if cfg.StateHub.HubKind() != config.KindContract || ref == "" || ref == cfg.StateHub.APIBase {
		return fmt.Sprintf("start State Hub at %s, or %s", base, point)
	}
	if statehub.Probe(ctx, ref, HTTPTimeout) == nil {
		return fmt.Sprintf("a State Hub answers at %s, where the reference server (coordination-engine dev-statehub) listens: set statehub.api_base = %q in %s, or export %s=%s",
			ref, ref, cfg.File, paths.StateHubAPIBaseVar, ref)
	}
	return fmt.Sprintf("start State Hub at %s, or %s (the reference server, coordination-engine dev-statehub, listens on %s by default)", base, point, ref)
}

// StateHubAuth checks the credentials: statehub.credential_command, when
// set, runs and prints a token, and State Hub, when reachable, takes the
// request (GET /v1/workplans) with it, or without a token when none is
// configured. A refusal fails: every request the program makes would be
// refused. Another answer than the contract's is a failure or a warning as
// the program says (other).
func StateHubAuth(ctx context.Context, cfg *config.Loaded, reachable bool, other Status) Check {
	const name = "statehub-auth"
	argv := cfg.StateHub.CredentialCommand
	setting := "statehub.credential_command in " + cfg.File
	if len(argv) > 0 {
		tctx, cancel := context.WithTimeout(ctx, CredentialTimeout)
		_, err := statehub.Token(tctx, argv)
		cancel()
		if err != nil {
			return fail(name, err.Error(),
				fmt.Sprintf("run `%s` yourself to see why, and fix %s: it must print one token", strings.Join(argv, " "), setting))
		}
	}
	if !reachable {
		return ok(name, "the credential command prints a token (not tried on State Hub: it is not reachable)")
	}
	// The command may run twice (a refused token is fetched once more), and
	// the request with it.
	actx, cancel := context.WithTimeout(ctx, 2*(CredentialTimeout+HTTPTimeout))
	defer cancel()
	c := &statehub.Client{Base: cfg.StateHub.APIBase, Credential: argv, Timeout: HTTPTimeout}
	err := c.CheckAccess(actx)
	switch {
	case err == nil && len(argv) > 0:
		return ok(name, "State Hub accepts the token of statehub.credential_command")
	case err == nil:
		return ok(name, "State Hub takes requests without a token (no statehub.credential_command)")
	case errs.Is(err, errs.PermissionDeny) && len(argv) == 0:
		return fail(name, err.Error(), "State Hub wants a token: set statehub.credential_command in "+cfg.File+" to a command that prints it")
	case errs.Is(err, errs.PermissionDeny):
		return fail(name, err.Error(), "make "+setting+" print a token State Hub accepts")
	}
	return Check{Name: name, Status: other, Detail: err.Error(),
		Fix: fmt.Sprintf("check that statehub.api_base (%s) is State Hub's API: GET /v1/workplans must answer as docs/statehub-contract.md says", textsafe.RedactURL(cfg.StateHub.APIBase))}
}
