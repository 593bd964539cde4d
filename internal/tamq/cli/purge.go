package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	sharedcli "github.com/tmux-amq/tamq/internal/cli"
	"github.com/tmux-amq/tamq/internal/tamq/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

// The spec's purge defaults, used when neither --before nor --max-size is given.
const (
	defaultPurgeAge  = 365 * 24 * time.Hour
	defaultPurgeSize = 100 * 1000 * 1000
)

type purgeRecord struct {
	DryRun          bool       `json:"dry_run"`
	Before          *time.Time `json:"before,omitempty"`
	MaxBytes        int64      `json:"max_bytes,omitempty"`
	Repo            string     `json:"repo,omitempty"`
	State           string     `json:"state,omitempty"`
	Matching        int        `json:"matching"`
	EstimatedBytes  int64      `json:"estimated_bytes"`
	Oldest          *time.Time `json:"oldest,omitempty"`
	Newest          *time.Time `json:"newest,omitempty"`
	HistoryBytes    int64      `json:"history_bytes"`
	HistoryMessages int        `json:"history_messages"`
	HistoryReceipts int        `json:"history_receipts"`
	Deleted         int        `json:"deleted"`
	ReceiptsDeleted int        `json:"receipts_deleted"`
	PurgeID         string     `json:"purge_id,omitempty"`
	FileBytesBefore int64      `json:"file_bytes_before,omitempty"`
	FileBytesAfter  int64      `json:"file_bytes_after,omitempty"`
}

func newPurgeCmd(a *sharedcli.App) *cobra.Command {
	var before, maxSize, repo, state string
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete old delivered messages (a dry run unless confirmed)",
		Long: `Delete messages in a final state (injected, acknowledged or failed) that are
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
small steps, so a running service is held up for milliseconds at a time.`,
		Example: `  tamq purge                       # what the defaults would delete; asks on a terminal
  tamq purge --before 90d --yes
  tamq purge --max-size 50MB --repo net-kingdom --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if yes && dryRun {
				return sharedcli.UsageError("--yes and --dry-run contradict each other")
			}
			now := a.Now()
			rule := store.PurgeRule{Repo: repo, State: state}
			var err error
			if before != "" {
				if rule.Before, err = sharedcli.ParseTime("before", before, now); err != nil {
					return err
				}
			}
			if maxSize != "" {
				if rule.MaxBytes, err = sharedcli.ParseSize("max-size", maxSize); err != nil {
					return err
				}
			}
			if before == "" && maxSize == "" {
				rule.Before, rule.MaxBytes = now.Add(-defaultPurgeAge), defaultPurgeSize
			}
			if state != "" && !queue.State(state).Final() {
				return sharedcli.UsageError("--state %q: purge only removes messages in a final state (injected, acknowledged, failed)", state)
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
	cmd.RegisterFlagCompletionFunc("repo", sharedcli.CompleteRepos(a))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(queue.Names([]queue.State{queue.Injected, queue.Acknowledged, queue.Failed}), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runPurge(ctx context.Context, a *sharedcli.App, rule store.PurgeRule, yes, dryRun bool) error {
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
	ro, ok, err := openHistoryAt(ctx, p, cfg)
	if err != nil {
		return err
	}
	var plan store.PurgePlan
	if ok {
		plan, err = store.PlanPurge(ctx, ro, rule)
		ro.Close()
		if err != nil {
			return err
		}
	}
	rec.Matching, rec.EstimatedBytes = len(plan.IDs), plan.Bytes
	rec.HistoryBytes, rec.HistoryMessages, rec.HistoryReceipts = plan.HistoryBytes, plan.HistoryMessages, plan.HistoryReceipts
	if len(plan.IDs) > 0 {
		rec.Oldest, rec.Newest = &plan.Oldest, &plan.Newest
	}
	if !a.JSON {
		printPlan(a, rec)
	}
	if len(plan.IDs) == 0 || dryRun || (!yes && !confirm(a, len(plan.IDs))) {
		if !a.JSON && len(plan.IDs) > 0 && !dryRun && !yes && !isTerminal(a) {
			a.Notef("dry run: nothing deleted; pass --yes to delete")
		}
		if a.JSON {
			return a.PrintJSON(rec)
		}
		return nil
	}

	st, err := store.Open(ctx, p, cfg.BusyTimeout(), a.Now)
	if err != nil {
		return err
	}
	defer st.DB.Close()
	st.PolicyProfile, st.ConfigVersion = cfg.ProfileRef(), cfg.Version
	rec.DryRun, rec.FileBytesBefore = false, fileBytes(p.Database)
	progress := a.NewProgress(int64(len(plan.IDs)), "purging", "msgs")
	done, err := st.Purge(ctx, plan.IDs, func(done int) { progress.Set(int64(done)) })
	progress.Done()
	rec.Deleted, rec.ReceiptsDeleted = done.Messages, done.Receipts
	if rec.Deleted > 0 {
		// Even a purge cut short leaves its receipt for what it did delete.
		rec.PurgeID = store.NewID()
		r := store.PurgeReceipt(rec.PurgeID, rule, plan, done)
		r.PolicyProfile, r.ConfigVersion = cfg.ProfileRef(), cfg.Version
		if rerr := st.AddReceipt(ctx, r); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return err
	}
	var reclaim *sharedcli.Progress
	var pages int64
	err = st.DB.Reclaim(ctx, func(left int64) {
		if pages == 0 { // the first report: all the free pages
			pages = left
			reclaim = a.NewProgress(pages, "giving space back", "pages")
		}
		reclaim.Set(pages - left)
	})
	reclaim.Done()
	if err != nil {
		return err
	}
	rec.FileBytesAfter = fileBytes(p.Database)
	if a.JSON {
		return a.PrintJSON(rec)
	}
	a.Printf("purged %d messages and their %d receipts; database %s -> %s\n", rec.Deleted, rec.ReceiptsDeleted,
		humanize.Bytes(uint64(rec.FileBytesBefore)), humanize.Bytes(uint64(rec.FileBytesAfter)))
	if kept := len(plan.IDs) - rec.Deleted; kept > 0 {
		a.Printf("%d left a final state meanwhile (retried) and were kept\n", kept)
	}
	return nil
}

func printPlan(a *sharedcli.App, r purgeRecord) {
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

func isTerminal(a *sharedcli.App) bool {
	f, ok := a.In.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirm asks on the terminal; without one the answer is no.
func confirm(a *sharedcli.App, n int) bool {
	if !isTerminal(a) {
		return false
	}
	fmt.Fprintf(a.Err, "Delete these %d messages? This cannot be undone. [y/N] ", n)
	answer, _ := bufio.NewReader(a.In).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

func fileBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
