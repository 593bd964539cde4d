package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/service"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The spec's purge defaults, used when neither --before nor --max-size is given.
const (
	defaultPurgeAge  = 365 * 24 * time.Hour
	defaultPurgeSize = 100 * 1000 * 1000
)

// purgeRecord is what --json prints: the rule, then the plan and what was
// done.
type purgeRecord struct {
	DryRun   bool       `json:"dry_run"`
	Before   *time.Time `json:"before,omitempty"`
	MaxBytes int64      `json:"max_bytes,omitempty"`
	Repo     string     `json:"repo,omitempty"`
	State    string     `json:"state,omitempty"`
	api.PurgeResult
}

func newPurgeCmd(a *app.App) *cobra.Command {
	var before, maxSize, repo, state string
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete old delivered messages (a dry run unless confirmed)",
		Long: `Delete messages in a final state (injected, acknowledged, failed or cancelled) that are
older than --before, and, while the history is larger than --max-size, the
oldest others. Without either it means --before 365d --max-size 100MB. --repo
and --state narrow what may go. A message still queued, being delivered or
awaiting its ack is never removed. History is never deleted on its own: only
this command deletes, and you may want to tamq export first.

The history's size counts messages and their receipts alike, and a purged
message takes its receipts with it. It first prints what would go: how many
messages, their date range and the estimated bytes. On a terminal it then asks
for confirmation; without one it deletes only with --yes (and otherwise stops
there, as a dry run). --dry-run never deletes. Each purge writes a receipt
with its filters and counts, and gives the space back to the file system in
small steps, so a running service is held up for milliseconds at a time.

While the service runs, the purge is its work: the service is the database's
one writer. With the service stopped, purge writes the database itself and
holds the service's lock from the plan to the end, so a service started
meanwhile refuses to start, saying why.`,
		Example: `  tamq purge                       # what the defaults would delete; asks on a terminal
  tamq purge --before 90d --yes
  tamq purge --max-size 50MB --repo net-kingdom --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if yes && dryRun {
				return app.UsageError("--yes and --dry-run contradict each other")
			}
			now := a.Now()
			rule := store.PurgeRule{Repo: repo, State: state}
			var err error
			if before != "" {
				if rule.Before, err = app.ParseTime("before", before, now); err != nil {
					return err
				}
			}
			if maxSize != "" {
				if rule.MaxBytes, err = app.ParseSize("max-size", maxSize); err != nil {
					return err
				}
			}
			if before == "" && maxSize == "" {
				rule.Before, rule.MaxBytes = now.Add(-defaultPurgeAge), defaultPurgeSize
			}
			if state != "" && !queue.State(state).Final() {
				return app.UsageError("--state %q: purge only removes messages in a final state (injected, acknowledged, failed, cancelled)", state)
			}
			// The service refuses a window's purge; with it stopped this
			// command writes the database itself, and refuses as it would.
			p, err := a.Paths()
			if err != nil {
				return err
			}
			if err := (door.Policy{}).Allows(door.OperatorOnly, client.New(p).Self(cmd.Context(), a.Getenv), "purge"); err != nil {
				return err
			}
			return runPurge(cmd.Context(), a, rule, yes, dryRun)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&before, "before", "", "messages created before this time: a duration ago (365d) or a date")
	fs.StringVar(&maxSize, "max-size", "", "remove the oldest messages until the history fits this size (100MB)")
	fs.StringVar(&repo, "repo", "", "only messages from or to this repo")
	fs.StringVar(&state, "state", "", "only messages in this final state")
	fs.BoolVarP(&yes, "yes", "y", false, "delete without asking")
	fs.BoolVar(&dryRun, "dry-run", false, "only show what would be deleted")
	cmd.RegisterFlagCompletionFunc("repo", app.CompleteRepos(a))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(queue.Names([]queue.State{queue.Injected, queue.Acknowledged, queue.Failed, queue.Cancelled}), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runPurge(ctx context.Context, a *app.App, rule store.PurgeRule, yes, dryRun bool) error {
	rec := purgeRecord{DryRun: true, MaxBytes: rule.MaxBytes, Repo: rule.Repo, State: rule.State}
	if !rule.Before.IsZero() {
		rec.Before = &rule.Before
	}
	p, err := a.Paths()
	if err != nil {
		return err
	}
	cfg, err := a.Config()
	if err != nil {
		return err
	}
	c := client.New(p)
	w, err := findPurgeWriter(ctx, p, c, !dryRun && (yes || isTerminal(a)))
	if err != nil {
		return err
	}
	defer w.lock.Release()
	var plan store.PurgePlan
	if w.service {
		if rec.PurgeResult, err = c.Purge(ctx, purgeArgs(rule, true)); err != nil {
			return err
		}
	} else {
		ro, ok, err := openHistoryAt(ctx, p, cfg)
		if err != nil {
			return err
		}
		if ok {
			plan, err = store.PlanPurge(ctx, ro, rule)
			ro.Close()
			if err != nil {
				return err
			}
		}
		rec.PurgeResult = service.PurgeResult(plan, store.PurgeDone{})
	}
	if !a.JSON {
		printPlan(a, rec)
	}
	planned := rec.Matching
	if planned == 0 || dryRun || (!yes && !confirm(a, planned)) {
		if !a.JSON && planned > 0 && !dryRun && !yes && !isTerminal(a) {
			a.Notef("dry run: nothing deleted; pass --yes to delete")
		}
		if a.JSON {
			return a.PrintJSON(rec)
		}
		return nil
	}

	rec.DryRun = false
	var res api.PurgeResult
	if w.service {
		// The service plans again, taking at most what was shown.
		args := purgeArgs(rule, false)
		args.Limit = planned
		res, err = c.Purge(ctx, args)
	} else {
		res, err = purgeHere(ctx, a, p, cfg, rule, plan)
	}
	if err != nil {
		return err
	}
	rec.Deleted, rec.ReceiptsDeleted, rec.PurgeID = res.Deleted, res.ReceiptsDeleted, res.PurgeID
	rec.FileBytesBefore, rec.FileBytesAfter, rec.FreePagesKept = res.FileBytesBefore, res.FileBytesAfter, res.FreePagesKept
	if a.JSON {
		return a.PrintJSON(rec)
	}
	a.Printf("purged %d messages and their %d receipts; database %s -> %s\n", rec.Deleted, rec.ReceiptsDeleted,
		humanize.Bytes(uint64(rec.FileBytesBefore)), humanize.Bytes(uint64(rec.FileBytesAfter)))
	if kept := planned - rec.Deleted; kept > 0 {
		a.Printf("%d left a final state meanwhile (retried) and were kept\n", kept)
	}
	if rec.FreePagesKept {
		a.Notef("the space stays in the file for new messages: this database predates incremental vacuum, and converting it takes a full VACUUM, which purge runs only with the service stopped (tamq stop, then purge)")
	}
	return nil
}

// purgeWriter is whoever writes the database for this purge (found by
// findPurgeWriter). The service,
// when it runs: it is the database's one writer. Otherwise this command,
// holding the lock the service holds for its lifetime, so that a service
// started meanwhile refuses to start instead of writing beside it. The lock
// is taken only when the purge may delete (a dry run only reads), before the
// plan, so what is shown is what is deleted. A lock held while no service
// answers is a service starting, which purge waits for (within
// startWait), or another command writing the database, which it refuses.
type purgeWriter struct {
	service bool
	lock    *lockfile.Lock // held when this command writes
}

// startWait bounds how long purge waits for a service that holds its lock
// to answer: start-up migrations take seconds.
const startWait = 10 * time.Second

func findPurgeWriter(ctx context.Context, p paths.Paths, c *client.Client, mayDelete bool) (purgeWriter, error) {
	if _, err := c.Ping(ctx); err == nil {
		return purgeWriter{service: true}, nil
	}
	if !mayDelete {
		return purgeWriter{}, nil
	}
	if _, err := os.Stat(p.Database); errors.Is(err, fs.ErrNotExist) {
		return purgeWriter{}, nil // no history: nothing to delete
	}
	deadline := time.Now().Add(startWait)
	for {
		l, err := lockfile.TryLockFor(p.LockFile, "purge")
		if err == nil {
			return purgeWriter{lock: l}, nil
		}
		if !errors.Is(err, lockfile.ErrHeld) {
			return purgeWriter{}, err
		}
		if _, err := c.Ping(ctx); err == nil {
			return purgeWriter{service: true}, nil
		}
		pid, what := lockfile.Holder(p.LockFile)
		if what != "" {
			return purgeWriter{}, errs.New(errs.Conflict, "tamq %s (pid %d) is writing to the database in %s", textsafe.Escape(what), pid, p.StateDir).
				WithHint("purge again once it has finished")
		}
		if time.Now().After(deadline) {
			return purgeWriter{}, errs.New(errs.Unavailable, "the tamq service (pid %d) holds %s but does not answer; nothing was deleted", pid, p.LockFile).
				WithHint("see `tamq status`; purge again once the service answers or has stopped")
		}
		select {
		case <-ctx.Done():
			return purgeWriter{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func purgeArgs(r store.PurgeRule, dryRun bool) api.PurgeArgs {
	args := api.PurgeArgs{MaxBytes: r.MaxBytes, Repo: r.Repo, State: r.State, DryRun: dryRun}
	if !r.Before.IsZero() {
		args.Before = &r.Before
	}
	return args
}

// purgeHere carries out the plan with the service stopped, this command
// holding its lock: opening the database may migrate it, and an older
// database is converted to incremental vacuum with one full VACUUM, which
// nobody else is writing beside.
func purgeHere(ctx context.Context, a *app.App, p paths.Paths, cfg *config.Loaded, rule store.PurgeRule, plan store.PurgePlan) (api.PurgeResult, error) {
	st, err := store.Open(ctx, p, cfg.BusyTimeout(), a.Now)
	if err != nil {
		return api.PurgeResult{}, err
	}
	defer st.DB.Close()
	st.Receipts.PolicyProfile, st.Receipts.ConfigVersion = cfg.ProfileRef(), cfg.Version
	before := store.FileBytes(p.Database)
	purging := app.NewProgress(a, int64(len(plan.IDs)), "purging", "msgs")
	var reclaim *app.Progress
	var pages int64
	done, err := st.Purges.ExecutePurge(ctx, rule, plan, true, store.PurgeProgress{
		Deleted: func(n int) { purging.Set(int64(n)) },
		Reclaimed: func(left int64) {
			if pages == 0 { // the first report: all the free pages
				purging.Done()
				purging, pages = nil, left
				reclaim = app.NewProgress(a, pages, "giving space back", "pages")
			}
			reclaim.Set(pages - left)
		},
	})
	purging.Done()
	reclaim.Done()
	if err != nil {
		return api.PurgeResult{}, err
	}
	res := service.PurgeResult(plan, done)
	res.FileBytesBefore, res.FileBytesAfter = before, store.FileBytes(p.Database)
	return res, nil
}

func printPlan(a *app.App, r purgeRecord) {
	var rule []string
	if r.Before != nil {
		rule = append(rule, "created before "+r.Before.Local().Format(time.DateTime))
	}
	if r.MaxBytes > 0 {
		rule = append(rule, "beyond a history of "+humanize.Bytes(uint64(r.MaxBytes)))
	}
	if r.Repo != "" {
		rule = append(rule, "from or to "+r.Repo)
	}
	if r.State != "" {
		rule = append(rule, "in state "+r.State)
	}
	a.Printf("history: %d messages and %d receipts, about %s\n", r.HistoryMessages, r.HistoryReceipts, humanize.Bytes(uint64(r.HistoryBytes)))
	if r.Matching == 0 {
		a.Printf("nothing to purge (final-state messages %s)\n", strings.Join(rule, ", "))
		return
	}
	a.Printf("would purge %d messages with their receipts (final-state, %s), about %s, created %s to %s\n", r.Matching,
		strings.Join(rule, ", "), humanize.Bytes(uint64(r.EstimatedBytes)),
		r.Oldest.Local().Format(time.DateTime), r.Newest.Local().Format(time.DateTime))
}

func isTerminal(a *app.App) bool {
	f, ok := a.In.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirm asks on the terminal; without one the answer is no.
func confirm(a *app.App, n int) bool {
	if !isTerminal(a) {
		return false
	}
	fmt.Fprintf(a.Err, "Delete these %d messages? This cannot be undone. [y/N] ", n)
	answer, _ := bufio.NewReader(a.In).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
