package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newHistoryCmd(a *app.App) *cobra.Command {
	var f filterFlags
	var after string
	var limit int
	var withBody bool
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List messages and their delivery state, newest first",
		Long: `List messages with their delivery state, newest first, a page at a time:
--after ID continues after the last message of a page. It reads the local
database directly, so it works while the service is stopped. Bodies stay local
and are shown only with --body.

FROM is who sent the message: a repo for its window's agent; operator/o for you,
a tamq send run outside any tamq window; REPO/o for a line you typed in REPO's
window. The /o marks a person, not an agent, and the receiving window shows the
same label: From:operator/o: text. (--json has it as "provenance": "o".)`,
		Example: `  tamq history --repo net-kingdom --since 7d
  tamq history --state failed --json
  tamq history --limit 20 --after 019a5c1e-...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := f.filter(a.Now())
			if err != nil {
				return err
			}
			if err := scopeToCaller(cmd.Context(), a, &filter); err != nil {
				return err
			}
			if limit <= 0 {
				return app.UsageError("--limit must be at least 1")
			}
			db, ok, err := openHistory(cmd.Context(), a)
			if err != nil {
				return err
			}
			var msgs []queue.Message
			if ok {
				defer db.Close()
				if msgs, err = store.History(cmd.Context(), db, store.Page{Filter: filter, After: after, Limit: limit}); err != nil {
					return err
				}
			}
			records := make([]api.Message, len(msgs))
			for i, m := range msgs {
				records[i] = api.MessageOf(m, withBody)
			}
			if a.JSON {
				return a.PrintJSON(records)
			}
			if len(records) == 0 {
				a.Notef("no messages match")
				return nil
			}
			tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
			header := "ID\tCREATED\tFROM\tTO\tSTATE\tATTEMPTS\tMODE"
			if withBody {
				header += "\tBODY" // last, so long bodies widen no other column
			}
			fmt.Fprintln(tw, header)
			// Every field is read from the database, which may be old or
			// hold replayed rows: all are escaped. A body is shown quoted
			// (%q escapes every character that is not printable, so nothing
			// in it acts either) to keep one line per message.
			esc := textsafe.Escape
			for _, m := range records {
				from := m.Sender
				if m.Provenance != "" {
					from += "/" + m.Provenance
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s", esc(m.ID), m.CreatedAt.Local().Format(time.DateTime), esc(from), esc(m.Target), esc(m.State), m.Attempts, esc(m.AckMode))
				if m.Body != nil {
					fmt.Fprintf(tw, "\t%q", *m.Body)
				}
				fmt.Fprintln(tw)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(records) == limit {
				a.Notef("more may follow: --after %s", records[len(records)-1].ID)
			}
			return nil
		},
	}
	f.register(a, cmd)
	cmd.Flags().StringVar(&after, "after", "", "continue after this message id (the last of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", store.DefaultPageLimit, "at most this many messages")
	cmd.Flags().BoolVar(&withBody, "body", false, "show message bodies")
	return cmd
}
