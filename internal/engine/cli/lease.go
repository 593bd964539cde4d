package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
)

func newLeaseCmd(a *app.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Act on your coordination lease (run by the agent in its window)",
		Long: `An agent woken by coordination-engine holds a lease on its work. It acknowledges
the lease before it begins, renews it while it works (at least every
lease_renew_interval_seconds; after lease_missed_renewals intervals without a
renewal or checkpoint the lease expires and the work is offered again), and
releases it with a result when it is done. The wake prompt names the lease.

Each command takes --attempt N, the attempt the prompt names: a command of an
attempt after a newer one was offered is refused, since the newer prompt is
the one to follow.

An engine that died and left its socket is waited for up to 10 s (it may
be starting again); one that is not running exits 8 (unavailable).

Exit status: 0 on success; 2 for a usage error (release without --result);
12 (not_found) for an unknown lease; 22 (lease_state) when the lease's state
does not allow the command; 23 (lease_expired) when the attempt ran out or a
newer attempt was offered: stop working on it (a new attempt wakes the agent
again, or already did).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newLeaseAckCmd(a), newLeaseRenewCmd(a), newLeaseReleaseCmd(a))
	return cmd
}

// printLease prints a lease after an agent command.
func printLease(a *app.App, verb string, l api.Lease) error {
	// The engine did what was asked, so the command succeeds; a text it
	// kept without what looked like a secret is said on stderr, by field
	// and rule (the answer never carries the text).
	for _, w := range l.Withheld {
		a.Notef("the %s was withheld: it looks like it holds a secret (%s at byte %d); the engine kept and published %q instead",
			w.Field, w.Rule, w.Offset, api.WithheldText)
	}
	if a.JSON {
		return a.PrintJSON(l)
	}
	if !a.Quiet {
		a.Printf("lease %s %s: %s, attempt %d of %d, expires %s\n", l.LeaseID, verb, l.State, l.Attempt, l.MaxAttempts,
			l.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// attemptFlag adds --attempt: the attempt of the lease the command is about,
// as the wake prompt names it.
func attemptFlag(cmd *cobra.Command, attempt *int) {
	cmd.Flags().IntVar(attempt, "attempt", 0, "the attempt the wake prompt names (refused once a newer attempt was offered)")
}

// engineClient is the client of the engine of a's paths.
func engineClient(a *app.App) (*client.Client, error) {
	p, err := a.Paths()
	if err != nil {
		return nil, err
	}
	return client.New(p), nil
}

// agentClient is the client for the commands an agent runs in its window:
// they wait a moment for an engine that is restarting (an operator's
// command says at once that it is not running).
func agentClient(a *app.App) (*client.Client, error) {
	p, err := a.Paths()
	if err != nil {
		return nil, err
	}
	return client.ForAgent(p), nil
}
