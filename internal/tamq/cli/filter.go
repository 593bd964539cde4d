package cli

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
)

// filterFlags are the message filters history and export share.
type filterFlags struct {
	repo, state, since, until, batch, id string
}

func (f *filterFlags) register(a *app.App, cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.repo, "repo", "", "only messages from or to this repo")
	fs.StringVar(&f.state, "state", "", "only messages in this state")
	fs.StringVar(&f.since, "since", "", "only messages created at or after this time (7d, 12h, 2026-11-30, RFC 3339)")
	fs.StringVar(&f.until, "until", "", "only messages created before this time (same forms as --since)")
	fs.StringVar(&f.batch, "batch", "", "only messages of this batch id")
	fs.StringVar(&f.id, "id", "", "only the message with this id")
	cmd.RegisterFlagCompletionFunc("repo", app.CompleteRepos(a))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(store.MessageStates, cobra.ShellCompDirectiveNoFileComp))
}

// filter checks the flags and turns them into a store filter.
func (f *filterFlags) filter(now time.Time) (store.Filter, error) {
	out := store.Filter{Repo: f.repo, State: f.state, BatchID: f.batch, ID: f.id}
	if f.state != "" && !slices.Contains(store.MessageStates, f.state) {
		return out, app.UsageError("--state %q is not a message state (%v)", f.state, store.MessageStates)
	}
	var err error
	if f.since != "" {
		if out.Since, err = app.ParseTime("since", f.since, now); err != nil {
			return out, err
		}
	}
	if f.until != "" {
		if out.Until, err = app.ParseTime("until", f.until, now); err != nil {
			return out, err
		}
	}
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Since.Before(out.Until) {
		return out, app.UsageError("--since must be before --until")
	}
	return out, nil
}

// openHistory opens the message database for reading; it needs no service
// (WAL lets readers run beside the service's writes). ok is false when no
// database exists yet, which is an empty history.
func openHistory(ctx context.Context, a *app.App) (db *sql.DB, ok bool, err error) {
	p, err := a.Paths()
	if err != nil {
		return nil, false, err
	}
	cfg, err := a.Config()
	if err != nil {
		return nil, false, err
	}
	return openHistoryAt(ctx, p, cfg)
}

// openHistoryAt is openHistory for paths and configuration already loaded.
func openHistoryAt(ctx context.Context, p paths.Paths, cfg *config.Loaded) (db *sql.DB, ok bool, err error) {
	db, err = sqlitedb.OpenReadOnly(ctx, p.Database, sqlitedb.LatestVersion(store.Migrations), cfg.BusyTimeout())
	if errs.Is(err, errs.NotFound) {
		return nil, false, nil
	}
	return db, err == nil, err
}

// scopeToCaller keeps history and export to the caller's own: an agent in a
// repo's window reads the messages from or to its repo only (another
// repo's, wake prompts included, are the operator's), and a process tamq
// cannot place (door.Place) reads none. The service says who the caller
// is, as it says for a send; without the service, what the process's
// environment says of its window stands in. Both read a database the user's
// every process can open: this keeps an agent from reading what is not its
// own by running the command, not a process bent on reading the file.
func scopeToCaller(ctx context.Context, a *app.App, f *store.Filter) error {
	p, err := a.Paths()
	if err != nil {
		return err
	}
	c := client.New(p).Self(ctx, a.Getenv)
	if err := (door.Policy{}).Allows(door.Window, c, "reading messages"); err != nil {
		return err
	}
	if c.Kind != door.Agent {
		return nil
	}
	if f.Repo != "" && f.Repo != c.Repo {
		return errs.New(errs.PermissionDeny, "the messages of %s are the operator's to read; %s may read %s's only", f.Repo, c, c.Repo).
			WithHint(door.OperatorHint)
	}
	f.Repo = c.Repo
	return nil
}
