package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	sharedcli "github.com/tmux-amq/tamq/internal/cli"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/daemon"
)

func newHistoryCmd(a *sharedcli.App) *cobra.Command {
	var args protocol.HistoryArgs
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List messages and their delivery state, newest first",
		Long: `List messages with their delivery state, newest first. Bodies stay local and
are shown only with --body.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			var res protocol.HistoryResult
			page := args
			for {
				var part protocol.HistoryResult
				if err := daemon.Client(p, 30*time.Second).Call(cmd.Context(), protocol.OpHistory, page, &part); err != nil {
					return err
				}
				res.Messages = append(res.Messages, part.Messages...)
				if part.Next == "" || len(res.Messages) >= args.Limit {
					break
				}
				page.After, page.Limit = part.Next, args.Limit-len(res.Messages)
			}
			if res.Messages == nil {
				res.Messages = []protocol.Message{}
			}
			if a.JSON {
				return a.PrintJSON(res.Messages)
			}
			tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCREATED\tFROM\tTO\tSTATE\tATTEMPTS\tMODE")
			for _, m := range res.Messages {
				from := m.Sender
				if m.Provenance != "" {
					from += "/" + m.Provenance
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.ID, m.CreatedAt.Local().Format(time.DateTime), from, m.Target, m.State, m.Attempts, m.AckMode)
				if m.Body != nil {
					fmt.Fprintf(tw, "\t%q\n", *m.Body)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&args.Repo, "repo", "", "only messages from or to this repo")
	cmd.Flags().StringVar(&args.State, "state", "", "only messages in this state")
	cmd.Flags().IntVar(&args.Limit, "limit", 50, "at most this many messages")
	cmd.Flags().BoolVar(&args.IncludeBody, "body", false, "show message bodies")
	cmd.RegisterFlagCompletionFunc("repo", sharedcli.CompleteRepos(a))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"queued", "delivering", "injected", "awaiting_ack", "acknowledged", "failed"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
